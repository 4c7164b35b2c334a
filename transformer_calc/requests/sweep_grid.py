"""`tcalc sweep`'s grid as the user spells it: each axis's flag and its values (`parse_values`: lists
and ranges, 8k, 1e3), the metrics (`check_metrics`, with the names before issue 12), the settings fixed
for every point, and the one validation of all of it before any point is priced (`build_spec`):
flags, then the job file's sections, then the defaults. The pricing of a point is the estimators'
(estimators/sweep.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from transformer_calc.errors import TcalcError, known_list
from transformer_calc.estimators.inference.engines import DEFAULT_ENGINE, ENGINES
from transformer_calc.estimators.inference.roofline import InferenceSpec
from transformer_calc.estimators.sweep import (
    INFERENCE_METRICS,
    METRICS,
    METRIC_SOURCES,
    NEEDS_GPU,
    PeakLookup,
    SweepSpec,
    TRAINING_METRICS,
)
from transformer_calc.model.config import ModelConfig, Parallelism, Training, build


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


# Names before issue 12 -> today's (an old name is an error that says the new one).
RENAMED = {
    "memory": "peak_bytes", "weights": "weights_bytes", "activations": "activations_bytes",
    "headroom": "headroom_bytes", "flops": "model_flops", "kv_cache": "kv_cache_bytes",
    "inference_memory": "inference_memory_bytes", "ttft_s": "time_to_first_token_s",
    "decode_s": "time_per_output_token_s", "bound": "decode_bound",
}  # fmt: skip
MAX_POINTS = 1_000_000  # a guard against typos such as --B 1..10000000:1


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
            raise TcalcError(f"{flag} {clip_values(text)}: empty value in the list; write e.g. 1,2,4..64")
        if axis in INT_AXES:
            out.extend(_int_values(axis, flag, raw, number or _number))
        elif axis == "flash":
            lowered = raw.lower()
            if lowered not in ("true", "false", "on", "off", "yes", "no", "1", "0"):
                raise TcalcError(f"{flag} {clip_values(raw)}: use true/false (on/off)")
            out.append(lowered in ("true", "on", "yes", "1"))
        else:
            out.append(raw)
    return list(dict.fromkeys(out))  # drop repeats, keep the order


def clip_values(value: Any) -> str:
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
        raise TcalcError(f"{flag} {clip_values(raw)}: {exc}; use e.g. 8, 8k, 1e3, lists (1,2,8) or ranges (1..64, 512..4096:512)") from None


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
            raise TcalcError(f"{flag} {clip_values(raw)}: a range a..b needs {first} <= a <= b" + (f" <= {high}" if high is not None else ""))
        if step is not None:
            if step < 1:
                raise TcalcError(f"{flag} {clip_values(raw)}: the step must be >= 1")
            if (hi - lo) // step >= MAX_POINTS:
                raise TcalcError(f"{flag} {clip_values(raw)}: more than {MAX_POINTS:,} values; use a larger step")
            return list(range(lo, hi + 1, step))
        return [lo << k for k in range((hi // lo).bit_length())]  # lo, 2·lo, 4·lo, ... <= hi
    value = number(axis, flag, raw)
    if value < low or (high is not None and value > high):
        hint = "ZeRO stages 0 to 3" if axis == "zero" else "whole numbers >= 1"
        raise TcalcError(f"{flag} {clip_values(raw)}: use {hint} ({bounds}), lists (1,2,8) or ranges (1..64, 512..4096:512)")
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
            raise TcalcError(f"--metrics: unknown metric {clip_values(name)}; {hint}")
    return tuple(dict.fromkeys(names))


def axis_name(name: str) -> str:
    """An axis by its key or its letter (B, S, T, P, dp, ep, cp)."""
    return AXIS_ALIASES.get(name, name)


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
    `gpu_lookup` and peaks with `peak` (the callers' presets.gpu and results.common.peak_for,
    passed in: the grid's pricing, estimators/sweep.py, reads `peak` per point). `command_defaults` are the training commands'
    defaults (requests.defaults.sweep_defaults: the flash, zero, recompute and gpu axes, the
    framework, sequence parallelism at T > 1), so that a point is priced as `tcalc memory` prices
    it; without them, the estimators' own (the seed's eager, unsharded picture)."""
    training_section = dict(job.training) if job is not None else {}
    inference_section = dict(job.inference) if job is not None else {}
    names = [m.strip() for m in metrics] if metrics is not None else None
    if names is not None:
        names = [m for m in names if m]
        wanted = check_metrics(names)
    want_training = names is None or any(m in TRAINING_METRICS for m in names)
    want_inference = names is not None and any(m in INFERENCE_METRICS for m in names)
    command = command_defaults or {}
    axes, gpus = _axes(axes_text, models, training_section if want_training else {},
                       inference_section if want_inference else {}, command, number, gpu_lookup)
    if names is None:
        wanted = check_metrics(["peak_bytes", "fits", "model_flops"] if gpus else ["peak_bytes", "model_flops"])
    missing = [m for m in wanted if m in NEEDS_GPU]
    if missing and not gpus:
        raise TcalcError(f"metrics {', '.join(missing)} need --gpu NAME (e.g. --gpu a100-80gb)")
    _check_relevant(wanted, axes_text, settings)
    training, parallelism = _training_settings(axes, training_section, settings, command)
    _check_dtypes(axes, gpus)
    engine, inference = _inference_settings(axes, inference_section, settings, want_inference)
    if "train_days" in wanted and tokens is None:
        raise TcalcError("train_days needs the token budget: give --tokens, e.g. --tokens 300e9")
    if mfu is not None and (isinstance(mfu, bool) or not isinstance(mfu, (int, float)) or not 0 < mfu <= 1):
        raise TcalcError(f"--mfu ({clip_values(str(mfu))}) must be a fraction in (0, 1], e.g. 0.4 for 40 %")
    if "train_days" in wanted and peak is None:
        raise TypeError("build_spec needs peak (report.peak_for) for train_days")
    spec = SweepSpec(axes=axes, metrics=wanted, training=training, parallelism=parallelism, inference=inference,
                     sp_with_tensor=bool(command.get("sp_with_tensor", False)),
                     engine=str(engine), tokens=tokens, mfu=0.4 if mfu is None else float(mfu), peak=peak)
    if spec.size > MAX_POINTS:
        raise TcalcError(f"the grid has {spec.size:,} points; keep it under {MAX_POINTS:,} (split it, or use fewer values)")
    return spec, gpus


