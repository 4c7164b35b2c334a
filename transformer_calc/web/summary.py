"""The answer first (issue 38): each page's verdict banner and key numbers, read from the result's
JSON (what `-f json` writes), so every number shown carries its JSON key and exact value.

A banner is a status (ok: fits / meets the targets; bad: does not fit / no layout; info: nothing
to judge), one sentence that says it in words, with by how much, and what binds, and the three or
four numbers a reader of that page came for. A command without an entry here shows no banner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from transformer_calc.render.common import fmt_bytes, fmt_flops, fmt_rate, fmt_s
from transformer_calc.render.serve import layout_words


@dataclass
class Number:
    label: str  # the glossary's words (docs/notation.md), not the JSON key
    text: str  # formatted with its unit
    key: str  # the JSON path
    value: str  # the exact JSON value


@dataclass
class Banner:
    status: str  # ok | bad | info
    headline: str
    numbers: list[Number] = field(default_factory=list)


def _get(data: Any, key: str) -> Any:
    for part in key.split("."):
        if isinstance(data, list):
            data = data[int(part)] if part.isdigit() and int(part) < len(data) else None
        elif isinstance(data, dict):
            data = data.get(part)
        else:
            return None
    return data


def _n(data: Any, label: str, key: str, fmt: Any) -> Number | None:
    value = _get(data, key)
    if value is None:
        return None
    return Number(label, fmt(value), key, json.dumps(value))


def _tokens(x: float) -> str:
    return f"{x:,.0f} tokens/s" if x >= 10 else f"{x:.3g} tokens/s"


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _count(x: float) -> str:
    """Parameters as people say them: 8.03 B, 124.4 M."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if x >= scale:
            return f"{x / scale:.4g} {unit}"
    return f"{x:,}"


def _days(x: float) -> str:
    return f"{x:,.1f} days" if x >= 1 else fmt_s(x * 86400)


def _memory(d: dict[str, Any]) -> Banner:
    gpu, peak = _get(d, "gpu.name"), _get(d, "memory.peak_bytes")
    usable, headroom = _get(d, "gpu.usable_bytes"), _get(d, "gpu.headroom_bytes")
    phase = _get(d, "memory.peak_phase")
    if gpu is None or usable is None:
        status, words = "info", f"Peak training memory per GPU: {fmt_bytes(peak)}, during the {phase}."
    elif d.get("fits"):
        status = "ok"
        words = (f"Fits on {gpu}: {fmt_bytes(peak)} of {fmt_bytes(usable)} usable ({100 * peak / usable:.0f} %), "
                 f"{fmt_bytes(headroom)} to spare; the peak is the {phase}.")
    else:
        status = "bad"
        words = (f"Does not fit on {gpu}: {fmt_bytes(peak)} needed, {fmt_bytes(-headroom)} over the "
                 f"{fmt_bytes(usable)} usable; the peak is the {phase}.")
        t = _get(d, "fit.min_tensor_parallel")
        if t:
            words += f" It fits from T = {t}."
    numbers = [_n(d, "peak memory per GPU", "memory.peak_bytes", fmt_bytes),
               _n(d, "usable on the GPU", "gpu.usable_bytes", fmt_bytes),
               _n(d, "headroom", "gpu.headroom_bytes", fmt_bytes),
               _n(d, "largest micro-batch that fits", "fit.max_micro_batch", lambda v: f"{v:,}")
               if _get(d, "fit.max_micro_batch") else None]
    return Banner(status, words, [n for n in numbers if n])


def _inference(d: dict[str, Any]) -> Banner:
    fits, total = _get(d, "memory.fits"), _get(d, "memory.per_gpu.total_bytes")
    gpu, gpus, headroom = _get(d, "inference.gpu"), _get(d, "inference.gpus"), _get(d, "memory.headroom_bytes")
    bound = _get(d, "decode.bound")
    where = f"{gpus} × {gpu}" if gpus and gpus > 1 else f"{gpu}"
    if fits:
        words = (f"Fits on {where}: {fmt_bytes(total)} per GPU, {fmt_bytes(headroom)} to spare; "
                 f"decode is {bound}-bound.")
    else:
        words = f"Does not fit on {where}: {fmt_bytes(total)} per GPU, {fmt_bytes(-headroom)} over."
        t = _get(d, "memory.min_tensor_parallel")
        if t:
            words += f" It fits from T = {t}."
    numbers = [_n(d, "memory per GPU", "memory.per_gpu.total_bytes", fmt_bytes),
               _n(d, "time to first token (expected)", "expected.time_to_first_token_s", fmt_s),
               _n(d, "time per output token (expected)", "expected.time_per_output_token_s", fmt_s),
               _n(d, "decode speed (expected)", "expected.decode_tokens_per_s", _tokens)]
    return Banner("ok" if fits else "bad", words, [n for n in numbers if n])


