"""Expected inference latency: the roofline bound at achievable rates, plus the fixed costs.

`inference.py` gives a true lower bound: every step at the datasheet peak FLOP/s and bandwidth,
nothing else. Measured engines are slower (issue 14: 0.28-0.76 of the bound's speed), for reasons
each counted here as a term of its own, on top of the same FLOPs and bytes:

- achievable rates: matmuls at the maximum achievable matmul FLOPS (MAMF, measured on the
  largest GEMM shapes; `train.MATMUL_EFFICIENCY`, Stas Bekman's ml-engineering table; fp8 compute
  at `FP8_MATMUL_EFFICIENCY` of the fp8 peak, fitted), HBM at
  `train.MEMORY_EFFICIENCY` of the datasheet (large copies reach ~90 %); with a 4- or 6-bit compute
  dtype (NVFP4, MXFP4) attention's FLOPs run at fp8 or the activation dtype (`attention_dtype`;
  the attention kernel classes below, the closed-form decode sum's included).
- one roofline per kernel class, summed: a step is a sequence of kernels that do not overlap one
  another, so its time is the sum over its kernel classes of max(FLOPs_c / rate_c, bytes_c /
  (η_mem·bandwidth)) (`kernel_classes`, `classes_s`), not one max() over the whole step. The
  classes: the linear layers (GEMMs: their FLOPs against the weights they read), the attention of
  the prompt tokens (context attention: its FLOPs against the K/V it writes) and the decode
  attention (generation kernels: its FLOPs against the cache it reads and the token it writes).
  TensorRT-LLM runs context and generation attention as separate kernels (FMHA; masked MHA or
  XQA: nvidia.github.io/TensorRT-LLM/features/attention.html, "Context and Generation Phases").
  The per-operator roofline summed over operators is LLM-Viewer's (Yuan et al. 2024, "LLM
  Inference Unveiled: Survey and Roofline Model Insights", arXiv:2402.16363; github.com/hahnyuan/
  LLM-Viewer model_analyzer.py @01b269d6: each layer's time is OPs / its roofline performance,
  `_analyze_to_results`, and the step's the sum over layers, "compute total"). Where every class is
  memory-bound (a small-batch decode) or compute-bound (a long prefill) it equals the whole step's
  max(); it is slower where they differ: a mixed step's GEMMs compute-bound under a prompt chunk
  while its decode attention reads the cache, a large batch's GEMMs compute-bound while attention
  reads thousands of sequences' caches. Elementwise kernels (norms, activations) are not classes
  of their own (their bytes are not counted; an optimistic side, stated), nor are the activations
  the GEMMs read and write (Llama-3.1-8B: 1.0 µs of H200 HBM per token against 15 µs of fp8 FLOPs;
  they would move a GEMM class's bound only within about 7 % of its ridge).
- kernel launches: a fixed cost per kernel, `KERNELS_PER_LAYER` per layer (more for a routed
  MLP) plus the model's head and tail kernels. With CUDA graphs (vLLM's and TensorRT-LLM's
  default for decode) `KERNEL_S_CUDA_GRAPHS` (fitted; it also carries the engine's per-step work);
  without (PyTorch eager, vLLM `enforce_eager`) the CPU's launch per kernel on top,
  `KERNEL_S_EAGER`. An engine that captures decode-only steps (TensorRT-LLM: "CUDA graphs ... are
  enabled for batches that consist of decoding requests only", TorchLlmArgs.cuda_graph_config;
  its TensorRT engines' CUDA-graph mode likewise covers the generation phase) launches every kernel
  of a step holding prompt tokens from the CPU: `prefill_cuda_graphs` False, such a step at the
  eager per-kernel cost (`prompt_efficiency`; a decode step holding a prompt in a fraction of the
  steps pays that fraction of the difference).
- collectives: the tensor-parallel all-reduces (2 per layer) on the network model that
  `tcalc train` uses (`train.Network`: NVLink inside a node, the NIC across nodes), each the faster
  of a ring (2(T-1)/T·size/bw + 2(T-1)·α; NCCL) and a one-shot all-reduce ((T-1)·size/bw + α;
  the custom all-reduce kernels vLLM and TensorRT-LLM use for small messages); plus the LM head's
  logit all-gather of the sampled positions (vocabulary-parallel head).
- wide expert parallelism (ep > T, DP attention): each MoE layer's dispatch and combine
  all-to-alls (`expert_all_to_all_s`); the dispatch may carry fp8 hidden states with one fp32
  scale per 128 channels (`dispatch_dtype`; DeepEP's low-latency dispatch), the combine returns
  them in the activation dtype. With `moe_a2a_overlap` (SGLang `--enable-two-batch-overlap`,
  DeepSeek's dual micro-batch overlap: the batch split in two, one half's all-to-alls run while
  the other computes) only the all-to-all time beyond the step's roofline is exposed,
  max(0, t_a2a − t_roof), as `tcalc train --moe-a2a-overlap` costs it; the smaller micro-batches'
  lower efficiency is not modelled (an optimistic side, stated).
- sampling: one pass writing and `LOGIT_PASSES - 1` reading the fp32 logits of the sampled
  positions (softmax, top-k/top-p), and `SAMPLER_KERNELS` kernels; and the engine's fixed work per
  sequence per step, `SEQUENCE_S` (fitted).
- the request's fixed cost outside the GPU (tokenize, schedule, detokenize), `request_s`, added
  once to the time to first token (default 0; engines.py says why).

Conventions: the FLOPs and bytes are the bound's (the LM head on every prompt token; engines that
project only the last position do 2·B·(S-1)·V·D/T FLOPs less in the prefill, so the expected
prefill of a small-model, large-vocabulary run is pessimistic by up to that). Every added term is
>= 0 and every rate <= the datasheet's, so expected >= bound, step by step (a property test).

Sources of the constants are at each one. Three are FITTED to published serving measurements and
checked on the others (docs/validation.md, "Inference serving"): the per-kernel cost with CUDA
graphs (8.29 µs: it absorbs what launches, small-kernel ramps and the engine's per-step work add), the
fp8 matmul efficiency (0.507) and the cost per sequence per step (0: its fit's minimum, once each kernel
class has its own roofline; it was 10.9 µs with one roofline per step, standing in for the decode
attention that the compute-bound GEMMs of a large batch hid).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

from transformer_calc.model.config import ModelConfig
from transformer_calc.devices.hardware import GPU, peak_flops, power_cap_clock_scale
from transformer_calc.estimators.inference.roofline import (
    ALL_REDUCES_PER_LAYER,
    BITS_PER_BYTE,
    DTYPE_BITS,
    InferenceSpec,
    Step,
    decode_step_exact,
    rank_shard,
    decode_sum,
    prefill_step,
    roofline,
)
from transformer_calc.estimators.training.train import (
    MATMUL_EFFICIENCY,
    DEFAULT_MATMUL_EFFICIENCY,
    MEMORY_EFFICIENCY,
    Network,
    lookup_efficiency,
    default_network,
    ring_all_reduce_s,
    ring_gather_s,
)

# Kernels of one dense decoder layer in a fused serving engine (vLLM's Llama): fused residual add
# + RMSNorm, QKV GEMM, rotary embedding, cache write, attention, O GEMM, fused add + RMSNorm,
# gate/up GEMM, SiLU·mul, down GEMM. The all-reduces are collectives, costed on the network.
KERNELS_PER_LAYER = 10
# A routed MLP adds the router GEMM, the top-k softmax, the token permutation (align/sort) and
# the un-permute with the weighted sum (vLLM fused_moe; its two grouped GEMMs replace the dense two).
MOE_EXTRA_KERNELS = 4
MODEL_KERNELS = 3  # the embedding gather, the final norm, the LM head
NARROW_DTYPES = ("fp8", "fp6", "fp4")  # compute dtypes that take FP8_MATMUL_EFFICIENCY (fp4: FP4_MATMUL_EFFICIENCY)
SUB_BYTE_COMPUTE = ("fp6", "fp4")  # compute dtypes of the linear layers only (attention_dtype)
# Wide EP's dispatch dtype (`dispatch_dtype`): an 8-bit dispatch carries one fp32 scale per 128
# channels (DeepEP README, low-latency kernels: "FP8 dispatching and BF16 combining"; DeepGEMM's
# per-token 1x128 activation scaling, DeepSeek-V3 report sec. 3.3).
DISPATCH_DTYPES = ("bf16", "fp16", "fp8")
DISPATCH_SCALE_CHANNELS = 128
DISPATCH_SCALE_BYTES = 4
# Per-kernel fixed cost with CUDA graphs: what a decode step costs beyond its roofline at the
# achievable rates, per kernel (launch and ramp of small kernels, the engine's per-step scheduling
# and sampling spread over them). FITTED: 8.29 µs minimises the squared log error of four published
# decode-dominated runs (tools/validation/serving.yaml ids vllm-llama8b-tp1-h200,
# vllm-llama70b-tp4-h200, vllm-mixtral-tp2-h200, nim-70b-5000-c1-tpot; `serving.py --fit`) and is
# checked on the other rows there (docs/validation.md, "Inference serving"); 8.01 µs before Mixtral's
# B = 8 decode read the 7.20 experts it is expected to touch rather than all 8 (issue 37). Without CUDA graphs the
# CPU launches every kernel: 8 µs more, an ASSUMPTION of the order of PyTorch's per-op dispatch and
# cudaLaunchKernel (not validated). Override with `kernel_s` (`--kernel-launch-s`).
KERNEL_S_CUDA_GRAPHS = 8.29e-6
KERNEL_S_EAGER = 16.29e-6
# Matmuls in fp8 reach a smaller share of their dense peak than bf16's MAMF. FITTED: 0.507 of the fp8
# peak makes the time to first token of nim-70b-5000-c1-ttft (Llama-3.3-70B fp8, TP2 on H100, 5000
# prompt tokens) exact; checked on nim-70b-500-c1-ttft. Used when the compute dtype is fp8 or narrower.
FP8_MATMUL_EFFICIENCY = 0.507
# Matmuls in NVFP4 (4-bit weights and activations, an E4M3 scale per 16 values) reach a smaller share
# of their peak still. MEASURED, not fitted: 3,039 TFLOP/s of B200's 9,000 dense FP4 (0.338) for
# vLLM's CUTLASS NVFP4 GEMM at M = 16,384 on Llama-3.1-8B's N = 6144, K = 4096 QKV shape, the
# runtime quantization of the bf16 activations included (its `nvfp4` column; 3,904 = 0.434 without
# it, `nvfp4-noquant`): github.com/vllm-project/vllm/pull/20646, "Before" table (B200,
# benchmarks/kernels/bench_nvfp4_gemm.py). The same benchmark's fp8 GEMM on B200 reaches 2,585 of
# 4,500 (0.57, vllm-project/vllm/pull/18778, M = 1024), near the fp8 fit above: FP4 doubles the peak,
# not the achieved rate. Engines that fuse the quantization into the preceding kernel (TensorRT-LLM's
# fused norm + quantize) sit between the two columns; the quantized one is the default. Used when the
# compute dtype is fp4; fp6 keeps the fp8 efficiency (no measurement found).
FP4_MATMUL_EFFICIENCY = 0.338
# Per sequence and step: the engine's work for every sequence in a step (scheduling, block tables,
# sampling and stop checks, detokenization). FITTED: SEQUENCE_S minimises the squared log error of
# TensorRT-LLM's maximum throughput of Llama-3.1-8B on H100 (10 rows, ids trtllm-31-8b-h100-*; run at
# the batch limits trtllm-bench derives, engines.trtllm_bench_limits: up to 4096 sequences there),
# checked on every other row. With one roofline per kernel class (`classes_s`) the minimum lies at 0,
# the end of the fit's range [0, 50 µs]: no work per sequence is left to see on these rows (with one
# roofline per step it was 10.9 µs: it stood for the decode attention that a large batch's
# compute-bound GEMMs hid). The term stays (`--sequence-overhead-s`) for engines that show one.
SEQUENCE_S = 0.0
LOGIT_BYTES = 4  # engines upcast the logits to fp32 before sampling (vLLM `logits.float()`)
LOGIT_PASSES = 3  # the LM head writes them; softmax and top-k/top-p sampling read them
SAMPLER_KERNELS = 5  # temperature, softmax, top-k/top-p, sample, gather of the chosen ids


@dataclass(frozen=True)
class Efficiency:
    """Achievable rates and fixed costs of an engine on one GPU type (module docstring)."""

    matmul: float  # η_matmul: achieved / dense peak FLOP/s
    memory: float  # η_mem: achieved / datasheet HBM bandwidth
    cuda_graphs: bool
    kernel_s: float  # fixed cost per kernel
    network: Network
    matmul_fp8: float = FP8_MATMUL_EFFICIENCY  # η_matmul when the compute dtype is fp8 or fp6
    matmul_fp4: float = FP4_MATMUL_EFFICIENCY  # η_matmul when the compute dtype is fp4 (NVFP4, MXFP4)
    sequence_s: float = SEQUENCE_S  # fixed cost per sequence per step
    request_s: float = 0.0  # fixed cost per request outside the GPU, in its TTFT (engines.py)
    moe_a2a_overlap: bool = False  # wide EP: the all-to-alls under the other micro-batch's compute
    dispatch_dtype: str | None = None  # wide EP: the dispatch's hidden-state dtype (None: the activation dtype)
    prefill_cuda_graphs: bool = True  # a step with prompt tokens replays CUDA graphs too (False: TensorRT-LLM)

    def __post_init__(self) -> None:
        if not isinstance(self.prefill_cuda_graphs, bool):
            raise ValueError(f"prefill_cuda_graphs ({self.prefill_cuda_graphs!r}) must be true or false")
        if not isinstance(self.moe_a2a_overlap, bool):
            raise ValueError(f"moe_a2a_overlap ({self.moe_a2a_overlap!r}) must be true or false")
        if self.dispatch_dtype is not None and self.dispatch_dtype not in DISPATCH_DTYPES:
            raise ValueError(f"dispatch_dtype ({str(self.dispatch_dtype)[:40]!r}) must be one of {', '.join(DISPATCH_DTYPES)}")
        for name in ("matmul", "memory", "matmul_fp8", "matmul_fp4"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"{name}_efficiency ({value!r}) must be a fraction in (0, 1]")
        for name in ("kernel_s", "sequence_s", "request_s"):
            k = getattr(self, name)
            if isinstance(k, bool) or not isinstance(k, (int, float)) or not (math.isfinite(k) and k >= 0):
                raise ValueError(f"{name} ({k!r}) must be a finite number of seconds >= 0")


def default_efficiency(
    gpu: GPU,
    *,
    cuda_graphs: bool = True,
    matmul: float | None = None,
    memory: float | None = None,
    kernel_s: float | None = None,
    network: Network | None = None,
    sequence_s: float | None = None,
    request_s: float | None = None,
    moe_a2a_overlap: bool = False,
    dispatch_dtype: str | None = None,
    prefill_cuda_graphs: bool = True,
) -> Efficiency:
    """The defaults for `gpu`: its family's measured MAMF (as `tcalc train`, without the training
    GEMM fraction: inference GEMMs are the forward's), HBM at MEMORY_EFFICIENCY, the kernel cost of
    the CUDA-graphs choice, and `tcalc train`'s network for the platform."""
    return Efficiency(
        matmul=lookup_efficiency(MATMUL_EFFICIENCY, gpu.name, DEFAULT_MATMUL_EFFICIENCY) if matmul is None else matmul,
        matmul_fp8=FP8_MATMUL_EFFICIENCY if matmul is None else matmul,
        matmul_fp4=FP4_MATMUL_EFFICIENCY if matmul is None else matmul,
        memory=MEMORY_EFFICIENCY if memory is None else memory,
        cuda_graphs=cuda_graphs,
        kernel_s=(KERNEL_S_CUDA_GRAPHS if cuda_graphs else KERNEL_S_EAGER) if kernel_s is None else kernel_s,
        network=network or default_network(gpu),
        sequence_s=SEQUENCE_S if sequence_s is None else sequence_s,
        request_s=0.0 if request_s is None else request_s,
        moe_a2a_overlap=moe_a2a_overlap,
        dispatch_dtype=dispatch_dtype,
        prefill_cuda_graphs=prefill_cuda_graphs,
    )


