"""Job-file routing: a job file's `training:`, `inference:` and `checks:` sections, their keys and
aliases, and the one precedence rule (flag, then file, then default) every command uses.
"""

from __future__ import annotations

from typing import Any

from transformer_calc.errors import TcalcError, clip, did_you_mean, known_list


# ============================================================================ job-file sections
# A job file (`--config FILE.yaml`) has `model:` and optional `training:`, `inference:` and
# `checks:` sections. Section keys use descriptive names; the seed's letters and the CLI's short
# flag names are accepted as aliases. Command-line flags override the file.
TRAINING_KEYS: dict[str, str] = {  # canonical key -> which config it belongs to
    "seq_len": "workload",
    "batch_size": "workload",
    "precision": "training",
    "p": "training",
    "grad_bytes": "training",
    "optimizer": "training",
    "recompute": "training",
    "flash": "training",
    "dropout": "training",
    "activations": "training",
    "head_activations": "training",
    "framework": "training",
    "cross_entropy": "training",
    "micro_batches": "training",
    "fused_optimizer": "training",
    "finetune": "training",
    "lora_rank": "training",
    "lora_alpha": "training",
    "lora_targets": "training",
    "train_embeddings": "training",
    "train_head": "training",
    "fp32_unquantized": "training",
    "offload": "training",
    "offload_device": "training",
    "fp8_recipe": "training",
    "compile": "training",
    "tensor": "parallelism",
    "sequence_parallel": "parallelism",
    "pipeline": "parallelism",
    "data": "parallelism",
    "zero": "parallelism",
    "expert": "parallelism",
    "expert_tensor": "parallelism",
    "context": "parallelism",
    "virtual_stages": "parallelism",
    "first_stage_layers": "parallelism",
    "last_stage_layers": "parallelism",
    "embedding_in_split": "parallelism",
    "loss_in_split": "parallelism",
    "pipeline_schedule": "parallelism",
    "cp_comm_type": "parallelism",
    "microbatch_group": "parallelism",
    "gpu": "gpu",
}


INFERENCE_KEYS = {"batch_size", "seq_len", "new_tokens", "tensor", "expert", "dtype", "p", "weight_dtype", "kv_dtype", "cache_kv_heads", "kv_cache", "mla_cache", "gpu", "images", "state_dtype",
                  "matmul_efficiency", "memory_efficiency", "cuda_graphs", "kernel_launch_s", "sequence_overhead_s",
                  "block_size", "memory_utilization", "max_num_batched_tokens", "max_num_seqs", "cuda_context",
                  "activation_peak", "engine_workspace", "ttft_s", "tpot_s", "request_rate", "gpus",
                  "engine", "frontend", "chunked_prefill", "bench_batch_limits", "request_overhead_s",
                  "redundant_experts", "moe_a2a_overlap", "dispatch_dtype"}


CHECK_KEYS = {"gpu", "max_memory", "min_tokens_per_s", "max_ttft_s", "max_tpot_s"}


SECTION_ALIASES: dict[str, str] = {
    "S": "seq_len",
    "B": "batch_size",
    "T": "tensor",
    "sp": "sequence_parallel",
    "P": "pipeline",
    "dp": "data",
    "ep": "expert",
    "etp": "expert_tensor",
    "cp": "context",
    "head": "head_activations",
}


def canonical_section(name: str, data: Any, allowed: dict[str, str] | set[str] | list[str]) -> dict[str, Any]:
    """A job-file section with aliases resolved; unknown keys are errors with did-you-mean."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TcalcError(f"{name}: must be a mapping of settings, got {type(data).__name__}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        canon = SECTION_ALIASES.get(str(key), str(key))
        if canon not in allowed:
            hint = did_you_mean(key, [*allowed, *SECTION_ALIASES]) or known_list(key, sorted(allowed))
            raise TcalcError(f"{name}: unknown key {clip(key)}; {hint}")
        if canon in out:
            raise TcalcError(f"{name}: {canon} is given twice (as {canon!r} and an alias); keep one")
        out[canon] = value
    return out


def split_training(section: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Canonical training settings -> {'workload': {...}, 'training': {...}, 'parallelism': {...},
    'gpu': {'gpu': name}} (each ready for model_validate)."""
    parts: dict[str, dict[str, Any]] = {"workload": {}, "training": {}, "parallelism": {}, "gpu": {}}
    for key, value in section.items():
        parts[TRAINING_KEYS[key]][key] = value
    return parts


def resolve(flags: dict[str, Any], section: dict[str, Any] | None = None,
            defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one precedence rule of every command: a flag that was given (not None), then the job
    file's section, then the default."""
    return {**(defaults or {}), **(section or {}), **{k: v for k, v in flags.items() if v is not None}}
