"""MoE training time per MoE block and micro-batch: expert-parallel all-to-all, token permutation,
router, the grouped GEMMs' per-expert weight traffic and a fixed cost per local expert (issue 24).

The expert FLOPs (k routed experts per token, the shared experts, the router GEMM) are in the
compute term of train.py (flops.py counts them); this module prices what a MoE block adds to them,
per GPU, for one micro-batch's forward and backward. Megatron-core's token dispatcher
(megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher; DeepEP and HybridEP
move the same bytes) is the model:

- all-to-all: the dispatch sends each of the t tokens a GPU routes to its k experts (t·k·D values,
  16-bit: FP8 dispatch is not assumed), the combine brings them back; forward and backward: 4
  all-to-alls (6 with full recomputation). Of the ep ranks of the expert-parallel group (stride
  etp: Megatron-core orders expert ranks tensor-expert-data, so the group spans etp·ep GPUs),
  those inside one NVLink domain exchange over NVLink, the rest over the per-GPU NIC, both at
  once: time = max(bytes to domain peers / NVLink, bytes to other domains / NIC) + one latency
  (Megatron-core's hierarchical dispatch; the share of a rank's own tokens stays local).
  Not overlapped with compute by default (Megatron-core's default); with
  `--overlap-moe-expert-parallel-comm` (Megatron-Bridge's `moe_a2a_overlap`, tcalc
  `--moe-a2a-overlap`) each micro-batch's all-to-all runs under another micro-batch's compute, and
  train.py keeps only what exceeds one block's compute exposed.
- how the tokens travel, when given (`Dispatch`; DeepSeek-V3 arXiv:2412.19437 §2.1.2, §3.2.2,
  §3.3.2, and DeepEP's normal kernels): the dispatch's hidden states in FP8 with one fp32 scale
  per 128 channels (forward dispatch and its backward twin; both combines stay 16-bit), and
  node-limited routing: a token reaches at most M nodes and crosses the NIC once per remote node
  it reaches (min(M, G)·(G − 1)/G of the G nodes the expert-parallel group spans, its own node
  aside), its k copies forwarded inside each node over NVLink ((k·(n − 1)/n of them, n GPUs of the
  group per node). Not given: every copy travels on its own in 16 bits, as above.
- the load imbalance f (>= 1): the busiest rank receives f times the mean tokens; its all-to-all
  bytes and its experts' FLOPs scale by f (the step waits for it). Default 1.0: balanced, as the
  published Megatron-Bridge benchmarks force-balance the routing ("we force-balance the token
  distribution among experts"); a router trained with an auxiliary loss is not balanced and a
  run's own f should be given.
- token permutation (moe_utils.permute / unpermute): gathering the t tokens into expert order
  reads t·D and writes t·k·D values, unpermuting reads t·k·D and writes t·D; forward and backward
  (the gradients move the same way): 4·(1 + k)·t·D values of p bytes, HBM-bound.
- the router: the softmax (or sigmoid) and top-k over t·n_e fp32 logits read and written once
  forward, twice backward: 3·2·4·t·n_e bytes.
- the grouped GEMMs at small per-expert batches: each local expert's weights are read by its
  fprop and dgrad GEMMs and its fp32 main gradient read-modified-written by wgrad
  (gradient-accumulation fusion) once per micro-batch, however few tokens it got: (2p + 8) bytes
  per local expert weight. At large per-expert batches this is small beside the FLOPs; at the
  per-expert batches of fine-grained MoE (hundreds of tokens) it is not.
- a fixed cost per MoE block and micro-batch (forward + backward) for each local expert,
  MOE_EXPERT_OVERHEAD_S (+ MOE_BLOCK_OVERHEAD_S per block): Transformer Engine's GroupedLinear
  runs one GEMM per local expert (transformer_engine/pytorch/module/grouped_linear.py: per-GEMM
  quantizers, splits and cuBLAS calls, forward and backward), and the dropless dispatcher first
  synchronises the host on the token counts per expert (a device-to-host copy sizes the
  all-to-all), so the host's per-expert work is not hidden behind earlier kernels. A GPU-side
  reading (per-expert GEMMs too small to fill the GPU) would scale with the tokens, which the
  published runs do not show: the time a block adds beyond tcalc's other terms is about the same
  at 4k and 32k tokens per micro-batch and grows with the local experts. FITTED (see the constants).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import ModelConfig, Parallelism, Recompute, Training

ALL_TO_ALLS = 4  # dispatch + combine, forward and backward
FP32_BYTES = 4
MAIN_GRAD_BYTES = 2 * FP32_BYTES  # wgrad accumulates into the fp32 main gradient: read + write
DEFAULT_LOAD_IMBALANCE = 1.0  # balanced routing, as the Megatron-Bridge benchmarks force it
# FITTED: seconds per MoE block and micro-batch (forward + backward), per block and per local expert
# (module docstring). (0, 0.4 ms) minimise the median |error| (10.8 %; median error +6.0 %) over a
# grid (per block 0-6 ms by 0.25 ms, per expert 0-0.75 ms by 0.05 ms) on the one source they are
# fitted on, the Megatron-Bridge 25.11 performance summary's 17 MoE rows
# (tools/validation/train_runs.yaml ids mbridge2511-*); validated on the 26.02 rows (ids mbridge-*:
# median |error| 13.4 % on its 19 MoE rows). A per-block constant alone fits worse (best 5 ms:
# median |error| 17.4 % on the same 17 rows).
MOE_BLOCK_OVERHEAD_S = 0.0
# An FP8 dispatch carries one fp32 scale per 128 channels of each token (DeepSeek-V3 §3.3.1: 1x128
# activation tiles; DeepEP's FP8 dispatch; the inference side's DISPATCH_SCALE_* in inference/expected.py).
FP8_SCALE_CHANNELS = 128
FP8_SCALE_BYTES = FP32_BYTES
MOE_EXPERT_OVERHEAD_S = 0.4e-3


@dataclass(frozen=True)
class Dispatch:
    """How the tokens of the all-to-all travel (module docstring); the defaults are Megatron-core's."""

    dtype: str | None = None  # the dispatch's hidden-state dtype: fp8 | bf16 | fp16; None: 16-bit, as the combine
    max_nodes: int | None = None  # node-limited routing: a token reaches at most M nodes (DeepSeek-V3: M = 4)

    def value_bytes(self, combine_bytes: float) -> float:
        """Bytes per dispatched value: FP8 carries one fp32 scale per 128 channels."""
        if self.dtype == "fp8":
            return 1 + FP8_SCALE_BYTES / FP8_SCALE_CHANNELS
        return 2 if self.dtype in ("bf16", "fp16") else combine_bytes


