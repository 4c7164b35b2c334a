"""`tcalc sweep`: a grid over models, workloads, layouts, GPUs and dtypes, one row per point.

The report layer: every point is priced by the same estimators as `tcalc memory`, `tcalc flops`
and `tcalc inference`, with the same settings (flags, then the job file's `training:` and
`inference:` sections, then the defaults), so a one-point sweep equals those commands' JSON
(`METRIC_SOURCES` names the key each metric equals; tests/test_sweep.py checks them).

Each point costs O(1) (closed forms). What points share is computed once: configs are validated
once per distinct value, parameter counts and per-rank shards once per (model, layout) (memoized
in `params`), the model FLOPs of a step once per (model, S, B), the peak-memory timeline once per
(model, S, B, training, layout) whatever the GPU and dtype, the KV cache once per inference layout
whatever the GPU. Rows are produced by a generator (`iter_rows`), so a sweep that needs no sorting
streams them to CSV or JSON in constant memory. Points the model cannot run (T does not divide the
heads, P exceeds the layers, ...) are skipped and counted, with the first reasons.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload, build
from transformer_calc.errors import TcalcError, known_list
from transformer_calc.estimators.flops import count_flops, train_flops_for_tokens, training_time_s
from transformer_calc.model.units import SECONDS_PER_DAY
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode, inference_memory, kv_cache, prefill_step
from transformer_calc.estimators.inference.engines import DEFAULT_ENGINE, ENGINES
from transformer_calc.estimators.inference.serving import capacity, engine_serving
from transformer_calc.estimators.training.timeline import CHUNK_TOKENS, fit_capacity, peak_memory, stage_timelines

# Axis (the row key and job-file key, docs/notation.md) -> the flag that sets it. The product runs
# over them in this order (the last varies fastest).
AXES: dict[str, str] = {
    "model": "--preset",
    "batch_size": "--B",
    "seq_len": "--S",
    "tensor": "--T",
    "pipeline": "--P",
    "data": "--dp",
    "zero": "--zero",
    "expert": "--ep",
    "context": "--cp",
    "recompute": "--recompute",
    "flash": "--flash",
    "gpu": "--gpu",
    "dtype": "--dtype",
    "weight_dtype": "--weight-dtype",
}
INT_AXES = ("batch_size", "seq_len", "tensor", "pipeline", "data", "zero", "expert", "context")
TRAINING_AXES = ("pipeline", "data", "zero", "context", "recompute", "flash")  # no effect on inference
# The seed letters and flag names users type for an axis (--x, --series, --sort accept them).
AXIS_ALIASES = {"B": "batch_size", "S": "seq_len", "T": "tensor", "P": "pipeline", "dp": "data", "ep": "expert",
                "cp": "context"}  # fmt: skip

# Metric -> (command, the key of that command's JSON it equals, dotted as in its CSV header).
METRIC_SOURCES: dict[str, tuple[str, str]] = {
    "peak_bytes": ("memory", "memory.peak_bytes"),
    "weights_bytes": ("memory", "memory.peak.weights_bytes"),
    "activations_bytes": ("memory", "memory.peak.activations_bytes"),
    "fits": ("memory", "fits"),
    "headroom_bytes": ("memory", "gpu.headroom_bytes"),
    "model_flops": ("flops", "flops.total"),
    "hardware_flops": ("flops", "flops.hardware"),
    "train_days": ("flops", "training.days"),
    "kv_cache_bytes": ("inference", "kv_cache.per_gpu_bytes"),
    "inference_memory_bytes": ("inference", "memory.per_gpu.total_bytes"),
    "inference_fits": ("inference", "memory.fits"),
    "time_to_first_token_s": ("inference", "time_to_first_token_s"),
    "time_per_output_token_s": ("inference", "decode.time_per_output_token_s"),
    "decode_tokens_per_s": ("inference", "decode.tokens_per_s"),
    "decode_bound": ("inference", "decode.bound"),
    "tokens_per_s": ("inference", "tokens_per_s"),
    "total_s": ("inference", "total_s"),
    "max_concurrent_sequences": ("inference", "serving.max_concurrent_sequences"),
}
METRICS = tuple(METRIC_SOURCES)
TRAINING_METRICS = tuple(k for k, (cmd, _) in METRIC_SOURCES.items() if cmd != "inference")
INFERENCE_METRICS = tuple(k for k, (cmd, _) in METRIC_SOURCES.items() if cmd == "inference")
MEMORY_METRICS = frozenset(("peak_bytes", "weights_bytes", "activations_bytes", "fits", "headroom_bytes"))
NEEDS_GPU = frozenset(("fits", "headroom_bytes", "train_days", *INFERENCE_METRICS))
# Names before issue 12 -> today's (an old name is an error that says the new one).
RENAMED = {
    "memory": "peak_bytes", "weights": "weights_bytes", "activations": "activations_bytes",
    "headroom": "headroom_bytes", "flops": "model_flops", "kv_cache": "kv_cache_bytes",
    "inference_memory": "inference_memory_bytes", "ttft_s": "time_to_first_token_s",
    "decode_s": "time_per_output_token_s", "bound": "decode_bound",
}  # fmt: skip
MAX_POINTS = 1_000_000  # a guard against typos such as --B 1..10000000:1
MAX_REASONS = 5
PARALLEL_MIN_POINTS = 20_000  # below this, forking workers costs more than it saves
CHUNK_POINTS = 4096  # points per task of a worker
MAX_WORKERS = 8
CACHE_ENTRIES = 4096  # per reuse cache; cleared when full, so memory stays bounded on any grid

# Fixed settings (one value for every point): the job-file key -> its flag.
TRAINING_SETTINGS = {
    "precision": "--precision", "p": "--p", "grad_bytes": "--grad-bytes", "optimizer": "--optimizer",
    "dropout": "--dropout", "activations": "--activations", "head_activations": "--head",
    "framework": "--framework", "cross_entropy": "--cross-entropy", "micro_batches": "--micro-batches",
    "fused_optimizer": "--fused-optimizer", "finetune": "--finetune", "lora_rank": "--lora-rank",
    "lora_targets": "--lora-targets",
}  # fmt: skip
PARALLEL_SETTINGS = {"sequence_parallel": "--sp", "expert_tensor": "--etp", "virtual_stages": "--virtual-stages"}
INFERENCE_SETTINGS = {"new_tokens": "--new-tokens", "kv_dtype": "--kv-dtype", "cache_kv_heads": "--cache-kv-heads",
                      "kv_cache": "--kv-cache", "mla_cache": "--mla-cache", "engine": "--engine"}  # fmt: skip
_INFERENCE_FIELDS = {"new_tokens": "new_tokens", "kv_dtype": "kv_dtype", "cache_kv_heads": "cache_kv_heads",
                     "kv_cache": "kv_cache", "mla_cache": "mla_cache"}  # fmt: skip


NumberParser = Callable[[str, str, str], int]  # (axis, flag, text) -> int, or TcalcError
GpuLookup = Callable[[str], Any]  # a GPU name or alias -> the hardware entry (presets.gpu)
PeakLookup = Callable[[Any, "str | None"], "tuple[str, Any]"]  # report.peak_for: the one peak-dtype choice


def parse_values(axis: str, text: Any, number: NumberParser | None = None, flag: str | None = None) -> list[Any]:
    """One axis of the grid from its CLI text (or a Python list of values).

    Comma lists mix values and ranges: `a..b` doubles from a up to b (1..64 -> 1, 2, 4, ..., 64:
    batch sizes and parallel degrees), `a..b:s` steps by s (512..4096:512). Values keep their
    order; duplicates are dropped. Each number is read by `number` (the CLI passes its one integer
    parser; the default reads the same forms: 8192, 8k, 4M, 1e3, 1_000, k = 1024 for S).
    """
    flag = flag or AXES.get(axis, f"--{axis}")
    parts = [str(v) for v in text] if isinstance(text, (list, tuple)) else str(text).split(",")
    out: list[Any] = []
    for raw in (part.strip() for part in parts):
        if not raw:
            raise TcalcError(f"{flag} {_clip(text)}: empty value in the list; write e.g. 1,2,4..64")
        if axis in INT_AXES:
            out.extend(_int_values(axis, flag, raw, number or _number))
        elif axis == "flash":
            lowered = raw.lower()
            if lowered not in ("true", "false", "on", "off", "yes", "no", "1", "0"):
                raise TcalcError(f"{flag} {_clip(raw)}: use true/false (on/off)")
            out.append(lowered in ("true", "on", "yes", "1"))
        else:
            out.append(raw)
    return list(dict.fromkeys(out))  # drop repeats, keep the order


def _clip(value: Any) -> str:
    from transformer_calc.errors import clip

    return clip(value if isinstance(value, str) else ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))




def _number(axis: str, flag: str, raw: str) -> int:
    """One integer of an axis as people type it (8192, 8k, 1e3, 1_000): config.parse_whole, the one
    parser of whole numbers (k = 1024 for sequence lengths; ZeRO stages 0-3)."""
    from transformer_calc.model.config import parse_whole

    try:
        return parse_whole(raw, low=0 if axis == "zero" else 1, high=3 if axis == "zero" else None,
                           binary=axis == "seq_len")
    except TcalcError:
        raise
    except ValueError as exc:
        raise TcalcError(f"{flag} {_clip(raw)}: {exc}; use e.g. 8, 8k, 1e3, lists (1,2,8) or ranges (1..64, 512..4096:512)") from None


def _int_values(axis: str, flag: str, raw: str, number: NumberParser) -> list[int]:
    low, high = (0, 3) if axis == "zero" else (1, None)
    bounds = f"{low} <= a <= b" + (f" <= {high}" if high is not None else "")
    if ".." in raw:
        span, _, step_text = raw.partition(":")
        lo_text, _, hi_text = span.partition("..")
        lo, hi = number(axis, flag, lo_text.strip()), number(axis, flag, hi_text.strip())
        step = number(axis, flag, step_text.strip()) if step_text else None
        first = 0 if axis == "zero" and step is not None else max(low, 1)
        if lo < first or hi < lo or (high is not None and hi > high):
            raise TcalcError(f"{flag} {_clip(raw)}: a range a..b needs {first} <= a <= b" + (f" <= {high}" if high is not None else ""))
        if step is not None:
            if step < 1:
                raise TcalcError(f"{flag} {_clip(raw)}: the step must be >= 1")
            if (hi - lo) // step >= MAX_POINTS:
                raise TcalcError(f"{flag} {_clip(raw)}: more than {MAX_POINTS:,} values; use a larger step")
            return list(range(lo, hi + 1, step))
        return [lo << k for k in range((hi // lo).bit_length())]  # lo, 2·lo, 4·lo, ... <= hi
    value = number(axis, flag, raw)
    if value < low or (high is not None and value > high):
        hint = "ZeRO stages 0 to 3" if axis == "zero" else "whole numbers >= 1"
        raise TcalcError(f"{flag} {_clip(raw)}: use {hint} ({bounds}), lists (1,2,8) or ranges (1..64, 512..4096:512)")
    return [value]


def check_metrics(names: list[str]) -> tuple[str, ...]:
    """The requested metrics, each known (an unknown one is an error with did-you-mean)."""
    if not names:
        raise TcalcError(f"--metrics: give at least one of {', '.join(METRICS)}")
    for name in names:
        if name in RENAMED:
            raise TcalcError(f"--metrics: {name!r} is now {RENAMED[name]!r} (the key `tcalc "
                             f"{METRIC_SOURCES[RENAMED[name]][0]}` writes); use --metrics {RENAMED[name]}")
        if name not in METRICS:
            import difflib

            near = difflib.get_close_matches(name, [*METRICS, *RENAMED], n=1, cutoff=0.5)
            near = [RENAMED.get(n, n) for n in near]
            hint = f"did you mean {near[0]}?" if near else known_list(name, METRICS, lead="choose from ")
            raise TcalcError(f"--metrics: unknown metric {_clip(name)}; {hint}")
    return tuple(dict.fromkeys(names))


def axis_name(name: str) -> str:
    """An axis by its key or its letter (B, S, T, P, dp, ep, cp)."""
    return AXIS_ALIASES.get(name, name)



def affine_peaks(m: ModelConfig, S: int, tr: Training, par: Parallelism, all_stages: bool) -> Any:
    """The peak-memory timeline of every stage as lines in B: per stage, per phase, (total, weights,
    activations) at B = 0 and their slopes, or False where that does not hold.

    Every phase is affine in B (model states fixed; activations and transients linear in the
    tokens; timeline.max_micro_batch starts from the same lines) except the chunked cross-entropy's
    min(B·S, chunk) below one chunk per sequence. The lines come from B = 1 and 2 and are checked at
    B = 3 and 4; a layout that fails the check (or raises) is priced point by point. The sweep then
    prices any B in O(stages × phases) instead of rebuilding the timeline."""
    if tr.loss_kernel.value == "chunked" and S < CHUNK_TOKENS:
        return False
    try:
        runs = [stage_timelines(m, Workload.model_construct(seq_len=S, batch_size=b), tr, par, all_stages=all_stages)
                for b in (1, 2, 3, 4)]
    except TcalcError:
        raise
    except (ValueError, TcalcError, OverflowError, ZeroDivisionError):
        return False
    lines = []
    for stage in zip(*runs):
        phases = []
        for ph in zip(*(tl.phases for tl in stage)):
            values = [(p.total, p.weights, p.activations) for p in ph]
            slope = tuple(b - a for a, b in zip(values[0], values[1]))
            base = tuple(a - d for a, d in zip(values[0], slope))
            for b, v in ((3, values[2]), (4, values[3])):
                if any(x0 + b * d != x for x0, d, x in zip(base, slope, v)):
                    return False
            phases.append((base, slope))
        lines.append(phases)
    return lines


def peak_at(lines: Any, B: int) -> tuple[int, int, int]:
    """(total, weights, activations) of the peak phase at micro-batch B from `affine_peaks`: the
    first phase of largest total in each stage, the first stage of largest peak, as peak_memory."""
    best: tuple[int, int, int] | None = None
    for phases in lines:
        stage_best: tuple[int, int, int] | None = None
        for base, slope in phases:
            total = base[0] + B * slope[0]
            if stage_best is None or total > stage_best[0]:
                stage_best = (total, base[1] + B * slope[1], base[2] + B * slope[2])
        assert stage_best is not None  # a stage's timeline has phases (its model states at least)
        if best is None or stage_best[0] > best[0]:
            best = stage_best
    assert best is not None  # a layout has at least one pipeline stage
    return best

@dataclass(frozen=True)
class SweepSpec:
    """The grid: each axis's values, the metrics, and the settings fixed for every point."""

    axes: dict[str, list[Any]]
    metrics: tuple[str, ...]
    training: dict[str, Any] = field(default_factory=dict)  # Training fields (validated)
    parallelism: dict[str, Any] = field(default_factory=dict)  # sequence_parallel, expert_tensor, virtual_stages
    inference: dict[str, Any] = field(default_factory=dict)  # InferenceSpec fields (validated)
    engine: str = DEFAULT_ENGINE  # the serving engine of max_concurrent_sequences (engines.py)
    tokens: int | None = None  # token budget for train_days
    mfu: float = 0.4
    peak: PeakLookup | None = field(default=None, compare=False)  # (GPU, dtype or None) -> (dtype, FLOP/s)
    sp_with_tensor: bool = False  # sequence parallelism on at T > 1 where not given (the framework's default)

    @property
    def size(self) -> int:
        return math.prod(len(values) for values in self.axes.values())

    @property
    def training_point(self) -> bool:
        """A training metric is asked: a point's default S is the model's training S (its
        pre-training length), else inference's (the context window)."""
        return bool(set(self.metrics) & (MEMORY_METRICS | {"model_flops", "hardware_flops", "train_days"}))

    @property
    def columns(self) -> tuple[str, ...]:
        """The keys of every row, in order: the axes, S if not an axis, the metrics."""
        extra = ("seq_len",) if "seq_len" not in self.axes else ()
        return (*self.axes, *extra, *self.metrics)


