"""Training settings (`tcalc train`, `tcalc plan`): the workload, training and parallelism settings
of a step, each resolved from the flags (or API keywords), then the job file's training: section,
then the defaults (`model.config.resolve`, the one precedence rule `tcalc memory` uses too)."""

from __future__ import annotations

from typing import Any

from transformer_calc.model.config import ModelConfig

# ============================================================================ train, plan
# tcalc train's and plan's defaults where they are not tcalc memory's (Training's and Parallelism's):
# Megatron-core conventions, FlashAttention and a distributed optimizer (ZeRO-1), on an H100.
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


# `tcalc train`'s options (the CLI's and tc.train's parameter names, the same in both doors) -> the
# job-file keys `train_configs` resolves. One table, so the two doors cannot pass different sets.
TRAIN_OPTIONS = {
    "S": "seq_len", "micro_batch": "batch_size", "T": "tensor", "P": "pipeline", "virtual_stages": "virtual_stages",
    "cp": "context", "ep": "expert", "sp": "sequence_parallel", "zero": "zero", "recompute": "recompute",
    "flash": "flash", "precision": "precision", "dtype": "dtype", "p": "p", "framework": "framework",
    "finetune": "finetune", "lora_rank": "lora_rank", "lora_targets": "lora_targets", "offload": "offload",
    "offload_device": "offload_device", "fp8_recipe": "fp8_recipe", "gpu": "gpu", "optimizer": "optimizer",
    "grad_bytes": "grad_bytes", "activations": "activations", "cross_entropy": "cross_entropy", "dropout": "dropout",
    "head": "head_activations", "fused_optimizer": "fused_optimizer", "etp": "expert_tensor",
    "lora_alpha": "lora_alpha", "train_embeddings": "train_embeddings", "train_head": "train_head",
    "fp32_unquantized": "fp32_unquantized",
}


def train_flags(values: dict[str, Any]) -> dict[str, Any]:
    """The job-file keys of `tcalc train`'s options from a door's parameter values (TRAIN_OPTIONS)."""
    return {key: values[name] for name, key in TRAIN_OPTIONS.items()}
