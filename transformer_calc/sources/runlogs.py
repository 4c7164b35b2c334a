"""The user's measurements for `tcalc calibrate` (issue 37): a runs file (YAML or CSV) and the logs
it names, read as hostile input (sources/files.py's budgets).

A run is a training layout with its measured step time or throughput, or a serving setup with its
measured TTFT, TPOT or output throughput. Its measurement is given in the file (`measured:` or the
metric's key at the run's top level) or read from the log its `log:` key names, relative to the
runs file:

    megatron    Megatron-LM / Megatron-core / NeMo training log: the lines
                `iteration N/ M | ... | elapsed time per iteration (ms): X | ...`; the first is
                dropped (warm-up) when there are more, the median of the rest is the step time
    torchtitan  torchtitan's step lines `step: N  loss: ...  tps: X ...` (ANSI colours stripped):
                tokens/s per GPU, the first dropped, the median of the rest
    vllm        `vllm bench serve --save-result` JSON: mean_ttft_ms, mean_tpot_ms, output_throughput
    trtllm      trtllm-bench `--report_json` JSON: streaming_metrics.avg_ttft_ms / avg_tpot_ms,
                performance.system_output_throughput_tok_s

Every problem is one TcalcError naming the file (and the line of a log) and what is missing.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from pathlib import Path
from typing import Any

from transformer_calc.errors import TcalcError, clip
from transformer_calc.sources.files import parse_json, parse_yaml, read_user_file

TRAIN_METRICS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu")
SERVE_METRICS = ("ttft_s", "tpot_s", "output_tokens_per_s")
METRICS = TRAIN_METRICS + SERVE_METRICS
LOG_KINDS = ("megatron", "torchtitan", "vllm", "trtllm")
# What a training run must state (the rest: tcalc's defaults, as `tcalc train` takes them)
TRAIN_REQUIRED = ("model", "gpu", "gpus", "seq_len", "global_batch")
SERVE_REQUIRED = ("model", "gpu", "prompt_len", "output_len")
MAX_RUNS = 10_000
MAX_LOG_BYTES = 64 << 20  # a training log or a bench result with its per-request lists: tens of MB
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

MEGATRON_LINE = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
MEGATRON_TIME = re.compile(r"elapsed time per iteration \(ms\):\s*([0-9.eE+-]+)")
MEGATRON_BATCH = re.compile(r"global batch size:\s*(\d+)")
TITAN_LINE = re.compile(r"\bstep:\s*(\d+)\s")
TITAN_TPS = re.compile(r"\b(?:tps|wps):\s*([0-9][0-9,]*(?:\.[0-9]+)?)")


def file_name(path: Path | str) -> str:
    """A user's path as messages name it: whole up to 80 characters, else its last 60 ("...")."""
    text = str(path)
    return text if len(text) <= 80 else "..." + text[-60:]


