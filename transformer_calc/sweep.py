"""`tcalc sweep`: a grid over models, workloads, parallelism and hardware, one row per point.

The report layer: it composes the estimators (memory, flops, inference) for every point of the
Cartesian product of the axes. Each point costs O(1) (the estimators are closed forms); configs
are validated once per distinct value, not once per point. Points the model cannot run (T does
not divide the heads, P exceeds the layers, ...) are skipped and counted, with the first reasons.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transformer_calc.config import (
    ModelConfig,
    Parallelism,
    Training,
    Workload,
    build,
)
from transformer_calc.errors import TcalcError

# Axis name -> the CLI flag that sets it (also the row key).
AXES = ("model", "B", "S", "T", "P", "dp", "zero", "ep", "cp", "recompute", "flash", "gpu", "dtype")
TRAINING_METRICS = ("memory", "weights", "activations", "fits", "headroom", "flops", "train_days")
INFERENCE_METRICS = ("kv_cache", "inference_memory", "inference_fits", "ttft_s", "decode_s", "tokens_per_s", "bound")
METRICS = TRAINING_METRICS + INFERENCE_METRICS
DEFAULT_METRICS = ("memory", "fits", "flops")
INT_AXES = ("B", "S", "T", "P", "dp", "zero", "ep", "cp")
MAX_POINTS = 1_000_000  # a guard against typos such as --B 1..10000000:1


def parse_values(axis: str, text: str) -> list[Any]:
    """One axis of the grid from its CLI text.

    Comma lists mix values and ranges: `a..b` doubles from a up to b (1..64 -> 1, 2, 4, ..., 64:
    batch sizes and parallel degrees), `a..b:s` steps by s (512..4096:512). Values keep their
    order; duplicates are dropped.
    """
    out: list[Any] = []
    for raw in (part.strip() for part in str(text).split(",")):
        if not raw:
            raise TcalcError(f"--{axis} {text!r}: empty value in the list; write e.g. 1,2,4..64")
        if axis in INT_AXES:
            out.extend(_int_values(axis, raw))
        elif axis == "flash":
            lowered = raw.lower()
            if lowered not in ("true", "false", "on", "off", "yes", "no", "1", "0"):
                raise TcalcError(f"--flash {raw!r}: use true/false (on/off)")
            out.append(lowered in ("true", "on", "yes", "1"))
        else:
            out.append(raw)
    return list(dict.fromkeys(out))  # drop repeats, keep the order


def _int_values(axis: str, raw: str) -> list[int]:
    match = re.fullmatch(r"(\d+)\.\.(\d+)(?::(\d+))?", raw)
    if match:
        lo, hi, step = int(match.group(1)), int(match.group(2)), match.group(3)
        low = 0 if axis == "zero" and step is not None else 1
        if lo < low or hi < lo or (axis == "zero" and hi > 3):
            raise TcalcError(f"--{axis} {raw!r}: a range a..b needs {low} <= a <= b" + (" <= 3" if axis == "zero" else ""))
        if step is not None:
            if int(step) < 1:
                raise TcalcError(f"--{axis} {raw!r}: the step must be >= 1")
            if (hi - lo) // int(step) > MAX_POINTS:
                raise TcalcError(f"--{axis} {raw!r}: more than {MAX_POINTS:,} values")
            return list(range(lo, hi + 1, int(step)))
        values = []
        while lo <= hi:
            values.append(lo)
            lo *= 2
        return values
    if not raw.isdigit() or int(raw) < (0 if axis == "zero" else 1) or (axis == "zero" and int(raw) > 3):
        hint = "ZeRO stages 0 to 3" if axis == "zero" else "whole numbers >= 1"
        raise TcalcError(f"--{axis} {raw!r}: use {hint}, lists (1,2,8) or ranges (1..64, 512..4096:512)")
    return [int(raw)]


@dataclass(frozen=True)
class SweepSpec:
    """The grid: each axis's values, the metrics, and the fixed settings for every point."""

    axes: dict[str, list[Any]]
    metrics: tuple[str, ...] = DEFAULT_METRICS
    training: dict[str, Any] = field(default_factory=dict)  # precision, optimizer, sp, ... (fixed)
    new_tokens: int = 1
    tokens: int | None = None  # token budget for train_days
    mfu: float = 0.4

    @property
    def size(self) -> int:
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n


def check_metrics(names: list[str]) -> tuple[str, ...]:
    for name in names:
        if name not in METRICS:
            import difflib

            near = difflib.get_close_matches(name, METRICS, n=1, cutoff=0.5)
            hint = f"did you mean {near[0]}?" if near else f"choose from {', '.join(METRICS)}"
            raise TcalcError(f"--metrics: unknown metric {name!r}; {hint}")
    return tuple(names)


@dataclass
class SweepResult:
    rows: list[dict[str, Any]]
    skipped: int
    reasons: list[str]