# What a kernel launched by the CPU costs beyond one replayed from a CUDA graph (KERNEL_S_EAGER's
# assumption, 8 µs).
EAGER_EXTRA_S = KERNEL_S_EAGER - KERNEL_S_CUDA_GRAPHS


def prompt_efficiency(eff: Efficiency, share: float = 1.0) -> Efficiency:
    """The rates of a step holding prompt tokens in a `share` of the steps (1: every one): with CUDA
    graphs for decode-only steps only (`prefill_cuda_graphs` False: TensorRT-LLM, module docstring),
    each kernel costs `share` of EAGER_EXTRA_S more; otherwise `eff` as it is."""
    if not eff.cuda_graphs or eff.prefill_cuda_graphs or share <= 0:
        return eff
    return dataclasses.replace(eff, kernel_s=eff.kernel_s + min(share, 1.0) * EAGER_EXTRA_S)


def matmul_eta(eff: Efficiency, dtype: str) -> float:
    """η_matmul of a compute dtype: fp4's measured rate, fp8's (and fp6's) fitted one, else the MAMF."""
    if dtype == "fp4":
        return eff.matmul_fp4
    return eff.matmul_fp8 if dtype in NARROW_DTYPES else eff.matmul


def _rates(gpu: GPU, spec: InferenceSpec, eff: Efficiency) -> tuple[Fraction, Fraction]:
    """(achievable FLOP/s, achievable bytes/s) as exact fractions."""
    eta = matmul_eta(eff, spec.resolved_compute_dtype) * power_cap_clock_scale(gpu)  # a capped board's clock
    peak = Fraction(peak_flops(gpu, spec.resolved_compute_dtype)) * Fraction(eta).limit_denominator(10**6)
    bw = Fraction(gpu.memory_bw_bytes_s) * Fraction(eff.memory).limit_denominator(10**6)
    return peak, bw