def _serve(d: dict[str, Any]) -> Banner:
    best = d.get("best")
    gpus, gpu = _get(d, "serve.gpus"), _get(d, "serve.gpu")
    if not best:
        reasons = [r.get("reason") for r in d.get("layouts") or [] if r.get("reason")]
        words = f"No layout of {gpus} × {gpu} meets the targets" + (f": {reasons[0]}" if reasons else ".")
        return Banner("bad", words, [])
    replicas = best["replicas"]
    layout = layout_words(best["tensor"], replicas)
    ttft, tpot = _get(d, "serve.targets.ttft_s"), _get(d, "serve.targets.tpot_s")
    if tpot and best["tpot_s"] >= 0.97 * tpot:
        binds = f"the TPOT target ({fmt_s(tpot)}) caps the concurrency"
    elif ttft and best["ttft_s"] >= 0.97 * ttft:
        binds = f"the TTFT target ({fmt_s(ttft)}) caps the concurrency"
    elif best.get("max_concurrent_sequences") and best["concurrency"] >= best["max_concurrent_sequences"]:
        binds = "the KV cache caps the concurrency"
    else:
        binds = None
    words = (f"Best on {gpus} × {gpu}: {layout}, {best['concurrency']:,} sequences in flight per replica, "
             f"{best['tokens_per_s']:,.0f} output tokens/s" + (f"; {binds}." if binds else "."))
    numbers = [_n(d, "output tokens/s", "best.tokens_per_s", _tokens),
               _n(d, "time to first token", "best.ttft_s", fmt_s),
               _n(d, "time per output token", "best.tpot_s", fmt_s),
               _n(d, "cost per million output tokens", "cost.cost_per_million_output_tokens", lambda v: f"${v:,.3f}")]
    return Banner("ok", words, [n for n in numbers if n])


def _train(d: dict[str, Any]) -> Banner:
    gpus, gpu = _get(d, "layout.gpus"), d.get("gpu")
    if not d.get("fits"):
        needs = d.get("needs") or []
        words = (f"Does not fit on {gpus} × {gpu}: {fmt_bytes(_get(d, 'memory.peak_bytes') or 0)} per GPU of "
                 f"{fmt_bytes(_get(d, 'memory.usable_bytes') or 0)} usable; no step time."
                 + (f" It would fit with {needs[0]}." if needs else ""))
        return Banner("bad", words, [n for n in [_n(d, "peak memory per GPU", "memory.peak_bytes", fmt_bytes)] if n])
    parts = {k.removesuffix("_s"): v for k, v in (d.get("breakdown") or {}).items() if isinstance(v, (int, float))}
    binding = max(parts, key=lambda k: parts[k]) if parts else None
    words = (f"Fits on {gpus} × {gpu}: a step takes {fmt_s(d['step_time_s'])}"
             + (f", most of it {binding.replace('_', ' ')}" if binding else "") + ".")
    numbers = [_n(d, "step time", "step_time_s", fmt_s), _n(d, "tokens/s", "tokens_per_s", _tokens),
               _n(d, "MFU", "mfu", _pct), _n(d, "days for the token budget", "budget.days", _days),
               _n(d, "cost of the token budget", "budget.cost", lambda v: f"${v:,.0f}"),
               _n(d, "peak memory per GPU", "memory.peak_bytes", fmt_bytes)]
    return Banner("ok", words, [n for n in numbers if n][:5])


def _plan(d: dict[str, Any]) -> Banner:
    plans = d.get("plans") or []
    if not plans:
        return Banner("bad", f"No layout of {d.get('gpus')} × {d.get('gpu')} fits.", [])
    lay = plans[0]["layout"]
    words = (f"Fastest of {d.get('feasible'):,} layouts that fit: T = {lay['tensor']}, P = {lay['pipeline']}, "
             f"dp = {lay['data']}, ZeRO-{lay['zero']}, micro-batch {plans[0]['micro_batch']}.")
    numbers = [_n(d, "step time", "plans.0.step_time_s", fmt_s), _n(d, "tokens/s", "plans.0.tokens_per_s", _tokens),
               _n(d, "MFU", "plans.0.mfu", _pct), _n(d, "peak memory per GPU", "plans.0.peak_bytes", fmt_bytes)]
    return Banner("ok", words, [n for n in numbers if n])


def _params(d: dict[str, Any]) -> Banner:
    total, active = _get(d, "params.total"), _get(d, "params.active")
    words = f"{total:,} parameters" + (f", {active:,} active per token" if active and active != total else "") + "."
    numbers = [_n(d, "parameters", "params.total", _count),
               _n(d, "active per token", "params.active", _count) if active != total else None,
               _n(d, "non-embedding (Kaplan N)", "params.non_embedding", _count),
               _n(d, "weights", "weights.bytes", fmt_bytes)]
    return Banner("info", words, [n for n in numbers if n])


