"""`tcalc memory`: peak training memory per GPU (the phase timeline), its breakdown, the fit on a GPU.

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
from transformer_calc.results.common import model_dict


def memory_report(
    m: ModelConfig,
    w: Any,
    tr: Any,
    par: Any,
    gpu: Any | None = None,
) -> dict[str, Any]:
    """`tcalc memory`: training memory per GPU of the most loaded pipeline stage, with fitting."""
    from transformer_calc.estimators.training.memory import b_min, optimizer_bytes_per_param
    from transformer_calc.estimators.training.timeline import (
        CUDA_CONTEXT_BYTES,
        allocator_reserve,
        fit_capacity,
        max_micro_batch,
        min_parallelism,
        stage_timelines,
    )

    from transformer_calc.estimators.training.finetune import trainable_params

    timelines = stage_timelines(m, w, tr, par)
    timeline = max(timelines, key=lambda tl: tl.peak_bytes)
    worst, peak = timeline.stage, timeline.peak
    non_act = worst.model_states
    reserve = allocator_reserve(peak.total)
    trainable = trainable_params(m, tr)
    report: dict[str, Any] = {
        "model": model_dict(m),
        "workload": w.model_dump(mode="json"),
        "training": tr.model_dump(mode="json"),
        "parallelism": {**par.model_dump(mode="json"), "gpus": par.gpus},
        "params": {"total": count_params(m).total, "per_gpu": worst.params,
                   "trainable": trainable.total, "trainable_per_gpu": worst.trainable_params},
        "memory": {
            "peak_bytes": peak.total,
            "peak_phase": peak.name,
            "peak": peak.as_dict(),
            "sum_bytes": timeline.sum_bytes,
            "cuda_context_bytes": CUDA_CONTEXT_BYTES,
            "allocator_reserve_bytes": reserve,
            "nvidia_smi_bytes": peak.total + CUDA_CONTEXT_BYTES + reserve,
            "phases": [ph.as_dict() for ph in timeline.phases],
            "per_gpu": {
                "weights_bytes": worst.weights,
                "gradients_bytes": worst.gradients,
                "optimizer_bytes": worst.optimizer,
                "activations_bytes": worst.activations,
                "total_bytes": worst.total,
            },
            "weights_detail": {  # fine-tuning: frozen base (of it NF4) and the trainable copy
                "frozen_bytes": worst.weights - worst.adapter_weights if tr.adapters else 0,
                "quantized_bytes": worst.quantized_weights,
                "trainable_bytes": worst.adapter_weights if tr.adapters else worst.weights - worst.fp8_weights,
                "fp8_copies_bytes": worst.fp8_weights,
            },
            "activations": {
                "attention_bytes": worst.attention,
                "mlp_bytes": worst.mlp,
                "norm_bytes": worst.norm,
                "other_bytes": worst.other,
                "recompute_working_bytes": worst.recompute_working,
            },
            "activation_ratio": worst.activations / non_act if non_act else None,
            "stage": worst.stage,
            "in_flight_micro_batches": worst.in_flight,
            "bytes_per_param": _bytes_per_param(tr),
            "optimizer_groups": _optimizer_groups(m, tr),
            "stages": [
                {
                    "stage": tl.stage.stage,
                    "n_layers": tl.stage.n_layers,
                    "params": tl.stage.params,
                    "model_states_bytes": tl.stage.model_states,
                    "activations_bytes": tl.stage.activations,
                    "total_bytes": tl.stage.total,
                    "peak_bytes": tl.peak_bytes,
                    "peak_phase": tl.peak.name,
                }
                for tl in timelines
            ],
        },
        "b_min": b_min(m, w.seq_len),
    }
    if tr.adapters:
        report["finetune"] = _finetune_section(m, tr, trainable)
    if tr.offload.value != "none":
        report["offload"] = _offload_section(tr, par, worst, peak.total)
    if gpu is not None:
        capacity = fit_capacity(gpu.memory_bytes)
        fit_T = min_parallelism(m, w, tr, par, capacity)
        fit_TP = min_parallelism(m, w, tr, par, capacity, vary_pipeline=True)
        report["gpu"] = {
            "name": gpu.name,
            "memory_bytes": gpu.memory_bytes,
            "usable_bytes": capacity,
            "headroom_bytes": capacity - peak.total,
        }
        report["fits"] = peak.total <= capacity
        report["fit"] = {
            "max_micro_batch": max_micro_batch(m, w, tr, par, capacity),
            "min_tensor_parallel": fit_T[0] if fit_T else None,
            "min_tensor_pipeline": {"T": fit_TP[0], "P": fit_TP[1]} if fit_TP else None,
        }
    return report


def _bytes_per_param(tr: Any) -> dict[str, Any]:
    """Bytes per parameter of each model state (per trainable parameter under adapters)."""
    from transformer_calc.estimators.training.finetune import NF4_BLOCK, NF4_BLOCKS_PER_GROUP, trainable_weight_bytes
    from transformer_calc.estimators.training.memory import optimizer_bytes_per_param, trainable_optimizer_bytes

    if not tr.adapters:
        return {"weights": tr.p, "gradients": tr.grad_bytes, "optimizer": optimizer_bytes_per_param(tr)}
    nf4_bits = 4 + 8 / NF4_BLOCK + 32 / (NF4_BLOCK * NF4_BLOCKS_PER_GROUP)
    return {
        "weights": 4 if tr.fp32_unquantized else tr.p,  # frozen parameters not quantized
        "quantized_weights": nf4_bits / 8 if tr.finetune.value == "qlora" else None,
        "trainable_weights": trainable_weight_bytes(tr),
        "gradients": tr.grad_bytes,
        "optimizer": trainable_optimizer_bytes(tr),
    }


def _optimizer_groups(m: ModelConfig, tr: Any) -> dict[str, Any]:
    """The optimizer's parameter groups over the whole model: state bytes per parameter each."""
    from transformer_calc.estimators.training.optimizers import master_bytes, model_groups

    groups = model_groups(m, tr)
    params = sum(g.params for g in groups)
    states = sum(g.state_bytes for g in groups)
    return {
        "optimizer": tr.optimizer.value,
        "master_bytes_per_param": master_bytes(tr),
        "groups": [g.as_dict() for g in groups],
        "state_bytes": states,
        "state_bytes_per_param": states / params if params else None,
        "paged": tr.optimizer.value == "paged-adamw-8bit",
    }