def attention_dtype(spec: InferenceSpec) -> str:
    """The dtype whose peak attention's score and value matmuls run at: the compute dtype, except a
    4- or 6-bit one. NVFP4 and MXFP4 quantize the linear layers' weights and activations only
    (ModelOpt's NVFP4 recipe; no FP4 attention kernel in TensorRT-LLM, FlashInfer or FlashAttention):
    attention runs in fp8 with an fp8 cache (TensorRT-LLM's FP8 FMHA and XQA) and in the activation
    dtype otherwise."""
    c = spec.resolved_compute_dtype
    if c not in SUB_BYTE_COMPUTE:
        return c
    return "fp8" if spec.resolved_kv_dtype == "fp8" else spec.resolved_activation_dtype


@dataclass(frozen=True)
class KernelClass:
    """The work of one class of kernels in a step (module docstring): its FLOPs (at attention_dtype's
    rate when `attention`, else the compute dtype's) and the HBM bytes it moves."""

    flops: int | float
    bytes_moved: int | float
    attention: bool = False


def kernel_classes(step: Step) -> tuple[KernelClass, KernelClass]:
    """The classes of a step the bound has costed: its linear layers (the matmul FLOPs against the
    weights read) and its attention (the attention FLOPs, and a hybrid's mixers', against the K/V,
    or the mixers' state, read and written). A step's FLOPs and bytes are exactly the two summed."""
    return (KernelClass(step.matmul_flops, step.weight_bytes),
            KernelClass(step.attention_flops, step.kv_read_bytes + step.kv_write_bytes, attention=True))