def _flops(d: dict[str, Any]) -> Banner:
    days = _get(d, "training.days")
    words = f"{fmt_flops(_get(d, 'flops.total'))} per step" + (f"; {days:,.1f} days for the token budget." if days else ".")
    numbers = [_n(d, "model FLOPs per step", "flops.total", fmt_flops),
               _n(d, "FLOPs per token", "flops.per_token", fmt_flops),
               _n(d, "training days", "training.days", _days)]
    return Banner("info", words, [n for n in numbers if n])


def _mfu(d: dict[str, Any]) -> Banner:
    words = f"MFU {100 * d['mfu']:.1f} %, HFU {100 * d['hfu']:.1f} %."
    numbers = [_n(d, "MFU", "mfu", _pct), _n(d, "HFU", "hfu", _pct),
               _n(d, "achieved per GPU", "achieved_flops_per_gpu", lambda v: fmt_rate(v, "FLOP/s")),
               _n(d, "tokens/s", "tokens_per_s", _tokens)]
    return Banner("info", words, [n for n in numbers if n])


def _sweep(d: dict[str, Any]) -> Banner:
    points = d.get("points") or []
    fitting = [i for i, p in enumerate(points) if p.get("fits")]
    shown = len(points)
    if "fits" in (d.get("metrics") or []):
        headline = f"{len(fitting):,} of {shown:,} points fit"
        status = "ok" if fitting else "bad"
        if fitting and "peak_bytes" in points[fitting[0]]:
            best = max(fitting, key=lambda i: points[i]["peak_bytes"])
            axes = [k for k, v in (d.get("axes") or {}).items() if isinstance(v, list) and len(v) > 1]
            headline += "; nearest the limit: " + ", ".join(f"{words(k)} {points[best].get(k)}" for k in axes)
        headline += "."
    else:
        status, headline = "info", f"{shown:,} points priced."
    numbers = [_n(d, "points", "points_total", lambda v: f"{v:,}"), _n(d, "skipped", "skipped", lambda v: f"{v:,}")]
    return Banner(status, headline, [n for n in numbers if n])


BANNERS = {"sweep": _sweep, "memory": _memory, "inference": _inference, "serve": _serve, "train": _train, "plan": _plan,
           "params": _params, "flops": _flops, "mfu": _mfu}


def banner(command: str, data: Any) -> Banner | None:
    """The page's banner, or None (a command without one, a list result, or a result it cannot read)."""
    make = BANNERS.get(command)
    if make is None or not isinstance(data, dict):
        return None
    try:
        return make(data)
    except (KeyError, TypeError, ValueError, IndexError):  # a result shape the banner does not know: no banner
        return None


# ---------------------------------------------------------------------------- a JSON key in words
WORDS = {  # the glossary's spellings (docs/notation.md) of the parts of a key
    "kv": "KV", "mfu": "MFU", "hfu": "HFU", "gpu": "GPU", "gpus": "GPUs", "ttft": "TTFT", "tpot": "TPOT",
    "moe": "MoE", "mla": "MLA", "lora": "LoRA", "qlora": "QLoRA", "tp": "TP", "dp": "DP", "pp": "PP", "cp": "CP",
    "ep": "EP", "etp": "ETP", "pcie": "PCIe", "cuda": "CUDA", "e2e": "E2E", "fp8": "FP8", "zero": "ZeRO", "nvme": "NVMe",
    "flops": "FLOPs", "tflops": "TFLOP/s", "qkv": "QKV", "mtp": "MTP", "attn": "attention", "lm": "LM", "co2": "CO2",
    "kwh": "kWh", "usd": "US$", "nvidia": "NVIDIA", "smi": "smi", "hbm": "HBM", "ssm": "SSM", "seq": "sequence",
    "len": "length", "num": "number of", "bw": "bandwidth", "b": "B", "s": "s",
}
UNITS = (("_per_s", " per second"), ("_bytes_s", " (bytes/s)"), ("_bytes", ""), ("_s", ""))  # the cell shows the unit


def words(key: str) -> str:
    """A JSON key as the page's label: `time_to_first_token_s` -> "time to first token" (the cell
    shows the unit), `kv_cache` -> "KV cache", `per_layer_attn_q` -> "per layer attention q". The
    raw key stays in the cell's data-key and the label's title, and in the JSON."""
    if key.isdigit():
        return key
    for suffix, unit in UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            key = key[: -len(suffix)] + unit
            break
    return " ".join(WORDS.get(part, part) for part in key.split("_"))
