"""`tcalc train` and `tcalc plan`: the step time of a layout, and the fastest layouts that fit.

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
from transformer_calc.results.common import model_dict, network_for


# ============================================================================ train, plan
def _layout(par: Any) -> dict[str, Any]:
    return {"tensor": par.tensor, "pipeline": par.pipeline, "virtual_stages": par.virtual_stages,
            "context": par.context, "expert": par.expert, "data": par.data,
            "sequence_parallel": par.sequence_parallel, "zero": par.zero, "gpus": par.gpus}


def train_report(
    m: ModelConfig, w: Any, tr: Any, par: Any, gpu: Any, *, global_batch: int, micro_batch_given: bool,
    network: Any = None, matmul_efficiency: float | None = None, tokens: int | None = None,
    price_per_gpu_hour: float | None = None,
) -> dict[str, Any]:
    """`tcalc train`: the step time of one layout, its breakdown, MFU, memory, and a budget."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.flops import SECONDS_PER_DAY, SECONDS_PER_HOUR
    from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory
    from transformer_calc.estimators.training.train import estimate_step, micro_batch_count

    if price_per_gpu_hour is not None and not (0 < price_per_gpu_hour < float("inf")):
        raise TcalcError(f"--price-per-gpu-hour ({price_per_gpu_hour}) must be a positive number")
    chosen = w.batch_size
    tried: list[dict[str, Any]] = []
    if tr.micro_batches is not None:  # micro-batches per step (a job file's): b = G / (dp·m)
        per_replica = global_batch // par.data
        if micro_batch_given:
            if per_replica * par.data != global_batch or per_replica != chosen * tr.micro_batches:
                raise TcalcError(f"training: micro_batches ({tr.micro_batches}) and the micro-batch ({chosen}) do not "
                                 f"make the global batch ({global_batch}) over dp = {par.data}; give one of them")
        else:
            if per_replica * par.data != global_batch or per_replica % tr.micro_batches:
                raise TcalcError(f"training: micro_batches ({tr.micro_batches}) does not divide the per-replica batch "
                                 f"(global batch {global_batch} / dp {par.data}); choose a divisor")
            chosen, micro_batch_given = per_replica // tr.micro_batches, True
    if not micro_batch_given:  # the fastest micro-batch that fits and divides the replica batch
        best = None
        per_replica = global_batch // par.data if par.data and global_batch % par.data == 0 else 0
        for b in (1, 2, 4, 8, 16, 32):
            if not per_replica or per_replica % b:
                continue
            trial_w = w.model_copy(update={"batch_size": b})
            trial_tr = tr.model_copy(update={"micro_batches": per_replica // b})
            peak = peak_memory(m, trial_w, trial_tr, par).peak_bytes
            fits = peak <= fit_capacity(gpu.memory_bytes)
            est = estimate_step(m, trial_w, trial_tr, par, gpu, global_batch=global_batch, network=network,
                                matmul_efficiency=matmul_efficiency)
            tried.append({"micro_batch": b, "fits": fits, "step_time_s": est.step_time_s})
            if fits and (best is None or est.step_time_s < best[1]):
                best = (b, est.step_time_s)
        chosen = best[0] if best else 1
    w = w.model_copy(update={"batch_size": chosen})
    m_micro = micro_batch_count(global_batch, par, chosen)
    tr = tr.model_copy(update={"micro_batches": m_micro})
    est = estimate_step(m, w, tr, par, gpu, global_batch=global_batch, network=network,
                        matmul_efficiency=matmul_efficiency)
    tl = peak_memory(m, w, tr, par)
    usable = fit_capacity(gpu.memory_bytes)
    report: dict[str, Any] = {
        "model": model_dict(m),
        "gpu": gpu.name,
        "layout": _layout(par),
        "batch": {"global_batch": global_batch, "global_batch_tokens": global_batch * w.seq_len,
                  "micro_batch": chosen, "micro_batch_chosen": not micro_batch_given,
                  "micro_batches": m_micro, "seq_len": w.seq_len, "tried": tried},
        "training": tr.model_dump(mode="json"),
        "step_time_s": est.step_time_s,
        "breakdown": est.breakdown,
        "dp_comm_total_s": est.dp_comm_s,
        "tokens_per_s": est.tokens_per_s,
        "tokens_per_s_per_gpu": est.tokens_per_s / est.gpus,
        "mfu": est.mfu,
        "hfu": est.hfu,
        "tflops_per_gpu": est.tflops_per_gpu,
        "model_flops": est.model_flops,
        "hardware_flops": est.hardware_flops,
        "memory": {"peak_bytes": tl.peak_bytes, "peak_phase": tl.peak.name, "usable_bytes": usable,
                   "fits": tl.peak_bytes <= usable,
                   **({"offloaded_bytes_per_gpu": tl.stage.offloaded, "offload_device": tr.offload_device.value}
                      if tr.offload.value != "none" else {})},
        "assumptions": est.assumptions,
    }
    if tokens is not None:
        seconds = tokens / est.tokens_per_s
        budget: dict[str, Any] = {"tokens": tokens, "steps": -(-tokens // (global_batch * w.seq_len)),
                                  "time_s": seconds, "days": seconds / SECONDS_PER_DAY,
                                  "gpu_hours": seconds * est.gpus / SECONDS_PER_HOUR}
        if price_per_gpu_hour is not None:
            budget["cost"] = budget["gpu_hours"] * price_per_gpu_hour
        report["budget"] = budget
    return report


def plan_report(
    m: ModelConfig, seq_len: int, tr: Any, gpu: Any, *, gpus: int, global_batch: int, top: int = 10,
    node_size: int | None = None, inter_node_gb_s: float | None = None, source: str | None = None,
    expert_tensor: int | None = None,
) -> dict[str, Any]:
    """`tcalc plan`: the feasible layouts ranked by step time, and why the others were rejected.

    `source` is the model as typed on a command line (`--preset NAME`, a MODEL, `--config FILE`,
    with its overrides): best_command repeats it, and every setting that is not `tcalc train`'s
    default, so that running it prices exactly the best plan."""
    from transformer_calc.estimators.training.train import plan_layouts

    plans, rejected = plan_layouts(m, seq_len, tr, gpu, gpus=gpus, global_batch=global_batch,
                                   network=network_for(gpu, node_size, inter_node_gb_s), expert_tensor=expert_tensor)
    rows = []
    for pl in plans[:top]:
        est = pl.estimate
        rows.append({
            "layout": _layout(pl.parallelism), "micro_batch": pl.micro_batch, "recompute": pl.recompute.value,
            "step_time_s": est.step_time_s, "mfu": est.mfu, "tokens_per_s": est.tokens_per_s,
            "peak_bytes": pl.peak_bytes, "breakdown": est.breakdown,
        })
    command = None
    if plans:
        best = plans[0]
        par = best.parallelism
        command = (
            f"tcalc train {source or '<model>'} --gpus {gpus} --gpu {gpu.name} --S {seq_len} --global-batch {global_batch} "
            f"--T {par.tensor} --P {par.pipeline} --virtual-stages {par.virtual_stages} --cp {par.context} "
            f"--ep {par.expert} --zero {par.zero}{' --sp' if par.sequence_parallel else ''} "
            f"--micro-batch {best.micro_batch} --recompute {best.recompute.value}{' --flash' if tr.flash else ' --no-flash'}"
            # what tcalc train would otherwise default differently
            + (f" --framework {tr.framework.value}" if tr.framework.value != "megatron" else "")
            + (f" --finetune {tr.finetune.value} --lora-rank {tr.lora_rank} --lora-targets "
               f"{','.join(t.value for t in tr.lora_targets)}" if tr.adapters else "")
            + (f" --node-size {node_size}" if node_size is not None else "")
            + (f" --inter-node-gb-s {repr(float(inter_node_gb_s)).removesuffix('.0')}"
               if inter_node_gb_s is not None else "")
        )
    return {
        "model": model_dict(m), "gpu": gpu.name, "gpus": gpus, "seq_len": seq_len, "global_batch": global_batch,
        "evaluated": len(plans) + sum(rejected.values()), "feasible": len(plans),
        "plans": rows, "rejected": rejected, "best_command": command,
    }


class TrainResult(Result):
    model: dict[str, Any]
    gpu: str
    layout: dict[str, Any]
    batch: dict[str, Any]
    training: dict[str, Any]
    step_time_s: float
    breakdown: dict[str, float]
    dp_comm_total_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    hfu: float
    tflops_per_gpu: float
    model_flops: int
    hardware_flops: int
    memory: dict[str, Any]
    assumptions: dict[str, Any]
    budget: dict[str, Any] | None = None


class PlanResult(Result):
    model: dict[str, Any]
    gpu: str
    gpus: int
    seq_len: int
    global_batch: int
    evaluated: int
    feasible: int
    plans: list[dict[str, Any]]
    rejected: dict[str, int]
    best_command: str | None


TRAIN_DEFAULTS: dict[str, Any] = {"framework": "megatron", "flash": True, "zero": 1, "recompute": "none",
                                  "gpu": "h100"}
TRAIN_GPUS = 8  # --gpus when neither the flag nor the job file's layout gives the count


# The layout plan chooses itself: a job file's values for these keys are not used by `tcalc plan`.
PLAN_LAYOUT_KEYS = ("tensor", "sequence_parallel", "pipeline", "data", "zero", "expert", "context", "virtual_stages",
                    "batch_size", "micro_batches", "recompute")


def train_configs(
    m: ModelConfig, section: dict[str, Any], flags: dict[str, Any], gpus: int | None = None
) -> tuple[Any, Any, Any, str, bool]:
    """`tcalc train`'s settings, resolved as `tcalc memory`'s (config.resolve): a flag that was
    given, then the job file's training: section, then the default (TRAIN_DEFAULTS, else the
    config's). Data parallelism is what the GPUs leave, dp = gpus / (T·P·CP); without `gpus`, the
    job file's layout sets the count (data·T·P·CP), else TRAIN_GPUS. A micro-batch given as a flag
    fixes the micro-batches per step (G / (dp·b)); the section's `micro_batches` is then not used.
    Returns (Workload, Training, Parallelism, gpu name, whether the micro-batch was given); the
    CLI and the Python API both call it."""
    from transformer_calc.model.config import Parallelism, Training, Workload, build, resolve, split_training
    from transformer_calc.errors import TcalcError

    settings = resolve(flags, section, {"seq_len": m.max_seq_len, **TRAIN_DEFAULTS})
    if flags.get("batch_size") is not None:
        settings.pop("micro_batches", None)
    parts = split_training(settings)
    layout = build(Parallelism, parts["parallelism"], "training")
    T, P, cp = layout.tensor, layout.pipeline, layout.context
    if gpus is None:
        gpus = layout.gpus if "data" in parts["parallelism"] else TRAIN_GPUS
    if gpus % (T * P * cp):
        raise TcalcError(f"--gpus ({gpus}) must be a multiple of T x P x CP ({T} x {P} x {cp}); data parallelism is what is left")
    par = build(Parallelism, {**parts["parallelism"], "data": gpus // (T * P * cp)}, "training")
    w = build(Workload, {"batch_size": 1, **parts["workload"]}, "training")
    tr = build(Training, parts["training"], "training")
    return w, tr, par, str(parts["gpu"]["gpu"]), "batch_size" in parts["workload"]


def plan_configs(m: ModelConfig, section: dict[str, Any], flags: dict[str, Any]) -> tuple[int, Any, str, int | None]:
    """`tcalc plan`'s settings, as train's (`train_configs`) but for the layout, which plan
    chooses (PLAN_LAYOUT_KEYS of the section are not used). Returns (S, Training, gpu name, the
    expert-tensor size or None)."""
    from transformer_calc.model.config import Parallelism, Training, Workload, build, resolve, split_training

    fixed = {k: v for k, v in section.items() if k not in PLAN_LAYOUT_KEYS}
    parts = split_training(resolve(flags, fixed, {"seq_len": m.max_seq_len, **TRAIN_DEFAULTS}))
    w = build(Workload, parts["workload"], "training")
    tr = build(Training, parts["training"], "training")
    etp = build(Parallelism, {k: v for k, v in parts["parallelism"].items() if k == "expert_tensor"}, "training")
    return w.seq_len, tr, str(parts["gpu"]["gpu"]), etp.expert_tensor