def node_limited_all_to_all_s(tokens: float, k: int, copy_bytes: float, ep: int, etp: int, net,
                              max_nodes: int | None) -> float:
    """One all-to-all of `tokens` tokens, each sent to k experts as a copy of `copy_bytes` (D values):
    without a node limit, `all_to_all_s` of all k copies; with one, a NIC transfer per remote node
    reached and the copies forwarded over NVLink (module docstring)."""
    if max_nodes is None:
        return all_to_all_s(tokens * k * copy_bytes, ep, etp, net)
    if ep <= 1:
        return 0.0
    in_domain = max(1, min(ep, net.node_size // max(etp, 1)))
    nodes = ep / in_domain
    inter = tokens * copy_bytes * min(max_nodes, nodes) * (nodes - 1) / nodes
    intra = tokens * k * copy_bytes * (in_domain - 1) / in_domain
    t = max(intra / net.intra_bytes_s, inter / net.inter_bytes_s if inter else 0.0)
    return t + (net.inter_latency_s if inter else net.intra_latency_s)


@dataclass(frozen=True)
class MoEBlockTime:
    """One MoE block's added seconds for one micro-batch (forward + backward) on one GPU."""

    all_to_all: float
    permutation: float  # token permute/unpermute, router: HBM-bound
    expert_weights: float  # the local experts' weight and main-gradient traffic
    fixed: float  # block_fixed_s: per block and per local expert

    @property
    def overhead(self) -> float:
        return self.permutation + self.expert_weights + self.fixed


def all_to_all_s(size: float, ep: int, etp: int, net) -> float:
    """One all-to-all of `size` bytes per GPU over ep ranks (stride etp), split between the NVLink
    domain and the NIC (module docstring). 0 when ep = 1."""
    if ep <= 1:
        return 0.0
    in_domain = max(1, min(ep, net.node_size // max(etp, 1)))  # the group's ranks sharing one domain
    intra = size * (in_domain - 1) / ep
    inter = size * (ep - in_domain) / ep
    t = max(intra / net.intra_bytes_s, inter / net.inter_bytes_s if inter else 0.0)
    return t + (net.inter_latency_s if inter else net.intra_latency_s)


def moe_block_time(
    m: ModelConfig, tr: Training, par: Parallelism, net, *, tokens: float, hbm_bytes_s: float,
    load_imbalance: float = DEFAULT_LOAD_IMBALANCE, fixed_s: float | None = None, dispatch: Dispatch | None = None,
) -> MoEBlockTime:
    """What one MoE block adds for one micro-batch of `tokens` tokens per GPU (b·S/CP; with SP a
    1/T share of them enters the dispatcher on each tensor rank)."""
    if load_imbalance < 1:
        raise ValueError(f"moe_load_imbalance ({load_imbalance}) is the busiest rank's tokens over the mean: "
                         "give a number >= 1 (1: balanced)")
    D, k, p = m.expert_d, m.experts_per_token, tr.p  # what travels and is permuted: ℓ-wide under a latent MoE
    ep, etp, T = par.expert, par.expert_tensor_size, par.tensor
    t = tokens / T if par.sequence_parallel and T > 1 else tokens  # tokens entering this rank's router
    comm = max(p, 2)  # tokens travel in 16 bits
    n_a2a = ALL_TO_ALLS + (2 if tr.recompute is Recompute.full else 0)
    if dispatch is None or dispatch == Dispatch():
        a2a = n_a2a * all_to_all_s(t * k * D * comm * load_imbalance, ep, etp, net)
    else:  # half the all-to-alls carry the dispatch's dtype (forward dispatch, backward of the combine)
        one = D * load_imbalance
        a2a = n_a2a / 2 * sum(node_limited_all_to_all_s(t, k, one * b, ep, etp, net, dispatch.max_nodes)
                              for b in (dispatch.value_bytes(comm), comm))
    permute = 4 * (1 + k) * t * D * p * load_imbalance
    router = 3 * 2 * FP32_BYTES * t * m.n_experts
    local_experts = m.n_experts // ep
    n_mats = 3 if m.gated_mlp else 2
    weights = local_experts * n_mats * D * m.moe_d_ff / etp
    weight_traffic = weights * (2 * p + MAIN_GRAD_BYTES)
    fixed = block_fixed_s(local_experts) if fixed_s is None else fixed_s
    return MoEBlockTime(all_to_all=a2a, permutation=(permute + router) / hbm_bytes_s,
                        expert_weights=weight_traffic / hbm_bytes_s, fixed=fixed)


def block_fixed_s(local_experts: int) -> float:
    """The fixed cost of one MoE block and micro-batch: MOE_BLOCK_OVERHEAD_S + MOE_EXPERT_OVERHEAD_S
    per local expert (module docstring)."""
    return MOE_BLOCK_OVERHEAD_S + MOE_EXPERT_OVERHEAD_S * local_experts