def _attention_rate(gpu: GPU, spec: InferenceSpec, eff: Efficiency) -> Fraction:
    """Achievable FLOP/s of attention's matmuls (attention_dtype's peak at its dtype's efficiency)."""
    a = attention_dtype(spec)
    eta = matmul_eta(eff, a) * power_cap_clock_scale(gpu)  # a capped board's clock
    return Fraction(peak_flops(gpu, a)) * Fraction(eta).limit_denominator(10**6)


def classes_s(gpu: GPU, spec: InferenceSpec, eff: Efficiency,
              classes: tuple[KernelClass, ...]) -> tuple[float, float, float]:
    """(compute, memory, roofline) seconds of a step's kernel classes at the achievable rates: the
    FLOPs' and the bytes' times summed over the classes, and the sum over the classes of the larger
    of each class's two (module docstring; >= the whole step's max(compute, memory))."""
    peak, bw = _rates(gpu, spec, eff)
    peak_a = _attention_rate(gpu, spec, eff)
    compute = memory = roof = Fraction(0)
    for c in classes:
        t_c = Fraction(c.flops) / (peak_a if c.attention else peak)
        t_m = Fraction(c.bytes_moved) / bw
        compute, memory, roof = compute + t_c, memory + t_m, roof + max(t_c, t_m)
    return float(compute), float(memory), float(roof)


