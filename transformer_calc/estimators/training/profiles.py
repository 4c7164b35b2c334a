"""Framework time profiles (issue 24): what a training stack's kernels move through HBM, what it
overlaps, and how close its GEMMs come to the measured matmul ceiling.

`estimate_step` (train.py) prices a step from these pieces. Three profiles exist:

- `megatron` (Megatron-core with Transformer Engine) and `pytorch`/`deepspeed`: fused elementwise
  kernels (one read and one write per tensor: a norm reads and writes D, SwiGLU reads 2F and writes
  F), RoPE fused into the attention input pass (not counted), the data-parallel and tensor-parallel
  overlaps of train.py. These are tcalc's counts since issue 17, unchanged here.
- `torchtitan` (pytorch/torchtitan, FSDP2 + torch.compile + Float8 + async TP): this module.

The torchtitan profile
----------------------
* Elementwise traffic, eager (`compile: false`, torchtitan's default) as its Llama code runs it
  (torchtitan/models/norms.py `RMSNorm`, torchtitan/models/llama/model.py `apply_rotary_emb` and
  `FeedForward`, at 9dec370ad26b5f8e9a7333a0e36165018262644b, the commit of the December 2024
  benchmarks), each op one kernel that reads its inputs and writes its output, per element of
  p-byte activations (fp32 intermediates 4 bytes):

    RMSNorm   x.float() (p + 4), x.pow(2) (4 + 4), .mean(-1) (4), x * rsqrt(...) (4 + 4),
              .type_as(x) (4 + p), * weight (p + p)                         = 4p + 28 per D element
    RoPE      xq.float() (p + 4), complex multiply by freqs_cis (4 + 4),
              .type_as(xq) (4 + p)                                          = 2p + 16 per q/k element
    SwiGLU    F.silu(w1(x)) (p + p), * w3(x) (2p + p)                       = 5p per F element
    residual  h = x + attn(...) (2p + p)                                    = 3p per D element

  With `compile: true` Inductor fuses each chain into one kernel that reads the inputs and writes
  the output once: RMSNorm 2p, RoPE 2p, SwiGLU 3p, residual 3p (a LayerNorm model runs
  nn.LayerNorm, one kernel: 2p either way). The backward moves twice the forward's bytes and a
  full recompute one forward more (tcalc's convention for the memory-bound terms, train.py).
* FSDP2 (`zero: 3`, torch/distributed/fsdp/_fully_shard, torchtitan parallelize_llama.apply_fsdp
  with MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)): one FSDP unit per
  transformer block. Each block's bf16 parameters are all-gathered before its forward and again
  before its backward (reshard_after_forward), the gradients reduce-scattered in fp32 after its
  backward. The next block's all-gather is prefetched on a separate stream while this block
  computes (implicit forward prefetch; backward prefetch of one unit), so per block only what the
  collective takes beyond the block's compute is exposed, plus the first all-gather of the
  forward and of the backward and the last reduce-scatter, which have nothing to hide behind.
  The `pytorch` profile's ZeRO-3 (PyTorch FSDP: FSDP1 FULL_SHARD or FSDP2, one unit per block) is
  priced by the same function: PyTorch's FSDP notes ("FSDP Prefetch Nuances",
  docs.pytorch.org/docs/stable/notes/fsdp.html) state that the all-gathers run on their own stream
  and overlap the compute issued before them (implicit forward prefetching, always enabled; the
  first all-gather overlaps nothing), and backward prefetching issues the next unit's all-gather
  around the current unit's gradient computation (FSDP1 BackwardPrefetch).
  With pipeline parallelism torchtitan keeps the parameters unsharded between micro-batches
  (reshard_after_forward false when PP is on) and reduces the gradients once, after the last
  micro-batch's backward: one all-gather and one reduce-scatter per step.
* Async TP (`--tp-comm-overlap`, torchtitan `parallelism.enable_async_tensor_parallel`,
  torch._inductor micro-pipeline TP over symmetric memory): the all-gather / reduce-scatter of each
  TP region decomposed into T chunks, each chunk's GEMM running while the next travels, as
  Transformer Engine's userbuffers do; train.py prices both alike. Off by default, as torchtitan's.
* GEMM efficiency: TORCHTITAN_GEMM_FRACTION of the measured MAMF (train.MATMUL_EFFICIENCY), fitted
  (below); the attention core on Hopper at FlashAttention-2's measured rates (SDPA_FLASH_FLOPS_S).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import ModelConfig, Training

FP32_BYTES = 4
# The torchtitan profile's GEMMs (cuBLAS through torch.mm, torchao's Float8 scaled_mm) reach this
# fraction of the measured MAMF. FITTED: 0.825 gives a median error of 0 on the three rows of the
# only source it is fitted on whose recomputation tcalc expresses exactly: torchtitan's 64 x A100
# 80GB table (pytorch/torchtitan docs/performance.md @041336434916bdc0f88c1f89fda176fd3c2092e4:
# Llama 2 13B without AC, Llama 3 70B and Llama 2 70B with full AC; tools/validation/train_runs.yaml
# rows with `fit: true`). Validated on that table's selective-AC rows, on torchtitan's December 2024
# H100 benchmark (benchmarks/llama3_h100_202412_torchtitan.md: 500 W power-limited HBM2e H100s,
# priced at the cap's sustained clock, step.POWER_CAP_CLOCK_EXPONENT; still overpredicted) and on Trainy's H200 runs (benchmarks/llama3_8b_h200_2025-06_torchtitan.md):
# docs/validation.md "Training step time".
TORCHTITAN_GEMM_FRACTION = 0.825


# The attention core of the torchtitan profile runs in PyTorch's SDPA flash backend (FlashAttention-2
# kernels), slower on Hopper than its GEMMs. Measured on H100 SXM5, head dim 128, sequence 8k, FA's
# own FLOP count (forward 4·S²·d per head, halved when causal; backward 2.5x the forward): causal
# forward 333 TFLOP/s, backward 318 TFLOP/s (Shah et al. 2024, FlashAttention-3, arXiv:2407.08608,
# Figures 5 and 6, the FlashAttention-2 bars). H200 and GH200 have the H100's SMs and clocks: the
# same rates assumed. Other GPUs: the attention core at the GEMM efficiency (FlashAttention-2 reaches
# 50-73 % of the A100's peak, Dao 2023, arXiv:2307.08691: about the A100's GEMM efficiency).
SDPA_FLASH_FLOPS_S = {"H100": (333e12, 318e12), "H800": (333e12, 318e12), "H200": (333e12, 318e12), "GH200": (333e12, 318e12)}
FLASH_BACKWARD_PER_FORWARD = 2.5  # FA's backward FLOP count: 5 matmuls to the forward's 2


@dataclass(frozen=True)
class ElementwiseBytes:
    """HBM bytes one forward moves per element of each memory-bound op (module docstring)."""

    norm: float  # per D element of each norm
    rope: float  # per q and k element
    glu: float  # per F element of the MLP activation (and the gate product)
    residual: float  # per D element of each residual add

    def per_token_layer(self, m: ModelConfig, T: int) -> float:
        """Bytes per token and block on one of T tensor-parallel ranks (forward)."""
        D, F = m.d_model, (m.moe_d_ff if m.is_moe else m.d_ff)
        k = m.experts_per_token if m.is_moe else 1
        qk = (m.n_heads + m.n_kv_heads) * m.head_dim if m.positional.value == "rotary" else 0
        residual_adds = 2  # after attention, after the MLP
        return (m.norms_per_layer * self.norm * D + residual_adds * self.residual * D + self.rope * qk
                + k * self.glu * F) / T


def fused_bytes(m: ModelConfig, p: int) -> ElementwiseBytes:
    """One read and one write per tensor: tcalc's count for the fused-kernel profiles (RoPE inside
    the attention kernel's input pass, not counted)."""
    n_in = 2 if m.gated_mlp else 1
    return ElementwiseBytes(norm=2 * p, rope=0, glu=(n_in + 1) * p, residual=3 * p)