@dataclass
class SweepStats:
    """What the row generator counts as it goes: skipped points and the first reasons."""

    skipped: int = 0
    reasons: list[str] = field(default_factory=list)


def build_spec(
    axes_text: dict[str, Any],
    models: dict[str, ModelConfig],
    metrics: list[str] | None,
    settings: dict[str, Any],
    job: Any = None,
    *,
    tokens: int | None = None,
    mfu: float | None = None,
    number: NumberParser | None = None,
    gpu_lookup: GpuLookup | None = None,
    peak: PeakLookup | None = None,
    command_defaults: dict[str, Any] | None = None,
) -> tuple[SweepSpec, dict[str, Any]]:
    """(the grid, its GPUs by name) from the axes' texts (None: the job file's value, else the
    default), the fixed settings (flags by job-file key; None: the job file's, else the default)
    and the metrics. Every value is validated here, before any point is priced: an unknown value
    anywhere is an error naming the flag, never an empty result. GPU names are looked up with
    `gpu_lookup` and peaks with `peak` (the callers' presets.gpu and report.peak_for: the sweep
    sits among the estimators and imports neither). `command_defaults` are the training commands'
    defaults (requests.defaults.sweep_defaults: the flash, zero, recompute and gpu axes, the
    framework, sequence parallelism at T > 1), so that a point is priced as `tcalc memory` prices
    it; without them, the estimators' own (the seed's eager, unsharded picture)."""
    from transformer_calc.model.config import Recompute

    training_section = dict(job.training) if job is not None else {}
    inference_section = dict(job.inference) if job is not None else {}
    names = [m.strip() for m in metrics] if metrics is not None else None
    if names is not None:
        names = [m for m in names if m]
        wanted = check_metrics(names)
    want_training = names is None or any(m in TRAINING_METRICS for m in names)
    want_inference = names is not None and any(m in INFERENCE_METRICS for m in names)

    axes: dict[str, list[Any]] = {"model": list(models)}
    gpus: dict[str, Any] = {}
    command = command_defaults or {}
    defaults = {"batch_size": "1", "tensor": "1", "pipeline": "1", "data": "1", "zero": "0", "expert": "1",
                "context": "1", "recompute": "none", "flash": "false"}  # fmt: skip
    defaults.update({k: command[k] for k in ("flash", "zero", "recompute", "gpu") if k in command})
    for axis, flag in AXES.items():
        if axis == "model":
            continue
        text, label = axes_text.get(axis), flag
        if text is None:
            text = _job_value(axis, flag, training_section if want_training else {},
                              inference_section if want_inference else {})
            label = f"the job file's {axis}"
        if text is None:
            text, label = defaults.get(axis), flag
        if text is None:
            continue
        axes[axis] = parse_values(axis, text, number, label)
        if axis == "recompute":
            for value in axes[axis]:
                try:
                    Recompute(value)
                except TcalcError:
                    raise
                except ValueError:
                    choices = ", ".join(r.value for r in Recompute)
                    raise TcalcError(f"{label} ({_clip(value)}): choose one of {choices}") from None
        if axis == "gpu":
            for name in axes[axis]:
                if gpu_lookup is None:
                    raise TypeError("build_spec needs gpu_lookup (presets.gpu) to resolve GPU names")
                device = gpu_lookup(str(name))
                gpus[device.name] = device
            axes[axis] = list(gpus)
    if names is None:
        wanted = check_metrics(["peak_bytes", "fits", "model_flops"] if gpus else ["peak_bytes", "model_flops"])
    missing = [m for m in wanted if m in NEEDS_GPU]
    if missing and not gpus:
        raise TcalcError(f"metrics {', '.join(missing)} need --gpu NAME (e.g. --gpu a100-80gb)")
    _check_relevant(wanted, axes_text, settings)

    # Training settings: flags, then the job's training: section, then Training's defaults.
    fixed = {k: v for k, v in training_section.items() if k in TRAINING_SETTINGS}
    fixed.update({k: v for k, v in settings.items() if k in TRAINING_SETTINGS and v is not None})
    if "framework" not in fixed and "framework" in command:
        fixed["framework"] = command["framework"]
    for recompute, flash in itertools.product(axes["recompute"], axes["flash"]):
        build(Training, {**fixed, "recompute": recompute, "flash": flash}, "sweep training")
    training = build(Training, fixed, "sweep training").model_dump(exclude={"recompute", "flash"}, exclude_unset=True)
    par_fixed = {k: v for k, v in training_section.items() if k in PARALLEL_SETTINGS}
    par_fixed.update({k: v for k, v in settings.items() if k in PARALLEL_SETTINGS and v is not None})
    parallelism = build(Parallelism, par_fixed, "sweep training").model_dump(include=set(PARALLEL_SETTINGS))
    if "sequence_parallel" not in par_fixed:  # the framework's default: on at T > 1 (per point)
        parallelism.pop("sequence_parallel", None)
    sp_with_tensor = bool(command.get("sp_with_tensor", False))

    for dtype in axes.get("dtype", []):
        from transformer_calc.devices.hardware import DTYPES
        from transformer_calc.estimators.inference.roofline import checked_dtype

        try:
            canonical = checked_dtype("--dtype", dtype, DTYPES)
        except TcalcError:
            raise
        except ValueError as exc:
            raise TcalcError(str(exc)) from None
        for device in gpus.values():
            if canonical not in device.peak_flops:
                raise TcalcError(f"--dtype {_clip(dtype)}: {device.name} has no dense {canonical} peak; "
                                 f"choose one of {', '.join(device.peak_flops)}")
    # Inference settings: flags, then the job's inference: section, then InferenceSpec's defaults.
    inf = {k: v for k, v in inference_section.items() if k in INFERENCE_SETTINGS}
    inf.update({k: v for k, v in settings.items() if k in INFERENCE_SETTINGS and v is not None})
    engine = inf.pop("engine", DEFAULT_ENGINE)
    if engine not in ENGINES:
        raise TcalcError(f"--engine ({_clip(str(engine))}) must be one of {', '.join(ENGINES)}")
    inference = {_INFERENCE_FIELDS[k]: v for k, v in inf.items()}
    if want_inference:
        for dtype, weight in itertools.product(axes.get("dtype", [None]), axes.get("weight_dtype", [None])):
            # every dtype and setting checked once (the weights default as in _inference_metrics)
            _inference_spec(1, 1, 1, 1, weight or dtype or "bf16", dtype, inference)
    if "train_days" in wanted and tokens is None:
        raise TcalcError("train_days needs the token budget: give --tokens, e.g. --tokens 300e9")
    if mfu is not None and (isinstance(mfu, bool) or not isinstance(mfu, (int, float)) or not 0 < mfu <= 1):
        raise TcalcError(f"--mfu ({_clip(str(mfu))}) must be a fraction in (0, 1], e.g. 0.4 for 40 %")
    if "train_days" in wanted and peak is None:
        raise TypeError("build_spec needs peak (report.peak_for) for train_days")
    spec = SweepSpec(axes=axes, metrics=wanted, training=training, parallelism=parallelism, inference=inference,
                     sp_with_tensor=sp_with_tensor,
                     engine=str(engine), tokens=tokens, mfu=0.4 if mfu is None else float(mfu), peak=peak)
    if spec.size > MAX_POINTS:
        raise TcalcError(f"the grid has {spec.size:,} points; keep it under {MAX_POINTS:,} (split it, or use fewer values)")
    return spec, gpus