def launches_per_step(m: ModelConfig) -> int:
    """Kernels of one forward pass: KERNELS_PER_LAYER per layer, MOE_EXTRA_KERNELS more per routed
    layer, MODEL_KERNELS for the embedding, final norm and head (sampling is costed apart)."""
    moe = m.n_moe_layers() if m.is_moe else 0
    return m.n_layers * KERNELS_PER_LAYER + moe * MOE_EXTRA_KERNELS + MODEL_KERNELS


def all_reduce_s(size: int, n: int, net: Network, latency_s: float, one_shot: bool = True) -> float:
    """One all-reduce of `size` bytes over n ranks on `net`: the faster of a ring and a one-shot
    all-reduce (module docstring), or the ring alone. The latency is at least the bound's."""
    if n <= 1:
        return 0.0
    bw, lat = net.link(n)
    lat = max(lat, latency_s)
    ring = ring_all_reduce_s(size, n, bw, lat)
    return min(ring, (n - 1) * size / bw + lat) if one_shot else ring


@dataclass(frozen=True)
class ExpectedStep:
    """One forward pass at achievable rates, plus its fixed costs (seconds, one GPU)."""

    compute_s: float  # FLOPs / (η_matmul · peak), summed over the kernel classes
    memory_s: float  # bytes / (η_mem · bandwidth), summed over the kernel classes
    roofline_s: float  # each kernel class's larger of the two, summed (classes_s)
    launch_s: float  # kernels · kernel_s
    communication_s: float  # the all-reduces and the logit gather
    sampling_s: float
    time_s: float  # the sum


