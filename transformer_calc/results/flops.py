"""`tcalc flops` and `tcalc mfu`: FLOPs of a step, training time, compute-optimal sizing; MFU and HFU.

A result is composed here from the estimators; docs/cli.md documents its keys."""

from __future__ import annotations


from transformer_calc.results.base import Result
from typing import Any
from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.estimators.params import (
    count_params,
    seed_block_approx,
    seed_total_approx,
    tensor_parallel_params,
)
from transformer_calc.results.common import model_dict, peak_for


def flops_request(
    m: ModelConfig, section: dict[str, Any], *, S: int | None = None, B: int | None = None,
    recompute: str | None = None, causal: bool = False, windowed: bool = False, tokens: int | None = None,
    gpus: int | None = None, gpu_name: str | None = None, dtype: str | None = None, mfu: float | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """`tcalc flops` from its options (flag, then the job file's training: section, then the
    default), validated with the flag each came from; the CLI and the Python API both call it."""
    from transformer_calc.model.config import Recompute, Workload, build, resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.sources.presets import gpu as find_gpu

    o = resolve({"seq_len": S, "batch_size": B, "recompute": recompute}, section,
                {"seq_len": m.max_seq_len, "batch_size": 1, "recompute": "none"})
    workload = build(Workload, {"seq_len": o["seq_len"], "batch_size": o["batch_size"]}, "workload")
    try:
        rec = Recompute(o["recompute"])
    except ValueError:
        raise TcalcError(f"--recompute ({o['recompute']!r}): choose one of {', '.join(v.value for v in Recompute)}") from None
    if (gpus is not None or gpu_name is not None or mfu is not None) and tokens is None:
        raise TcalcError("--gpus, --gpu and --mfu estimate training time: give --tokens too, e.g. --tokens 300e9")
    if tokens is not None and (gpus is None) != (gpu_name is None):
        raise TcalcError("a training-time estimate needs both --gpus N and --gpu NAME")
    if mfu is not None and not 0 < mfu <= 1:
        raise TcalcError(f"--mfu ({mfu}) must be a fraction in (0, 1], e.g. 0.4 for 40 %")
    device = find_gpu(gpu_name) if gpu_name is not None else None
    return flops_report(
        m, workload, causal=causal, windowed=windowed, recompute=rec, tokens=tokens, gpus=gpus, gpu=device,
        dtype=dtype, mfu=(mfu if mfu is not None else 0.4) if device else None, budget=budget,
    )


def flops_report(
    m: ModelConfig,
    w: Any,
    causal: bool = False,
    recompute: Any = "none",
    tokens: int | None = None,
    windowed: bool = False,
    gpus: int | None = None,
    gpu: Any | None = None,
    dtype: str | None = None,
    mfu: float | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """`tcalc flops`: model and hardware FLOPs per step, rules of thumb, training time, sizing."""
    import importlib

    F = importlib.import_module("transformer_calc.estimators.flops")

    step = F.count_flops(m, w, causal=causal, windowed=windowed)
    counts = count_params(m)
    report: dict[str, Any] = {
        "model": model_dict(m),
        "workload": w.model_dump(mode="json"),
        "conventions": {"causal": causal, "recompute": str(getattr(recompute, "value", recompute))},
        "flops": {**step.as_dict(), "hardware": step.hardware(recompute)},
        "rules_of_thumb": {
            "six_n_per_token": F.six_n_flops_per_token(m),
            "six_n_non_embedding_per_token": F.six_n_flops_per_token(m, include_embeddings=False),
            "palm_per_token": F.palm_flops_per_token(m, w.seq_len),
            "seed_total": F.seed_model_flops(m, w),
            "seed_total_with_lm_head": F.seed_model_flops(m, w, lm_head=True),
        },
        "compute_optimal": {"for_params": _optimal(F.chinchilla_for_params(counts.total))},
    }
    if budget is not None:
        report["compute_optimal"]["for_budget"] = {"budget": budget, **_optimal(F.chinchilla_for_flops(budget))}
    if tokens is not None:
        total = F.train_flops_for_tokens(m, w.seq_len, tokens, causal=causal)
        training: dict[str, Any] = {
            "tokens": tokens,
            "flops": total,
            "flops_six_n": F.train_flops_for_tokens(m, w.seq_len, tokens, exact=False),
        }
        if gpu is not None and gpus is not None and mfu is not None:
            used, peak = peak_for(gpu, dtype)
            seconds = F.training_time_s(total, gpus, peak, mfu)
            training.update(
                {
                    "gpus": gpus,
                    "gpu": gpu.name,
                    "dtype": used,
                    "peak_flops_per_gpu": peak,
                    "mfu": mfu,
                    "time_s": seconds,
                    "days": seconds / F.SECONDS_PER_DAY,
                    "gpu_hours": F.gpu_hours(seconds, gpus),
                }
            )
        report["training"] = training
    return report


def _optimal(c: Any) -> dict[str, int]:
    return {"params": c.params, "tokens": c.tokens, "flops": c.flops}


def mfu_request(
    m: ModelConfig, section: dict[str, Any], *, S: int | None = None, gpus: int = 1, gpu_name: str = "a100-80gb",
    dtype: str | None = None, global_batch: int | None = None, global_batch_tokens: int | None = None,
    step_time: float | None = None, tokens_per_s: float | None = None, recompute: str | None = None,
    causal: bool = False, hfu_convention: str = "executed",
) -> dict[str, Any]:
    """`tcalc mfu` from its options (a flag, then the job file's training: section, then the
    default), each validated with the flag it came from; the CLI and the Python API both call it."""
    import math

    from transformer_calc.model.config import Recompute, Workload, build, resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.sources.presets import gpu as find_gpu

    o = resolve({"seq_len": S, "recompute": recompute}, section, {"seq_len": m.max_seq_len, "recompute": "none"})
    workload = build(Workload, {"seq_len": o["seq_len"]}, "workload")
    rec = o["recompute"]
    if global_batch_tokens is not None:
        if global_batch is not None:
            raise TcalcError("give the global batch once: --global-batch (sequences) or --global-batch-tokens, not both")
        if global_batch_tokens < workload.seq_len:
            raise TcalcError(f"--global-batch-tokens ({global_batch_tokens}) is less than one sequence of S = {workload.seq_len} tokens")
        global_batch = global_batch_tokens // workload.seq_len
    if tokens_per_s is None and (global_batch is None or step_time is None):
        raise TcalcError("give the measured speed: --tokens-per-s N, or --global-batch N and --step-time SECONDS")
    if tokens_per_s is not None and (global_batch is not None or step_time is not None):
        raise TcalcError("give --tokens-per-s or --global-batch with --step-time, not both")
    for name, value in (("--step-time", step_time), ("--tokens-per-s", tokens_per_s)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise TcalcError(f"{name} ({value}) must be a positive, finite number")
    if hfu_convention not in ("executed", "paper"):
        raise TcalcError(f"--hfu-convention ({str(hfu_convention)[:40]!r}) must be one of executed, paper")
    try:
        rec_kind = Recompute(rec)
    except ValueError:
        raise TcalcError(f"--recompute ({rec!r}): choose one of {', '.join(v.value for v in Recompute)}") from None
    return mfu_report(
        m, workload, gpus, find_gpu(gpu_name), dtype=dtype, global_batch=global_batch, step_time=step_time,
        tokens_per_s=tokens_per_s, recompute=rec_kind, causal=causal, hfu_convention=hfu_convention,
    )


def mfu_report(
    m: ModelConfig,
    w: Any,
    gpus: int,
    gpu: Any,
    dtype: str | None = None,
    global_batch: int | None = None,
    step_time: float | None = None,
    tokens_per_s: float | None = None,
    recompute: Any = "none",
    causal: bool = False,
    hfu_convention: str = "executed",
) -> dict[str, Any]:
    """`tcalc mfu`: MFU and HFU from a measured step time (with the global batch) or throughput."""
    import importlib

    F = importlib.import_module("transformer_calc.estimators.flops")

    step = F.count_flops(m, w.model_copy(update={"batch_size": 1}), causal=causal)
    per_token_model = step.total // step.tokens
    per_token_hw = step.hardware(recompute, hfu_convention) // step.tokens
    if tokens_per_s is None:
        if global_batch is None or step_time is None:
            raise ValueError("give --tokens-per-s, or --global-batch and --step-time")
        if step_time <= 0:
            raise ValueError(f"--step-time ({step_time}) must be positive seconds per step")
        tokens_per_s = global_batch * w.seq_len / step_time
    used, peak = peak_for(gpu, dtype)
    model_mfu = F.mfu_from_throughput(per_token_model, tokens_per_s, gpus, peak)
    hardware_fu = F.mfu_from_throughput(per_token_hw, tokens_per_s, gpus, peak)
    if hardware_fu > 1 or model_mfu > 1:  # impossible: more FLOP/s than the GPUs have
        from transformer_calc.errors import TcalcError

        cause = (
            "--global-batch counts sequences (give tokens with --global-batch-tokens)"
            if global_batch is not None else "--tokens-per-s is for all GPUs together"
        )
        import math

        shown = f"{100 * model_mfu:.0f} %" if math.isfinite(model_mfu) else "beyond any finite value"
        raise TcalcError(
            f"MFU would be {shown}, above 100 % of {gpus} x {gpu.name}'s "
            f"{used} peak: the inputs cannot be right; check --gpus, --step-time, and that {cause}"
        )
    out: dict[str, Any] = {
        "model": model_dict(m),
        "seq_len": w.seq_len,
        "gpus": gpus,
        "gpu": gpu.name,
        "dtype": used,
        "peak_flops_per_gpu": peak,
        "tokens_per_s": tokens_per_s,
        "mfu": model_mfu,
        "hfu": hardware_fu,
        "achieved_flops_per_gpu": model_mfu * peak,
        "achieved_hardware_flops_per_gpu": hardware_fu * peak,
        "flops": {
            "per_token": per_token_model,
            "hardware_per_token": per_token_hw,
            "recompute": str(getattr(recompute, "value", recompute)),
            "causal": causal,
            "hfu_convention": hfu_convention,
        },
    }
    if global_batch is not None and step_time is not None:
        out["global_batch"] = global_batch
        out["step_time_s"] = step_time
        out["flops"]["per_step"] = per_token_model * global_batch * w.seq_len
        out["flops"]["hardware_per_step"] = per_token_hw * global_batch * w.seq_len
    return out


class FlopsResult(Result):
    model: dict[str, Any]
    workload: dict[str, Any]
    conventions: dict[str, Any]
    flops: dict[str, Any]
    rules_of_thumb: dict[str, Any]
    compute_optimal: dict[str, Any] | None = None
    training: dict[str, Any] | None = None


class MfuResult(Result):
    model: dict[str, Any]
    seq_len: int
    gpus: int
    gpu: str
    dtype: str
    peak_flops_per_gpu: int
    tokens_per_s: float
    mfu: float
    hfu: float
    achieved_flops_per_gpu: float
    achieved_hardware_flops_per_gpu: float
    flops: dict[str, Any]
    global_batch: int | None = None
    step_time_s: float | None = None