def _finetune_section(m: ModelConfig, tr: Any, trainable: Any) -> dict[str, Any]:
    total = count_params(m).total
    return {
        "method": tr.finetune.value,
        "lora_rank": tr.lora_rank,
        "lora_alpha": tr.lora_alpha,
        "lora_alpha_memory_effect": "none (alpha/r scales the adapter output; no tensor changes size)",
        "lora_targets": [t.value for t in tr.lora_targets],
        "adapted_modules": trainable.adapted_modules,
        "trainable_params": trainable.total,
        "adapter_params": trainable.adapters,
        "trainable_embedding_params": trainable.embedding,
        "trainable_head_params": trainable.head,
        "trainable_fraction": trainable.total / total,
        "frozen_params": total,
        "frozen_weight_format": "nf4 (double quantization)" if tr.finetune.value == "qlora" else (
            f"checkpoint ({8 * tr.frozen_weights[0] / tr.frozen_weights[1]:.4g} bits per parameter)"
            if tr.frozen_weights is not None else f"{tr.p}-byte"),
    }


GPUS_PER_NODE = 8  # an HGX/DGX node: host memory per node is per-GPU offload x min(8, GPUs)


def _offload_section(tr: Any, par: Any, st: Any, peak: int) -> dict[str, Any]:
    node = min(GPUS_PER_NODE, par.gpus)
    per_gpu = st.offloaded
    nvme = tr.offload_device.value == "nvme"
    return {
        "what": tr.offload.value,
        "device": tr.offload_device.value,
        "gpu_bytes": peak,
        "host_weights_bytes": st.host_weights,
        "host_gradients_bytes": st.host_gradients,
        "host_optimizer_bytes": st.host_optimizer,
        "host_bytes_per_gpu": 0 if nvme else per_gpu,
        "nvme_bytes_per_gpu": per_gpu if nvme else 0,
        "gpus_per_node": node,
        "host_bytes_per_node": 0 if nvme else per_gpu * node,
        "nvme_bytes_per_node": per_gpu * node if nvme else 0,
    }


class MemoryResult(Result):
    model: dict[str, Any]
    workload: dict[str, Any]
    training: dict[str, Any]
    parallelism: dict[str, Any]
    params: dict[str, int]
    memory: dict[str, Any]
    b_min: float
    finetune: dict[str, Any] | None = None
    offload: dict[str, Any] | None = None
    gpu: dict[str, Any] | None = None
    fits: bool | None = None
    fit: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
