"""How one replica lays a model over its GPUs for inference, whatever the model's blocks: the routed experts
over ep GPUs and T-way tensor parallelism (`expert_layout`), the redundant expert slots (`expert_slots`), and
the weights' stored form on one rank (`weight_store`: a quantized format's or a checkpoint's bytes).
"""

from __future__ import annotations

from transformer_calc.estimators.inference.quant import FORMATS, quantized_weights, stored_shard
from transformer_calc.estimators.inference.rank_parts import QuantizedWeights
from transformer_calc.estimators.inference.spec import CHECKPOINT, InferenceSpec
from transformer_calc.model.config import ModelConfig


def expert_layout(m: ModelConfig, T: int, ep: int) -> tuple[int, int]:
    """The replica's GPUs and each routed expert's tensor-parallel width under inference expert
    parallelism: (gpus, etp).

    ep divides T: the experts are spread over the T-way tensor-parallel group (vLLM's
    `--enable-expert-parallel`, where EP = TP), n_experts/ep per GPU, each split T/ep ways: the
    replica is T GPUs. T divides ep: attention is data-parallel over ep/T groups of T GPUs
    ("DP attention", SGLang/DeepSeek deployments), each GPU holds n_experts/ep whole experts: the
    replica is ep GPUs, and B counts the sequences of one attention group. Other pairs cannot be
    laid out.
    """
    if ep > 1 and not m.is_moe:
        raise ValueError(f"expert parallelism ep ({ep}) needs a mixture-of-experts model; use ep 1")
    if T % ep and ep % T:
        raise ValueError(
            f"the expert-parallel size ep ({ep}) and T ({T}) must divide one another; "
            f"use an ep that divides {T} or a multiple of it"
        )
    return max(T, ep), max(T // ep, 1)


def expert_slots(m: ModelConfig, spec: InferenceSpec) -> ModelConfig:
    """The model as the GPUs hold it with `redundant_experts` r: n_experts + r expert slots, the
    extra ones copies of the busiest experts (DeepSeek's EPLB, SGLang `--ep-num-redundant-experts`;
    DeepSeek-V3 report sec. 3.4: 32 redundant experts in its decode deployment), so ep must divide
    n_experts + r (SGLang's EP72 and EP48 of 256 + 32). Each GPU holds and reads (n_experts + r)/ep
    experts; a token still uses k of them, so the FLOPs and all-to-alls are unchanged. The router is
    counted with n_experts + r outputs: D·r parameters per MoE layer over the model's (DeepSeek-V3 at
    r = 32: 13 M of 671 B), stated, not removed. r = 0: the model itself."""
    r = spec.redundant_experts
    if not r:
        return m
    if not m.is_moe:
        raise ValueError(f"redundant_experts ({r}) needs a mixture-of-experts model; use 0")
    slots = m.n_experts + r
    if slots % spec.expert_parallel:
        raise ValueError(f"n_experts + redundant_experts ({m.n_experts} + {r} = {slots}) must be divisible by the "
                         f"expert-parallel size ep ({spec.expert_parallel}); use an ep that divides {slots}")
    return m.model_copy(update={"n_experts": slots})


def weight_store(m: ModelConfig, spec: InferenceSpec, etp: int) -> QuantizedWeights | None:
    """The rank's weights in a quantized format or as a checkpoint stores them (None: a plain dtype)."""
    if spec.weight_dtype == CHECKPOINT and spec.stored is not None:
        return stored_shard(m, spec.stored, spec.tensor_parallel, spec.expert_parallel, etp)
    if spec.weight_dtype in FORMATS:
        return quantized_weights(m, spec.weight_dtype, spec.tensor_parallel, spec.expert_parallel)
    return None