def _check_relevant(wanted: tuple[str, ...], axes_text: dict[str, Any], settings: dict[str, Any]) -> None:
    """A flag that changes none of the asked metrics is an error (it would be silently ignored)."""
    training = any(m in TRAINING_METRICS for m in wanted)
    inference = any(m in INFERENCE_METRICS for m in wanted)
    given = {k for k, v in settings.items() if v is not None}
    if not training:
        for key in [*TRAINING_SETTINGS, *PARALLEL_SETTINGS, *(a for a in TRAINING_AXES if axes_text.get(a) is not None)]:
            if key in given or key in TRAINING_AXES and axes_text.get(key) is not None:
                flag = {**TRAINING_SETTINGS, **PARALLEL_SETTINGS, **AXES}[key]
                raise TcalcError(f"{flag} applies to training metrics ({', '.join(TRAINING_METRICS)}); add one to --metrics or drop it")
    if not inference:
        for key in [*INFERENCE_SETTINGS, "weight_dtype"]:
            if key in given or key == "weight_dtype" and axes_text.get(key) is not None:
                flag = {**INFERENCE_SETTINGS, **AXES}[key]
                raise TcalcError(f"{flag} applies to inference metrics ({', '.join(INFERENCE_METRICS)}); add one to --metrics or drop it")
    if axes_text.get("dtype") is not None and not inference and "train_days" not in wanted:
        raise TcalcError("--dtype (the compute dtype) prices train_days and the inference metrics; add one to --metrics or drop it")