def _axes(axes_text: dict[str, Any], models: dict[str, ModelConfig], training_section: dict[str, Any],
          inference_section: dict[str, Any], command: dict[str, Any], number: NumberParser | None,
          gpu_lookup: GpuLookup | None) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """(each axis's values, the GPUs by canonical name): the flag's text, else the job file's value
    (training: for training metrics, inference: for inference metrics), else the default."""
    from transformer_calc.model.config import Recompute

    axes: dict[str, list[Any]] = {"model": list(models)}
    gpus: dict[str, Any] = {}
    defaults = {"batch_size": "1", "tensor": "1", "pipeline": "1", "data": "1", "zero": "0", "expert": "1",
                "context": "1", "recompute": "none", "flash": "false"}  # fmt: skip
    defaults.update({k: command[k] for k in ("flash", "zero", "recompute", "gpu") if k in command})
    for axis, flag in AXES.items():
        if axis == "model":
            continue
        text, label = axes_text.get(axis), flag
        if text is None:
            text = _job_value(axis, flag, training_section, inference_section)
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
                    raise TcalcError(f"{label} ({clip_values(value)}): choose one of {choices}") from None
        if axis == "gpu":
            for name in axes[axis]:
                if gpu_lookup is None:
                    raise TypeError("build_spec needs gpu_lookup (presets.gpu) to resolve GPU names")
                device = gpu_lookup(str(name))
                gpus[device.name] = device
            axes[axis] = list(gpus)
    return axes, gpus


def _training_settings(axes: dict[str, list[Any]], training_section: dict[str, Any], settings: dict[str, Any],
                       command: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Training fields, Parallelism fields) fixed for every point: flags, then the job's training:
    section, then Training's defaults; validated with every recompute and flash value of the grid."""
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
    return training, parallelism


def _check_dtypes(axes: dict[str, list[Any]], gpus: dict[str, Any]) -> None:
    """Every compute dtype of the grid is one every GPU of the grid has a dense peak for."""
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
                raise TcalcError(f"--dtype {clip_values(dtype)}: {device.name} has no dense {canonical} peak; "
                                 f"choose one of {', '.join(device.peak_flops)}")


def _inference_settings(axes: dict[str, list[Any]], inference_section: dict[str, Any], settings: dict[str, Any],
                        want_inference: bool) -> tuple[Any, dict[str, Any]]:
    """(the serving engine, InferenceSpec fields) fixed for every point: flags, then the job's
    inference: section, then InferenceSpec's defaults; each dtype and setting checked once."""
    inf = {k: v for k, v in inference_section.items() if k in INFERENCE_SETTINGS}
    inf.update({k: v for k, v in settings.items() if k in INFERENCE_SETTINGS and v is not None})
    engine = inf.pop("engine", DEFAULT_ENGINE)
    if engine not in ENGINES:
        raise TcalcError(f"--engine ({clip_values(str(engine))}) must be one of {', '.join(ENGINES)}")
    inference = {_INFERENCE_FIELDS[k]: v for k, v in inf.items()}
    if want_inference:
        for dtype, weight in itertools.product(axes.get("dtype", [None]), axes.get("weight_dtype", [None])):
            # every dtype and setting checked once (the weights default as in _inference_metrics)
            point_inference_spec(1, 1, 1, 1, weight or dtype or "bf16", dtype, inference)
    return engine, inference

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
        raise TcalcError(f"the job file's training: and inference: sections give {axis} = {clip_values(str(a))} and "
                         f"{clip_values(str(b))}; give {flag} to choose, or ask for training or inference metrics only")
    value = a if a is not None else b
    if value is None:
        return None
    if isinstance(value, bool) and axis in INT_AXES:
        raise TcalcError(f"the job file's {axis} ({value}) is a boolean, not a number; give a number")
    return [value] if not isinstance(value, (list, tuple)) else list(value)


def point_inference_spec(B: int, S: int, T: int, ep: int, weight: str, dtype: str | None, fixed: dict[str, Any]) -> Any:
    from transformer_calc.estimators.inference.roofline import InferenceSpec

    try:
        return InferenceSpec(batch_size=B, prompt_len=S, tensor_parallel=T, expert_parallel=ep, weight_dtype=weight,
                             compute_dtype=dtype, **fixed)
    except TcalcError:
        raise
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None


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
        raise TcalcError(f"--sort {clip_values(sort)}: not a column; choose from {', '.join(columns)}")
    return ("-" if desc else "") + name