def _number(text: str, where: str) -> float:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        raise TcalcError(f"{where}: {clip(text, 40)} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise TcalcError(f"{where}: {clip(text, 40)} must be a positive finite number")
    return value


def _steady(values: list[float]) -> float:
    """The median of a log's per-step values, the first (warm-up) dropped when there are more."""
    return statistics.median(values[1:] if len(values) > 1 else values)


# ---------------------------------------------------------------------------- logs
def megatron_log(text: str, name: str) -> dict[str, Any]:
    """{'step_time_s': median, 'global_batch': the lines' global batch size (when printed),
    'steps': lines read} from a Megatron training log."""
    times, batches = [], set()
    for n, line in enumerate(text.splitlines(), 1):
        if not MEGATRON_LINE.search(line):
            continue
        t = MEGATRON_TIME.search(line)
        if not t:
            raise TcalcError(f"{name}, line {n}: a Megatron iteration line without 'elapsed time per iteration (ms): X'")
        times.append(_number(t.group(1), f"{name}, line {n}") / 1e3)
        b = MEGATRON_BATCH.search(line)
        if b:
            batches.add(int(b.group(1)))
    if not times:
        raise TcalcError(f"{name}: no Megatron iteration line ('iteration N/ M | ... | elapsed time per iteration (ms): X')")
    if len(batches) > 1:
        raise TcalcError(f"{name}: the global batch size changes during the log ({', '.join(map(str, sorted(batches)))}); "
                         "give a log of one batch size")
    out: dict[str, Any] = {"step_time_s": _steady(times), "steps": len(times)}
    if batches:
        out["global_batch"] = batches.pop()
    return out


def torchtitan_log(text: str, name: str) -> dict[str, Any]:
    """{'tokens_per_s_per_gpu': median tps, 'steps': lines read} from a torchtitan training log."""
    tps = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = ANSI.sub("", raw)
        if not TITAN_LINE.search(line) or "loss:" not in line:
            continue
        t = TITAN_TPS.search(line)
        if not t:
            raise TcalcError(f"{name}, line {n}: a torchtitan step line without 'tps: X' (tokens per second per GPU)")
        tps.append(_number(t.group(1), f"{name}, line {n}"))
    if not tps:
        raise TcalcError(f"{name}: no torchtitan step line ('step: N  loss: ...  tps: X')")
    return {"tokens_per_s_per_gpu": _steady(tps), "steps": len(tps)}


def _json_number(data: Any, path: tuple[str, ...], name: str) -> float | None:
    node = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise TcalcError(f"{name}: {'.'.join(path)} is {clip(node, 40)}, not a number")
    return _number(str(node), f"{name}: {'.'.join(path)}")


def vllm_json(text: str, name: str) -> dict[str, Any]:
    """`vllm bench serve --save-result`: TTFT, TPOT (mean, ms) and output throughput (tok/s), and
    the prompt and output lengths and concurrency it states."""
    data = parse_json(text, name)
    if not isinstance(data, dict):
        raise TcalcError(f"{name}: a vllm bench serve result is a JSON object")
    out: dict[str, Any] = {}
    for key, path, scale in (("ttft_s", ("mean_ttft_ms",), 1e-3), ("tpot_s", ("mean_tpot_ms",), 1e-3),
                             ("output_tokens_per_s", ("output_throughput",), 1.0)):
        v = _json_number(data, path, name)
        if v is not None:
            out[key] = v * scale
    if not out:
        raise TcalcError(f"{name}: no mean_ttft_ms, mean_tpot_ms or output_throughput: not a vllm bench serve result")
    completed = _json_number(data, ("completed",), name)
    if completed:
        for key, total in (("prompt_len", "total_input_tokens"), ("output_len", "total_output_tokens")):
            v = _json_number(data, (total,), name)
            if v:
                out[key] = max(1, round(v / completed))
    conc = data.get("max_concurrency")
    if isinstance(conc, int) and not isinstance(conc, bool) and conc > 0:
        out["concurrency"] = conc
    return out


def trtllm_json(text: str, name: str) -> dict[str, Any]:
    """trtllm-bench `--report_json`: TTFT and TPOT (streaming_metrics, ms), output throughput
    (performance.system_output_throughput_tok_s), the mean lengths and concurrency (request_info)
    and T (world_info.tp_size)."""
    data = parse_json(text, name)
    if not isinstance(data, dict):
        raise TcalcError(f"{name}: a trtllm-bench report is a JSON object")
    out: dict[str, Any] = {}
    for key, path, scale in (("ttft_s", ("streaming_metrics", "avg_ttft_ms"), 1e-3),
                             ("tpot_s", ("streaming_metrics", "avg_tpot_ms"), 1e-3),
                             ("output_tokens_per_s", ("performance", "system_output_throughput_tok_s"), 1.0)):
        v = _json_number(data, path, name)
        if v is not None:
            out[key] = v * scale
    if not out:
        raise TcalcError(f"{name}: no performance.system_output_throughput_tok_s or streaming_metrics.avg_ttft_ms / "
                         "avg_tpot_ms: not a trtllm-bench report")
    for key, path in (("prompt_len", ("request_info", "avg_input_length")), ("output_len", ("request_info", "avg_output_length")),
                      ("concurrency", ("request_info", "avg_num_concurrent_requests")), ("tensor", ("world_info", "tp_size"))):
        v = _json_number(data, path, name)
        if v:
            out[key] = max(1, round(v))
    return out


READERS = {"megatron": megatron_log, "torchtitan": torchtitan_log, "vllm": vllm_json, "trtllm": trtllm_json}


def detect_kind(text: str, name: str) -> str:
    """Which log `text` is: a JSON object with trtllm-bench's sections or vllm's keys, else a text
    log with Megatron's iteration lines or torchtitan's step lines."""
    head = text.lstrip()[:1]
    if head == "{":
        return "trtllm" if '"streaming_metrics"' in text or '"world_info"' in text else "vllm"
    if "elapsed time per iteration" in text or MEGATRON_LINE.search(text):
        return "megatron"
    if TITAN_LINE.search(ANSI.sub("", text)):
        return "torchtitan"
    raise TcalcError(f"{name}: not a log tcalc reads ({', '.join(LOG_KINDS)}); state `log_kind:` or give the "
                     "measurement in the runs file")


def read_log_text(path: Path) -> str:
    """A log's text: a regular, non-empty text file of at most MAX_LOG_BYTES (a run's log is larger
    than the 1 MiB a runs file may be); bytes that are not UTF-8 (a progress bar's) replaced."""
    return read_user_file(path, "log", name=file_name(path), limit=MAX_LOG_BYTES, plural="logs",
                          hint=" (keep the iteration lines: grep 'elapsed time per iteration' or 'step:')",
                          give="the text log", lenient=True)


def read_log(path: Path, kind: str | None = None) -> tuple[str, dict[str, Any]]:
    """(the log's kind, what it measured) for one log file."""
    text = read_log_text(path)
    name = file_name(path)
    kind = kind or detect_kind(text, name)
    if kind not in READERS:
        raise TcalcError(f"{name}: log_kind {clip(kind, 30)} is not one of {', '.join(LOG_KINDS)}")
    return kind, READERS[kind](text, name)


# ---------------------------------------------------------------------------- runs files
def _rows_yaml(text: str, name: str) -> list[dict[str, Any]]:
    data = parse_yaml(text, name)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise TcalcError(f"{name}: a runs file is a mapping with a `runs:` list (and optional `defaults:`)")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise TcalcError(f"{name}: `defaults:` must be a mapping of run keys")
    unknown = sorted(set(data) - {"runs", "defaults"})
    if unknown:
        raise TcalcError(f"{name}: unknown top-level key {clip(unknown[0], 40)}; a runs file has `runs:` and `defaults:`")
    rows = []
    for i, run in enumerate(data["runs"], 1):
        if not isinstance(run, dict):
            raise TcalcError(f"{name}: run {i} is {clip(run, 40)}, not a mapping of keys")
        rows.append({**defaults, **run})
    return rows


def _csv_value(text: str) -> Any:
    t = text.strip()
    if t == "":
        return None
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return t


def _rows_csv(text: str, name: str) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(text))
    lines = [row for row in reader if any(cell.strip() for cell in row)]
    if len(lines) < 2:
        raise TcalcError(f"{name}: a runs CSV is a header row of run keys and one row per run")
    header = [h.strip() for h in lines[0]]
    rows = []
    for n, row in enumerate(lines[1:], 2):
        if len(row) != len(header):
            raise TcalcError(f"{name}, row {n}: {len(row)} cells for {len(header)} columns")
        rows.append({k: v for k, v in ((h, _csv_value(c)) for h, c in zip(header, row)) if v is not None})
    return rows