def _fixed_s(m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, tokens: int) -> tuple[float, float, float]:
    """(launch, communication, sampling) seconds of a step of `tokens` tokens per sequence,
    which samples one position per sequence. Naive mode (no cache) all-reduces on the ring alone,
    so that its cost stays linear in the context (the decode's closed-form sum needs that)."""
    B = spec.batch_size
    return fixed_costs_s(m, gpu, spec, eff, B * tokens, B, one_shot=spec.kv_cache)


def expert_all_to_all_s(m: ModelConfig, spec: InferenceSpec, eff: Efficiency, tokens: int) -> float:
    """Seconds of one forward pass's expert all-to-alls on one GPU (0 unless ep > T, DP attention).

    Each MoE layer dispatches its tokens' hidden states to the experts' owners and combines the
    results (two all-to-alls); a GPU sends its 1/T share of the k assignments per token, (ep − 1)/ep
    of them off the GPU (step._communication_exact; Rajbhandari et al. 2022, DeepSpeed-MoE), at
    the network's achievable rate over the ep GPUs. The dispatch carries D elements per assignment in
    `eff.dispatch_dtype` (an 8-bit dispatch adds one fp32 scale per DISPATCH_SCALE_CHANNELS channels:
    DeepEP's low-latency dispatch, DeepGEMM's 1x128 activation scales), the combine D in the
    activation dtype (DeepEP combines in bf16)."""
    T, ep = spec.tensor_parallel, spec.expert_parallel
    if not (ep > T and m.is_moe):
        return 0.0
    act_bits = DTYPE_BITS[spec.resolved_activation_dtype]
    bw, lat = eff.network.link(ep)
    assignments = -(-tokens * m.experts_per_token // T)
    combine = assignments * m.d_model * act_bits / BITS_PER_BYTE
    if eff.dispatch_dtype is None:
        dispatch = combine
    else:
        bits = DTYPE_BITS[eff.dispatch_dtype]
        scales = -(-m.d_model // DISPATCH_SCALE_CHANNELS) * DISPATCH_SCALE_BYTES if bits <= 8 else 0
        dispatch = assignments * (m.d_model * bits / BITS_PER_BYTE + scales)
    per_layer = (dispatch + combine) * (ep - 1) / ep / bw + 2 * max(lat, spec.collective_latency_s)
    return m.n_moe_layers() * per_layer


def exposed_s(m: ModelConfig, spec: InferenceSpec, eff: Efficiency, tokens: int, roofline_s: float, comm_s: float) -> float:
    """The step's communication with `moe_a2a_overlap`: the all-to-alls beyond the roofline time
    only, max(0, t_a2a − t_roof) (module docstring); otherwise comm_s as it is."""
    if not eff.moe_a2a_overlap:
        return comm_s
    a2a = expert_all_to_all_s(m, spec, eff, tokens)
    return comm_s - a2a + max(0.0, a2a - roofline_s)


def fixed_costs_s(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, tokens: int, sampled: int, one_shot: bool = True
) -> tuple[float, float, float]:
    """(launch, communication, sampling) seconds of a forward pass over `tokens` tokens in all that
    samples `sampled` positions (one per sequence that emits a token)."""
    T = spec.tensor_parallel
    act_bits = DTYPE_BITS[spec.resolved_activation_dtype]
    size = -(-tokens * m.d_model * act_bits // BITS_PER_BYTE)
    comm = ALL_REDUCES_PER_LAYER * m.n_layers * all_reduce_s(size, T, eff.network, spec.collective_latency_s, one_shot)
    comm += expert_all_to_all_s(m, spec, eff, tokens)
    if T > 1 and sampled:  # the vocabulary-parallel head's logits of the sampled positions, gathered
        bw, lat = eff.network.link(T)
        logits = -(-sampled * m.vocab_size * act_bits // BITS_PER_BYTE)
        comm += ring_gather_s(logits, T, bw, lat)
    launch = launches_per_step(m) * eff.kernel_s
    sampling = LOGIT_PASSES * sampled * m.vocab_size * LOGIT_BYTES / (gpu.memory_bw_bytes_s * eff.memory)
    sampling += SAMPLER_KERNELS * eff.kernel_s if sampled else 0.0
    sampling += sampled * eff.sequence_s  # the engine's per-sequence work, counted with the sampling
    return launch, comm, sampling


def step_time(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, classes: tuple[KernelClass, ...],
    tokens: int, sampled: int,
) -> ExpectedStep:
    """The expected time of any forward pass given its kernel classes (serving's mixed steps: the
    linear layers, the decode attention and the prompt chunk's attention), over `tokens` tokens in
    all, sampling `sampled` positions."""
    compute, memory, roof = classes_s(gpu, spec, eff, classes)
    launch, comm, sampling = fixed_costs_s(m, gpu, spec, eff, tokens, sampled)
    comm = exposed_s(m, spec, eff, tokens, roof, comm)
    return ExpectedStep(compute, memory, roof, launch, comm, sampling, roof + launch + comm + sampling)


def expected_step(m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, step: Step) -> ExpectedStep:
    """The expected time of a step the bound has costed (`inference.prefill_step`, `decode_step`)."""
    compute, memory, roof = classes_s(gpu, spec, eff, kernel_classes(step))
    launch, comm, sampling = _fixed_s(m, gpu, spec, eff, step.tokens)
    comm = exposed_s(m, spec, eff, spec.batch_size * step.tokens, roof, comm)
    return ExpectedStep(compute, memory, roof, launch, comm, sampling, roof + launch + comm + sampling)


@dataclass(frozen=True)
class ExpectedInference:
    """`tcalc inference`'s expected figures for one generation."""

    efficiency: Efficiency
    kernels_per_step: int  # launches_per_step(m)
    prefill: ExpectedStep
    decode_first: ExpectedStep  # context S + 1
    decode_last: ExpectedStep  # context S + N_new - 1
    decode_steps: int
    decode_s: float  # every decode step
    time_to_first_token_s: float  # the prefill with its sampling, + request_s
    time_per_output_token_s: float  # decode_s / steps (the next step's time when there is none)
    total_s: float
    tokens_per_s: float  # B · N_new / total
    decode_tokens_per_s: float  # B / time per output token


def _class_step(step: Step, gpu: GPU, dtype: str, flops: int, bytes_moved: int) -> Step:
    """`step` with its roofline replaced by one kernel class's (`flops`, `bytes_moved`; the datasheet
    rates of `dtype`), so that the bound's closed-form decode sum prices that class alone."""
    return dataclasses.replace(step, roofline=roofline(flops, bytes_moved, peak_flops(gpu, dtype), gpu.memory_bw_bytes_s))


def expected_decode_s(m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency) -> tuple[float, float]:
    """(all decode steps' expected seconds, seconds per output token): the bound's closed-form sum
    at the achievable rates, once per kernel class (the linear layers, the attention: each its own
    max() and so its own compute/memory split over the steps), plus per step its fixed costs
    (constant over the decode: one token per sequence)."""
    sh = rank_shard(m, spec)
    peak, bw = _rates(gpu, spec, eff)
    peak_a = _attention_rate(gpu, spec, eff)
    compute_dtype, attn_dtype = spec.resolved_compute_dtype, attention_dtype(spec)
    with_cache = Fraction(sum(_fixed_s(m, gpu, spec, eff, 1)))  # one token per sequence per step
    if eff.moe_a2a_overlap and spec.kv_cache:
        # the all-to-alls exposed beyond the first decode step's roofline (the smallest of the
        # decode: later steps hide as much or more, so the sum is an upper bound of the overlap's)
        first = decode_step_exact(m, gpu, spec, sh, spec.prompt_len + 1)[0]
        roof = classes_s(gpu, spec, eff, kernel_classes(first))[2]
        a2a = expert_all_to_all_s(m, spec, eff, spec.batch_size)
        with_cache -= Fraction(a2a - max(0.0, a2a - roof))

    steps: dict[int, Step] = {}  # the decode step at a context, costed once for both classes

    def step_at(context: int) -> Step:
        if context not in steps:
            steps[context] = decode_step_exact(m, gpu, spec, sh, context)[0]
        return steps[context]

    def linear(context: int) -> tuple[Step, Fraction, Fraction]:
        step = step_at(context)
        added = with_cache if spec.kv_cache else Fraction(sum(_fixed_s(m, gpu, spec, eff, context)))
        t = max(Fraction(step.matmul_flops) / peak, Fraction(step.weight_bytes) / bw)
        return _class_step(step, gpu, compute_dtype, step.matmul_flops, step.weight_bytes), t + added, added

    def attention(context: int) -> tuple[Step, Fraction, Fraction]:
        step = step_at(context)
        kv = step.kv_read_bytes + step.kv_write_bytes
        t = max(Fraction(step.attention_flops) / peak_a, Fraction(kv) / bw)
        return _class_step(step, gpu, attn_dtype, step.attention_flops, kv), t, Fraction(0)

    n = spec.new_tokens - 1
    if n == 0:
        return 0.0, float(linear(spec.prompt_len + 1)[1] + attention(spec.prompt_len + 1)[1])
    seconds = decode_sum(sh, spec, linear, peak, bw)[3] + decode_sum(sh, spec, attention, peak_a, bw)[3]
    return float(seconds), float(seconds / n)


def estimate_expected(m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency) -> ExpectedInference:
    """The expected prefill, decode and totals (module docstring)."""
    from transformer_calc.estimators.inference.roofline import decode_step

    S, n = spec.prompt_len, spec.new_tokens - 1
    prefill = expected_step(m, gpu, spec, prompt_efficiency(eff), prefill_step(m, gpu, spec))
    first = expected_step(m, gpu, spec, eff, decode_step(m, gpu, spec, S + 1))
    last = expected_step(m, gpu, spec, eff, decode_step(m, gpu, spec, S + max(n, 1)))
    decode_s, per_token = expected_decode_s(m, gpu, spec, eff)
    ttft = prefill.time_s + eff.request_s  # the request's fixed cost outside the GPU (engines.py)
    total = ttft + decode_s
    return ExpectedInference(
        efficiency=eff,
        kernels_per_step=launches_per_step(m),
        prefill=prefill,
        decode_first=first,
        decode_last=last,
        decode_steps=n,
        decode_s=decode_s,
        time_to_first_token_s=ttft,
        time_per_output_token_s=per_token,
        total_s=total,
        tokens_per_s=spec.batch_size * spec.new_tokens / total,
        decode_tokens_per_s=spec.batch_size / per_token,
    )
