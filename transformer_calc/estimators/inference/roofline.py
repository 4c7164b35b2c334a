"""Inference cost per GPU: KV cache, memory, and prefill/decode time as a roofline.

Source: seed notes 003, Part "Inference" (§ "The Bare Minimum and the kv-Cache", "Basic Memory,
FLOPs, and Latency", "Case Study: Falcon-40B") and App. "Compute-bound vs Memory-bound";
kipply 2022, "Transformer Inference Arithmetic"; Pope et al. 2022 (prefill and decode). The seed's
slips are corrected as listed in docs/seed-errata.md, rows INF-*, FAL-* and ROOF-*.

Conventions (the ones published calculators disagree on):

- B sequences run together, each with an S-token prompt, generating N_new tokens. The prefill
  processes the S prompt tokens and yields the first new token; then N_new - 1 decode steps yield
  the rest. Decode step j (j = 1 .. N_new-1) feeds token j, at position S + j, so it attends over
  a context of c = S + j tokens. The cache peaks at S + N_new - 1 tokens.
- FLOPs: 2 per multiply-accumulate of every weight matrix, for every processed token: Q, K, V, O,
  the MLP (the top-k experts of a MoE), the router, the LM head, OPT's embedding projections. Not
  counted: norms, biases, activation functions, softmax, the embedding lookup (a gather, not a
  matmul). The LM head runs on every prompt token, as in the seed's 2·B·S·N and a plain forward;
  engines that project only the last prompt position do 2·B·(S-1)·V·D less in the prefill.
- Attention: QK^T and softmax·V cost 2·2·A·h_d·c FLOPs per token per layer at context c. Causal
  attention is counted exactly: a prompt of S tokens costs the sum over i = 1..S of that at c = i,
  i.e. 2·A·h_d·S·(S+1) per sequence and layer (FlashAttention-style kernels skip masked blocks).
- Bytes moved per step: every resident weight read once, except the tables a step only gathers
  rows from (an untied token embedding, learned positions); a MoE reads only the experts its
  tokens touch. Plus the K/V cache read and the new K/V written. Activations are assumed to stay
  on chip (fused kernels) and are not counted.
- Time of a step: max(FLOPs / peak, bytes / bandwidth), the roofline; compute and memory traffic
  overlap (seed App. "Compute-bound vs Memory-bound"). Tensor-parallel communication is added on
  top (not overlapped).
- Per GPU under T-way tensor parallelism (Megatron-LM, as `params.tensor_parallel_params`): query
  heads, MLP width and vocabulary split T ways; K/V heads split when T divides n_kv, replicated
  when n_kv divides T (each GPU then holds one K/V head and caches it). Other T are refused.
- Bytes per element: the dtype's bits / 8 (int4 packs two values per byte). A weight total is
  rounded up to whole bytes once; a plain dtype (int4, int8, fp8) takes every parameter at that
  dtype, without scales. The quantized formats (`quant.FORMATS`: gptq-int4, awq-int4, q8_0,
  q4_k_m, q5_k_m, mxfp4, nvfp4) count their codes, group scales and zero points exactly and leave
  the tensors they do not quantize at 16 (GGUF: 32) bits; see quant.py. A model's
  `weight_format` (gpt-oss: mxfp4) is its default weight dtype.
- Memory is per GPU, in exact bytes, compared with the GPU's `memory_bytes` (the hardware
  table's capacity, decimal GB as marketed).
- Hybrid models (estimators/mixers/: Gated DeltaNet layers beside attention): a mixer layer keeps a
  decode state constant in the context instead of a KV cache (`decode_state`): its conv state at
  the activation dtype and its recurrent state at `state_dtype` (default fp32, as transformers'
  cache holds it). A decode step reads and writes the state of every sequence (counted with the
  cache's reads and writes), a prompt writes it once; the mixing FLOPs (conv, state, chunked
  delta rule) are counted with the attention FLOPs: the recurrent form for one token, the chunked
  form for a prompt. Memory, the largest B and S, and the serving capacity count the state per
  sequence beside the KV cache.
- DeepSeek-V4 (T = 1, its routed experts over ep GPUs; docs/formulas.md §5.16 "Inference and serving"):
  its decode state is its KV
  cache, the sliding window of every layer (`KVGroup`s) and the compressed entries, open windows and
  overlap of its CSA and HCA layers (`CompressedGroup`), equal to transformers' cache tensors. A CSA query
  attends the k_I entries its indexer picks; the indexer scores all. floor(c/m) and c mod m step with the
  context, so `decode_sum` sums the contexts of each residue modulo lcm(m, m') apart, each in closed form.

All byte and FLOP counts are exact ints; seconds and ratios are floats.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.devices.hardware import COLLECTIVE_LATENCY_S, GPU  # noqa: F401  (re-exported)
from transformer_calc.estimators.inference.decode import (  # noqa: F401  (re-exported)
    Decode,
    MAX_STATE_PERIOD,
    Poly,
    compute_bound_batch,
    decode,
    decode_sum,
    state_period,
    weights_only_compute_bound_batch,
)
from transformer_calc.estimators.inference.memory import (  # noqa: F401  (re-exported)
    DecodeState,
    InferenceMemory,
    KVCache,
    TOWER_BITS,
    decode_state,
    inference_memory,
    kv_bytes,
    kv_cache,
    memory_terms,
    min_tensor_parallel,
    paged_compressed_elements,
    state_bytes,
    tower_bytes,
    weight_split,
    weights_read_bytes,
)
from transformer_calc.estimators.inference.shard import (  # noqa: F401  (re-exported)
    CompressedGroup,
    KVGroup,
    Shard,
    StateGroup,
    expert_layout,
    expert_slots,
    matmul_params,
    mixer_state_groups,
    rank_shard,
)
from transformer_calc.estimators.inference.spec import (  # noqa: F401  (re-exported)
    ALL_REDUCES_PER_LAYER,
    CHECKPOINT,
    COMPUTE,
    DTYPE_BITS,
    InferenceSpec,
    KV_DTYPE_BITS,
    KV_TENSORS,
    MAX_CONTEXT_SEARCH,
    MAX_TENSOR_PARALLEL,
    MEMORY,
    MIXED,
    MLA_CACHE_KINDS,
    STATE_DTYPE,
    check_positive_int,
    checked_dtype,
    dtype_bytes,
    storage_bytes,
)
from transformer_calc.estimators.inference.step import (  # noqa: F401  (re-exported)
    Communication,
    Roofline,
    Step,
    decode_step,
    decode_step_exact,
    prefill_step,
    roofline,
    roofline_step,
    tower_prefill,
    tp_communication,
    with_images,
)
from transformer_calc.model.config import ModelConfig
from transformer_calc.model.units import BITS_PER_BYTE  # noqa: F401  (re-exported)

# The roofline's parts live beside it: the input (spec.py), one rank's shard (shard.py), what it holds
# in memory (memory.py), one step (step.py) and the decode's closed-form sum (decode.py). Their names
# are re-exported here, the public import path.
_weights_read_bytes = weights_read_bytes  # its old name, which tests and docs/formulas.md read


# ============================================================================ everything
@dataclass(frozen=True)
class InferenceEstimate:
    """`tcalc inference`: one generation of N_new tokens for B prompts of S tokens on T GPUs."""

    spec: InferenceSpec
    gpu_name: str
    matmul_params_per_gpu: int
    kv_cache: KVCache  # at the peak context, S + N_new - 1
    memory: InferenceMemory  # per GPU
    prefill: Step
    decode: Decode
    time_to_first_token_s: float  # the prefill
    total_s: float  # prefill + every decode step
    tokens_per_s: float  # B · N_new / total_s
    compute_bound_batch: int | None  # exact, at the last decode step's context
    compute_bound_batch_weights_only: float  # the seed's lambda_math · p / 2 form


def estimate_inference(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> InferenceEstimate:
    """Every inference estimate for one model, GPU and spec."""
    prefill = prefill_step(m, gpu, spec)
    dec = decode(m, gpu, spec)
    total = prefill.seconds + dec.seconds
    return InferenceEstimate(
        spec=spec,
        gpu_name=gpu.name,
        matmul_params_per_gpu=matmul_params(m, spec.tensor_parallel),
        kv_cache=kv_cache(m, spec),
        memory=inference_memory(m, gpu, spec),
        prefill=prefill,
        decode=dec,
        time_to_first_token_s=prefill.seconds,
        total_s=total,
        tokens_per_s=spec.batch_size * spec.new_tokens / total,
        compute_bound_batch=compute_bound_batch(m, gpu, spec),
        compute_bound_batch_weights_only=weights_only_compute_bound_batch(m, gpu, spec),
    )