def read_runs(path: Path | str) -> list[dict[str, Any]]:
    """The runs of one runs file (YAML, or CSV by its .csv suffix), each with `measured` holding its
    metrics (from the file or its log) and `where` naming it in messages."""
    path = Path(path)
    name = file_name(path)
    text = read_user_file(path, "runs file")
    if path.suffix.lower() == ".csv":
        rows = _rows_csv(text, name)
    elif path.suffix.lower() in (".json", ".log", ".txt", ".out"):
        raise TcalcError(f"{name}: a log holds the measurement, not the run (model, GPU, layout); name it from a runs "
                         "file's `log:` key (docs/cli.md, tcalc calibrate)")
    else:
        rows = _rows_yaml(text, name)
    if len(rows) > MAX_RUNS:
        raise TcalcError(f"{name}: {len(rows):,} runs; at most {MAX_RUNS:,} are read")
    return [_run(row, f"{name}, run {row.get('id', i)!s:.40}", path.parent) for i, row in enumerate(rows, 1)]


def _run(row: dict[str, Any], where: str, folder: Path) -> dict[str, Any]:
    """One run: its fields, its measurements (the row's, then its log's), kind (train or serve) and where."""
    measured = _measured(row, where)
    run = {k: v for k, v in row.items() if k not in METRICS and k != "measured"}
    if "log" in run:
        log = run.pop("log")
        if not isinstance(log, str):
            raise TcalcError(f"{where}: log must be a file name")
        kind, found = read_log(folder / log, run.pop("log_kind", None))
        for key, v in found.items():
            if key in METRICS:
                measured.setdefault(key, v)
            elif key == "steps":
                run["log_steps"] = v
            elif key in run and run[key] != v:
                raise TcalcError(f"{where}: {key} is {clip(run[key], 20)} but the log says {v}; correct one")
            else:
                run[key] = v
        run["log_kind"] = kind
    if not measured:
        raise TcalcError(f"{where}: no measurement; give one of {', '.join(METRICS)} (or `log:` naming a "
                         f"{', '.join(LOG_KINDS)} log)")
    serving = any(k in SERVE_METRICS for k in measured)
    if serving and any(k in TRAIN_METRICS for k in measured):
        raise TcalcError(f"{where}: both training and serving metrics; a run is one or the other")
    required = SERVE_REQUIRED if serving else TRAIN_REQUIRED
    missing = [k for k in required if k not in run]
    if missing:
        raise TcalcError(f"{where}: missing {', '.join(missing)} (a {'serving' if serving else 'training'} run "
                         f"states {', '.join(required)})")
    return run | {"measured": measured, "kind": "serve" if serving else "train", "where": where}


def _measured(row: dict[str, Any], where: str) -> dict[str, Any]:
    """The metrics a row states, under `measured:` or at its top level, each a finite number."""
    measured: dict[str, Any] = {}
    given = row.get("measured") or {}
    if not isinstance(given, dict):
        raise TcalcError(f"{where}: measured must be a mapping of metric: value")
    for key in METRICS:
        for src in (given, row):
            if key in src:
                v = src[key]
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise TcalcError(f"{where}: {key} is {clip(v, 40)}, not a number")
                measured[key] = _number(str(v), f"{where}: {key}")
    extra = sorted(k for k in given if k not in METRICS)
    if extra:
        raise TcalcError(f"{where}: measured {clip(extra[0], 40)} is not a metric tcalc fits ({', '.join(METRICS)})")
    return measured