def torchtitan_bytes(m: ModelConfig, p: int, compiled: bool) -> ElementwiseBytes:
    """torchtitan's Llama kernels, eager or under torch.compile (module docstring for each term)."""
    rms = m.norm.value == "rmsnorm"
    if compiled:
        n_in = 2 if m.gated_mlp else 1
        return ElementwiseBytes(norm=2 * p, rope=2 * p, glu=(n_in + 1) * p, residual=3 * p)
    return ElementwiseBytes(
        norm=(4 * p + 28) if rms else 2 * p,  # eager RMSNorm: six kernels through fp32; nn.LayerNorm: one
        rope=2 * p + 2 * FP32_BYTES * 2,  # .float(), the complex multiply, .type_as()
        glu=5 * p if m.gated_mlp else 2 * p,  # silu, then the gate product; an ungated MLP: the activation
        residual=3 * p,
    )


def elementwise_bytes(m: ModelConfig, tr: Training) -> ElementwiseBytes:
    """The profile's elementwise traffic for this training setup."""
    if tr.framework.value == "torchtitan":
        return torchtitan_bytes(m, tr.p, tr.compile)
    return fused_bytes(m, tr.p)


@dataclass(frozen=True)
class FSDPTraffic:
    """FSDP2's data-parallel collectives of one step on one GPU (seconds)."""

    total_s: float  # every all-gather and reduce-scatter
    exposed_s: float  # what the blocks' compute does not hide