def run_sweep(
    spec: SweepSpec,
    models: dict[str, ModelConfig],
    gpus: dict[str, Any],
    progress: Callable[[int], None] | None = None,
) -> SweepResult:
    """Every point of the grid: its axis values and the requested metrics (skipping the points a
    model cannot run). `models` and `gpus` map the axis values to resolved objects."""
    from transformer_calc.flops import count_flops, training_time_s, SECONDS_PER_DAY
    from transformer_calc.hardware import peak_flops
    from transformer_calc.inference import InferenceSpec, decode, inference_memory, kv_cache, prefill_step
    from transformer_calc.timeline import fit_capacity, peak_memory

    want_training = any(m in TRAINING_METRICS for m in spec.metrics)
    want_inference = any(m in INFERENCE_METRICS for m in spec.metrics)
    names = list(spec.axes)
    rows: list[dict[str, Any]] = []
    reasons: list[str] = []
    skipped = 0
    trainings: dict[tuple, Training] = {}
    for i, values in enumerate(itertools.product(*spec.axes.values())):
        if progress is not None and i % 256 == 0:
            progress(i)
        point = dict(zip(names, values))
        m = models[point["model"]]
        device = gpus[point["gpu"]] if point.get("gpu") is not None else None
        row: dict[str, Any] = dict(point)
        try:
            S = point.get("S") or m.max_seq_len
            B = point.get("B", 1)
            row["S"], row["B"] = S, B
            if want_training:
                w = Workload.model_construct(seq_len=S, batch_size=B)
                key = (point.get("recompute"), point.get("flash"))
                tr = trainings.get(key)
                if tr is None:
                    settings = {k: v for k, v in spec.training.items() if k != "sequence_parallel"}
                    tr = build(
                        Training,
                        {**settings, **{k: v for k, v in (("recompute", key[0]), ("flash", key[1])) if v is not None}},
                        "sweep",
                    )
                    trainings[key] = tr
                par = Parallelism.model_construct(
                    tensor=point.get("T", 1), pipeline=point.get("P", 1), data=point.get("dp", 1),
                    zero=point.get("zero", 0), expert=point.get("ep", 1), expert_tensor=None,
                    context=point.get("cp", 1), virtual_stages=1,
                    sequence_parallel=bool(spec.training.get("sequence_parallel", False)),
                )
                tl = peak_memory(m, w, tr, par, all_stages=False)
                st = tl.stage
                row["memory"], row["weights"], row["activations"] = tl.peak_bytes, st.weights, st.activations
                if device is not None:
                    usable = fit_capacity(device.memory_bytes)
                    row["fits"] = tl.peak_bytes <= usable
                    row["headroom"] = usable - tl.peak_bytes
                step = count_flops(m, w)
                row["flops"] = step.total
                if "train_days" in spec.metrics and spec.tokens and device is not None:
                    total = step.total // step.tokens * spec.tokens
                    gpus_n = par.tensor * par.pipeline * par.data
                    peak = peak_flops(device, point.get("dtype") or ("bf16" if "bf16" in device.peak_flops else "fp16"))
                    row["train_days"] = training_time_s(total, gpus_n, peak, spec.mfu) / SECONDS_PER_DAY
            if want_inference:
                if device is None:
                    raise TcalcError("inference metrics need --gpu")
                ispec = InferenceSpec(
                    batch_size=B, prompt_len=S, new_tokens=spec.new_tokens, tensor_parallel=point.get("T", 1),
                    weight_dtype=point.get("dtype") or "bf16",
                )
                if "kv_cache" in spec.metrics:
                    row["kv_cache"] = kv_cache(m, ispec).per_gpu_bytes
                if {"inference_memory", "inference_fits"} & set(spec.metrics):
                    mem = inference_memory(m, device, ispec)
                    row["inference_memory"], row["inference_fits"] = mem.total_bytes, mem.fits
                if "ttft_s" in spec.metrics:
                    row["ttft_s"] = prefill_step(m, device, ispec).seconds
                if {"decode_s", "tokens_per_s", "bound"} & set(spec.metrics):
                    dec = decode(m, device, ispec)
                    row["decode_s"], row["tokens_per_s"], row["bound"] = dec.seconds_per_token, dec.tokens_per_s, dec.bound
        except (ValueError, TcalcError) as exc:
            skipped += 1
            if len(reasons) < 5:
                reasons.append(f"{_label(point)}: {exc}")
            continue
        rows.append({k: row[k] for k in (*names, *("B", "S"), *spec.metrics) if k in row})
    return SweepResult(rows=rows, skipped=skipped, reasons=reasons)


def _label(point: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in point.items())


def select(rows: list[dict[str, Any]], fits_only: bool, sort: str | None, limit: int | None) -> list[dict[str, Any]]:
    """Filter (only points that fit), sort by a metric or axis (prefix '-' for descending), cut."""
    if fits_only:
        rows = [r for r in rows if r.get("fits", r.get("inference_fits", True))]
    if sort:
        key, reverse = (sort[1:], True) if sort.startswith("-") else (sort, False)
        if rows and key not in rows[0]:
            raise TcalcError(f"--sort {sort!r}: not a column; choose from {', '.join(rows[0])}")
        rows = sorted(rows, key=lambda r: (r[key] is None, r[key]), reverse=reverse)
    return rows[:limit] if limit else rows