def _job_value(axis: str, flag: str, training: dict[str, Any], inference: dict[str, Any]) -> Any:
    """The job file's value for an axis: from training: for training metrics, inference: for
    inference metrics; when both are wanted and the sections disagree, the flag must choose."""
    a, b = training.get(axis), inference.get(axis)
    if a is not None and b is not None and a != b:
        raise TcalcError(f"the job file's training: and inference: sections give {axis} = {_clip(str(a))} and "
                         f"{_clip(str(b))}; give {flag} to choose, or ask for training or inference metrics only")
    value = a if a is not None else b
    if value is None:
        return None
    if isinstance(value, bool) and axis in INT_AXES:
        raise TcalcError(f"the job file's {axis} ({value}) is a boolean, not a number; give a number")
    return [value] if not isinstance(value, (list, tuple)) else list(value)


def _inference_spec(B: int, S: int, T: int, ep: int, weight: str, dtype: str | None, fixed: dict[str, Any]) -> Any:
    from transformer_calc.estimators.inference.roofline import InferenceSpec

    try:
        return InferenceSpec(batch_size=B, prompt_len=S, tensor_parallel=T, expert_parallel=ep, weight_dtype=weight,
                             compute_dtype=dtype, **fixed)
    except TcalcError:
        raise
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None