def fsdp2_step(
    *, all_gather_block_s: float, reduce_scatter_block_s: float, all_gather_root_s: float,
    reduce_scatter_root_s: float, forward_block_s: float, backward_block_s: float, blocks: int,
    micro_batches: int, pipelined: bool,
) -> FSDPTraffic:
    """FSDP2's exposed communication (module docstring): per block only the excess of its
    collectives over its compute; the first all-gather of each pass and the last reduce-scatter
    in full. The root unit (embedding, final norm, head) is gathered first and reduced last.

    `pipelined` (PP > 1): parameters gathered once per step, gradients reduced once per step
    (torchtitan: reshard_after_forward false under PP; gradient sync on the last micro-batch).
    Otherwise every micro-batch gathers twice (forward, backward) and reduces once."""
    L = max(blocks, 1)
    ag, rs = all_gather_block_s, reduce_scatter_block_s
    fwd_exposed = all_gather_root_s + ag + (L - 1) * max(0.0, ag - forward_block_s)
    # backward with the gradients reduced: the comm stream carries the next block's all-gather and
    # the previous block's reduce-scatter while one block's backward runs
    bwd_both_exposed = ag + (L - 1) * max(0.0, ag + rs - backward_block_s) + rs + reduce_scatter_root_s
    bwd_reduce_only = (L - 1) * max(0.0, rs - backward_block_s) + rs + reduce_scatter_root_s
    gather = all_gather_root_s + L * ag
    reduce = reduce_scatter_root_s + L * rs
    if pipelined:
        return FSDPTraffic(total_s=gather + reduce, exposed_s=fwd_exposed + bwd_reduce_only)
    # the root stays gathered from its forward to its backward (FSDP2 does not reshard the root)
    n = micro_batches
    return FSDPTraffic(total_s=n * (gather + L * ag + reduce), exposed_s=n * (fwd_exposed + bwd_both_exposed))


def attention_core_s(rates: tuple[float, float] | None, core_forward_flops: float, recompute_core: bool) -> float | None:
    """Seconds the torchtitan profile's attention cores take (forward, the recomputed forward, the
    backward) at FlashAttention-2's measured (forward, backward) `rates` (SDPA_FLASH_FLOPS_S of
    the GPU; None where none are tabled: returns None). `core_forward_flops` counts as tcalc does
    (the backward 2x the forward); the backward here runs FA's 2.5x at FA's measured backward rate."""
    if rates is None:
        return None
    forward, backward = rates
    passes = 2 if recompute_core else 1
    return passes * core_forward_flops / forward + FLASH_BACKWARD_PER_FORWARD * core_forward_flops / backward