class _Memo(dict):
    """A reuse cache of bounded size: cleared when full (grids repeat keys close together)."""

    def put(self, key: Any, value: Any) -> Any:
        if len(self) >= CACHE_ENTRIES:
            self.clear()
        self[key] = value
        return value


def iter_rows(
    spec: SweepSpec,
    models: dict[str, ModelConfig],
    gpus: dict[str, Any],
    stats: SweepStats,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Every point of the grid (or of its points [start, stop) in grid order) that the model can
    run, as a row: its axis values, S, and the metrics (keys `spec.columns`). Skipped points are
    counted in `stats`. A generator: rows are priced as they are read."""
    metrics = spec.metrics
    want = set(metrics)
    want_memory = bool(want & MEMORY_METRICS)
    want_flops = bool(want & {"model_flops", "hardware_flops"})
    want_inference = bool(want & set(INFERENCE_METRICS))
    training_point = spec.training_point
    names = list(spec.axes)
    columns = spec.columns
    trainings: dict[tuple[str, bool], Training] = {}
    layouts: dict[tuple[int, ...], Parallelism] = {}
    memory_memo, flops_memo, days_memo, kv_memo, inference_memo = _Memo(), _Memo(), _Memo(), _Memo(), _Memo()
    affine_memo = _Memo()
    mixed = {name: m.is_moe and m.n_moe_layers() not in (0, m.n_layers) for name, m in models.items()}

    def skip(point: dict[str, Any], exc: Exception) -> None:
        stats.skipped += 1
        if len(stats.reasons) < MAX_REASONS:
            where = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in point.items())
            stats.reasons.append(f"{where}: {exc}")

    for i, values in enumerate(_points(spec, start, spec.size if stop is None else stop), start):
        if progress is not None and i % 1024 == 0:
            progress(i)
        point = dict(zip(names, values))
        label = point["model"]
        m = models[label]
        device = gpus[point["gpu"]] if "gpu" in point else None
        # S: the axis, else the command's default: training's (the pre-training length) where a
        # training metric is asked, else inference's (the context window), as `tcalc inference`
        S = point.get("seq_len") or (m.training_seq_len if training_point else m.max_seq_len)
        B = point["batch_size"]
        row = dict(point)
        row["seq_len"] = S
        try:
            if want_memory or want_flops or "train_days" in want:
                rf = (point["recompute"], point["flash"])
                tr = trainings.get(rf)
                if tr is None:
                    tr = trainings[rf] = Training.model_validate({**spec.training, "recompute": rf[0], "flash": rf[1]})
                layout = (point["tensor"], point["pipeline"], point["data"], point["zero"], point["expert"], point["context"])
                par = layouts.get(layout)
                if par is None:
                    par = layouts[layout] = Parallelism.model_validate(
                        {"tensor": layout[0], "pipeline": layout[1], "data": layout[2], "zero": layout[3],
                         "expert": layout[4], "context": layout[5],
                         "sequence_parallel": spec.sp_with_tensor and layout[0] > 1, **spec.parallelism})
                w = Workload.model_construct(seq_len=S, batch_size=B)
                if want_memory:
                    key = (label, S, B, rf, layout)
                    peak = memory_memo.get(key)
                    if peak is None:
                        lines = affine_memo.get((label, S, rf, layout))
                        if lines is None:
                            lines = affine_memo.put((label, S, rf, layout), affine_peaks(m, S, tr, par, mixed[label]))
                        if lines is not False:
                            peak = peak_at(lines, B)
                    if peak is None:
                        try:
                            phase = peak_memory(m, w, tr, par, all_stages=mixed[label]).peak
                            peak = (phase.total, phase.weights, phase.activations)
                        except TcalcError:
                            raise
                        except (ValueError, TcalcError) as exc:
                            peak = exc
                        memory_memo.put(key, peak)
                    if isinstance(peak, Exception):
                        raise peak
                    row["peak_bytes"], row["weights_bytes"], row["activations_bytes"] = peak
                    if device is not None:
                        usable = fit_capacity(device.memory_bytes)
                        row["fits"], row["headroom_bytes"] = peak[0] <= usable, usable - peak[0]
                if want_flops:
                    flops_key = (label, S, B)
                    step = flops_memo.get(flops_key)
                    if step is None:
                        step = flops_memo.put(flops_key, count_flops(m, w))
                    row["model_flops"] = step.total
                    if "hardware_flops" in want:
                        row["hardware_flops"] = step.hardware(tr.recompute)
                if "train_days" in want:
                    row["train_days"] = _train_days(m, label, S, spec, par, device, point.get("dtype"), days_memo)
            if want_inference:
                _inference_metrics(m, label, S, B, point, device, spec, want, row, kv_memo, inference_memo)
            for name in metrics:
                value = row[name]
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(f"{name} is not finite ({value})")
        except TcalcError:
            raise
        except (ValueError, TcalcError, OverflowError, ZeroDivisionError) as exc:
            skip(point, exc)
            continue
        yield {k: row[k] for k in columns}


def _points(spec: SweepSpec, start: int, stop: int) -> Iterator[tuple[Any, ...]]:
    """The grid's points [start, stop) in product order (the last axis varies fastest)."""
    values = list(spec.axes.values())
    if start == 0 and stop == spec.size:
        yield from itertools.product(*values)
        return
    inner, outer = values[-1], values[:-1]
    i = start
    while i < stop:
        index, j = divmod(i, len(inner))
        head = []
        for axis in reversed(outer):  # the outer axes' positions: mixed-radix digits of the index
            index, digit = divmod(index, len(axis))
            head.append(axis[digit])
        head.reverse()
        end = min(len(inner), j + stop - i)
        for value in inner[j:end]:
            yield (*head, value)
        i += end - j


def _train_days(m: ModelConfig, label: str, S: int, spec: SweepSpec, par: Parallelism, device: Any, dtype: str | None,
                memo: _Memo) -> float:
    """`tcalc flops --tokens N --gpus T·CP·P·dp --gpu G --mfu M [--dtype D]`: training.days."""
    assert spec.tokens is not None and spec.peak is not None  # build_spec requires both for train_days
    key = (label, S)
    total = memo.get(key)
    if total is None:
        total = memo.put(key, train_flops_for_tokens(m, S, spec.tokens))
    _, peak = spec.peak(device, dtype)
    return training_time_s(total, par.gpus, peak, spec.mfu) / SECONDS_PER_DAY


def _inference_metrics(m: ModelConfig, label: str, S: int, B: int, point: dict[str, Any], device: Any, spec: SweepSpec,
                       want: set[str], row: dict[str, Any], kv_memo: _Memo, memo: _Memo) -> None:
    """`tcalc inference` at this point (its InferenceSpec built as `report.inference_spec` does)."""
    T, ep, dtype = point["tensor"], point["expert"], point.get("dtype")
    # The weights: the axis, else the model's own format (a quantized checkpoint), else the compute
    # dtype, else bf16 (as `report.inference_spec` defaults them).
    weight = point.get("weight_dtype") or getattr(m, "weight_format", None) or dtype or "bf16"
    layout = (label, S, B, T, ep, weight, dtype)
    key = (*layout, point["gpu"])
    done = memo.get(key)
    if done is None:
        try:
            ispec = InferenceSpec(batch_size=B, prompt_len=S, tensor_parallel=T, expert_parallel=ep, weight_dtype=weight,
                                  compute_dtype=dtype, **spec.inference)
            done = {}
            if "kv_cache_bytes" in want:
                kv = kv_memo.get(layout)
                done["kv_cache_bytes"] = kv if kv is not None else kv_memo.put(layout, kv_cache(m, ispec).per_gpu_bytes)
            if {"inference_memory_bytes", "inference_fits"} & want:
                mem = inference_memory(m, device, ispec)
                done["inference_memory_bytes"], done["inference_fits"] = mem.total_bytes, mem.fits
            need_prefill = bool({"time_to_first_token_s", "tokens_per_s", "total_s"} & want)
            need_decode = bool({"time_per_output_token_s", "decode_tokens_per_s", "decode_bound", "tokens_per_s", "total_s"} & want)
            prefill = prefill_step(m, device, ispec) if need_prefill else None
            dec = decode(m, device, ispec) if need_decode else None
            if prefill is not None:
                done["time_to_first_token_s"] = prefill.seconds
            if dec is not None:
                done["time_per_output_token_s"], done["decode_tokens_per_s"], done["decode_bound"] = (
                    dec.seconds_per_token, dec.tokens_per_s, dec.bound)
            if "max_concurrent_sequences" in want:  # the engine's paged KV cache (inference's serving section)
                done["max_concurrent_sequences"] = capacity(
                    m, device, ispec, engine_serving(spec.engine, device, T)).max_concurrent_sequences if ispec.kv_cache else None
            if prefill is not None and dec is not None:  # as inference.estimate_inference
                total = prefill.seconds + dec.seconds
                done["total_s"], done["tokens_per_s"] = total, ispec.batch_size * ispec.new_tokens / total
        except TcalcError:
            raise
        except (ValueError, TcalcError) as exc:
            done = exc
        memo.put(key, done)
    if isinstance(done, Exception):
        raise done
    row.update(done)


def _sort_key(column: str) -> Callable[[dict[str, Any]], Any]:
    return lambda r: (r[column] is None, r[column])


def sort_column(sort: str | None, columns: tuple[str, ...]) -> str | None:
    """--sort's column (letters accepted for axes; '-' prefix: descending), checked before the
    sweep runs."""
    if sort is None:
        return None
    desc = sort.startswith("-")
    name = axis_name(sort[1:] if desc else sort)
    if name in RENAMED:
        name = RENAMED[name]
    if name not in columns:
        raise TcalcError(f"--sort {_clip(sort)}: not a column; choose from {', '.join(columns)}")
    return ("-" if desc else "") + name


@dataclass
class SweepRun:
    """A validated sweep, ready to run: the grid, its models and GPUs, and what to keep."""

    spec: SweepSpec
    models: dict[str, ModelConfig]
    gpus: dict[str, Any]
    fits_only: bool = False
    sort: str | None = None  # a column, '-' prefixed for descending
    limit: int | None = None
    stats: SweepStats = field(default_factory=SweepStats)
    workers: int | None = None  # processes pricing the points (None: `default_workers`)
    chunk: int = CHUNK_POINTS  # points per task when several processes price them

    @property
    def columns(self) -> tuple[str, ...]:
        return self.spec.columns

    def head(self) -> dict[str, Any]:
        """The report's keys before the points."""
        return {"axes": dict(self.spec.axes), "metrics": list(self.spec.metrics), "points_total": self.spec.size}

    def tail(self) -> dict[str, Any]:
        """The report's keys after the points (known once every row has been read)."""
        return {"skipped": self.stats.skipped, "skipped_reasons": list(self.stats.reasons)}

    def rows(self, progress: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
        """The rows kept (--fits-only), in grid order or sorted, at most `limit`; a generator.
        Without a sort nothing is held: each row is yielded as it is priced (the grid is run to its
        end all the same, so that the skipped count is the grid's)."""
        self.stats = SweepStats()
        workers = default_workers(self.spec.size) if self.workers is None else self.workers
        rows: Iterator[dict[str, Any]]
        if workers > 1:
            rows = self._parallel_rows(workers, progress)
        else:
            rows = iter_rows(self.spec, self.models, self.gpus, self.stats, progress)
        if self.fits_only:
            rows = fits_filter(rows)
        if self.sort is not None:
            column = self.sort.lstrip("-")
            rows = iter(sorted(rows, key=_sort_key(column), reverse=self.sort.startswith("-")))
        n = 0
        for row in rows:
            if self.limit is None or n < self.limit:
                n += 1
                yield row

    def _parallel_rows(self, workers: int, progress: Callable[[int], None] | None) -> Iterator[dict[str, Any]]:
        """The rows of `iter_rows`, in the same order with the same skip count and reasons, priced
        by `workers` forked processes: worker k prices chunks k, k + workers, ... (`chunk` points
        each) and sends each chunk's rows through its own pipe, which the reader drains in chunk
        order. A pipe holds little, so a worker waits while the reader is behind: memory stays
        bounded. However the reader stops (the end, an error, Ctrl-C, a closed stdout), the
        workers are killed and reaped; they share no lock with it."""
        import os
        import pickle
        import signal

        size, step = self.spec.size, self.chunk
        n_chunks = -(-size // step)
        children: list[tuple[int, int]] = []  # (pid, read end of its pipe)
        readers: list[Any] = []
        try:
            for k in range(workers):
                read_end, write_end = os.pipe()
                pid = os.fork()
                if pid == 0:  # the worker: price its chunks, write them, leave without cleanup
                    code = 0
                    try:
                        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the reader's to handle
                        os.close(read_end)
                        for _, other in children:
                            os.close(other)
                        out = os.fdopen(write_end, "wb")
                        try:
                            for c in range(k, n_chunks, workers):
                                stats = SweepStats()
                                bounds = (c * step, min(c * step + step, size))
                                rows = list(iter_rows(self.spec, self.models, self.gpus, stats, None, *bounds))
                                pickle.dump((rows, stats.skipped, stats.reasons), out, pickle.HIGHEST_PROTOCOL)
                                out.flush()
                        except BrokenPipeError:
                            pass  # the reader stopped early
                        except BaseException as exc:  # noqa: BLE001 - told to the reader, never printed here
                            code = 1
                            pickle.dump(("error", f"{type(exc).__name__}: {exc}"), out)
                            out.flush()
                    except BaseException:  # noqa: BLE001 - a worker never prints or unwinds into the CLI
                        code = 1
                    finally:
                        os._exit(code)
                os.close(write_end)
                children.append((pid, read_end))
            readers = [os.fdopen(fd, "rb") for _, fd in children]
            for c in range(n_chunks):
                try:
                    record = pickle.load(readers[c % workers])
                except EOFError:
                    raise RuntimeError("a sweep worker process stopped; run with TCALC_SWEEP_WORKERS=1") from None
                if record[0] == "error":
                    raise RuntimeError(f"a sweep worker failed: {record[1]}")
                rows, skipped, reasons = record
                self.stats.skipped += skipped
                self.stats.reasons.extend(reasons[: MAX_REASONS - len(self.stats.reasons)])
                if progress is not None:
                    progress(min((c + 1) * step, size))
                yield from rows
        finally:
            for pid, _ in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for pid, _ in children:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            for reader in readers:
                reader.close()
            if not readers:
                for _, fd in children:
                    os.close(fd)

    def report(self, progress: Callable[[int], None] | None = None, keep: int | None = None) -> dict[str, Any]:
        """The whole result (`--format json`): head, points, tail. With `keep`, only the first
        `keep` points are held and `shown_of` says how many there were (the table view)."""
        points: list[dict[str, Any]] = []
        n = 0
        for row in self.rows(progress):
            n += 1
            if keep is None or len(points) < keep:
                points.append(row)
        out = {**self.head(), "points": points, **self.tail()}
        if keep is not None:
            out["shown_of"] = n
        return out




def default_workers(size: int) -> int:
    """Processes for a grid of `size` points: one below PARALLEL_MIN_POINTS or where fork is not
    available, else the CPUs this process may use (at most MAX_WORKERS); TCALC_SWEEP_WORKERS
    overrides it (1: never fork)."""
    import os

    given = os.environ.get("TCALC_SWEEP_WORKERS", "").strip()
    if given.isdigit() and int(given) >= 1:
        n = int(given)
    elif size < PARALLEL_MIN_POINTS:
        return 1
    else:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
    if not hasattr(os, "fork"):
        return 1
    return max(1, min(n, MAX_WORKERS))


def prepare(
    models: dict[str, ModelConfig],
    axes_text: dict[str, Any],
    settings: dict[str, Any],
    metrics: list[str] | None = None,
    job: Any = None,
    *,
    tokens: int | None = None,
    mfu: float | None = None,
    fits_only: bool = False,
    sort: str | None = None,
    limit: int | None = None,
    number: NumberParser | None = None,
    gpu_lookup: GpuLookup | None = None,
    peak: PeakLookup | None = None,
    command_defaults: dict[str, Any] | None = None,
) -> SweepRun:
    """Validate everything a sweep is given and return it ready to run (see `build_spec`)."""
    if not models:
        raise TcalcError("no model given; use --preset NAME[,NAME...], --config FILE or --hf-config FILE")
    spec, gpus = build_spec(axes_text, models, metrics, settings, job, tokens=tokens, mfu=mfu, number=number,
                            gpu_lookup=gpu_lookup, peak=peak, command_defaults=command_defaults)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise TcalcError(f"--limit ({_clip(str(limit))}) must be a whole number >= 1")
    if fits_only and not ({"fits", "inference_fits"} & set(spec.metrics)):
        raise TcalcError("--fits-only keeps the points whose fits or inference_fits is true; add one to --metrics")
    return SweepRun(spec, models, gpus, fits_only=fits_only, sort=sort_column(sort, spec.columns), limit=limit)


def fits_filter(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The points that fit: training memory (`fits`) and inference memory (`inference_fits`)."""
    for r in rows:
        if r.get("fits", True) and r.get("inference_fits", True):
            yield r
