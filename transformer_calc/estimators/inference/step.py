"""One prefill or decode step on the roofline: its FLOPs and bytes on one rank, the tensor-parallel
all-reduces and MoE dispatch (`tp_communication`), and the bound that sets its time (`roofline_step`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

from transformer_calc.devices.hardware import GPU, peak_flops
from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.inference.memory import (
    kv_bytes,
    state_bytes,
    tower_bytes,
    weights_read_bytes,
)
from transformer_calc.estimators.inference.shard import Shard, expert_layout, rank_shard
from transformer_calc.estimators.inference.spec import (
    ALL_REDUCES_PER_LAYER,
    COMPUTE,
    DTYPE_BITS,
    InferenceSpec,
    MEMORY,
    check_positive_int,
    storage_bytes,
)
from transformer_calc.model.config import ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC


# ============================================================================ roofline
@dataclass(frozen=True)
class Roofline:
    """One kernel (or step) on the roofline: time = max(FLOPs / peak, bytes / bandwidth)."""

    flops: int
    bytes_moved: int
    compute_s: float  # FLOPs / peak FLOP/s
    memory_s: float  # bytes / memory bytes/s
    seconds: float  # max of the two: they overlap (seed App. "Compute-bound vs Memory-bound")
    bound: str  # "compute" when compute_s >= memory_s, else "memory"
    intensity: float  # FLOPs per byte (inf when nothing is moved)
    math_bandwidth: float  # lambda_math = peak / bandwidth; compute-bound iff intensity >= it


def roofline(flops: int, bytes_moved: int, peak_flops_s: int, memory_bw_bytes_s: int) -> Roofline:
    """The roofline of `flops` FLOPs and `bytes_moved` bytes on a peak and a bandwidth.

    The bound is decided in exact integers (flops·bandwidth >= bytes·peak), so at intensity =
    lambda_math compute_s == memory_s and the bound is "compute".
    """
    checks = (("flops", flops, 0), ("bytes_moved", bytes_moved, 0),
              ("peak_flops_s", peak_flops_s, 1), ("memory_bw_bytes_s", memory_bw_bytes_s, 1))
    for name, value, low in checks:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} ({value!r}) must be a whole number >= {low}")
    compute_s, memory_s = flops / peak_flops_s, bytes_moved / memory_bw_bytes_s
    return Roofline(
        flops=flops,
        bytes_moved=bytes_moved,
        compute_s=compute_s,
        memory_s=memory_s,
        seconds=max(compute_s, memory_s),
        bound=COMPUTE if flops * memory_bw_bytes_s >= bytes_moved * peak_flops_s else MEMORY,
        intensity=flops / bytes_moved if bytes_moved else math.inf,
        math_bandwidth=peak_flops_s / memory_bw_bytes_s,
    )


# ============================================================================ communication
@dataclass(frozen=True)
class Communication:
    """Tensor-parallel all-reduces (and, with ep > T, expert all-to-alls) of one step on one GPU
    (all zero on one GPU)."""

    all_reduces: int  # 2·L per step
    bytes_per_all_reduce: int  # B · tokens · D · activation bytes
    link_bytes_s: int  # one direction: the GPU's bidirectional interconnect / 2
    transfer_s: float  # all_reduces · 2(T-1)/T · size / link (ring all-reduce)
    latency_s: float  # (all_reduces + all_to_alls) · collective_latency_s
    seconds: float
    all_to_alls: int = 0  # expert parallelism beyond T: dispatch + combine per MoE layer


_EXACT: dict[float, Fraction] = {}  # a few latencies, each asked at every point of a sweep


def _exact(seconds: float) -> Fraction:
    """The float's exact value, computed once per value."""
    exact = _EXACT.get(seconds)
    if exact is None:
        if len(_EXACT) >= 64:
            _EXACT.clear()
        exact = _EXACT[seconds] = Fraction(seconds)
    return exact


def _communication_exact(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, tokens: int
) -> tuple[Communication, Fraction]:
    T, ep = spec.tensor_parallel, spec.expert_parallel
    gpus, _ = expert_layout(m, T, ep)
    if gpus == 1:
        return Communication(0, 0, 0, 0.0, 0.0, 0.0), Fraction(0)
    if gpu.interconnect_bytes_s is None:
        raise ValueError(
            f"{gpu.name} has no interconnect bandwidth in the hardware table; use T = 1 and ep = 1"
        )
    p_act = DTYPE_BITS[spec.resolved_activation_dtype]
    link = Fraction(gpu.interconnect_bytes_s, 2)  # one direction of the bidirectional figure
    n = ALL_REDUCES_PER_LAYER * m.n_layers if T > 1 else 0
    size = storage_bytes(spec.batch_size * tokens * m.d_model, p_act) if T > 1 else 0
    # ring: reduce-scatter + all-gather, n · 2(T-1)/T · size / link, as one fraction of integers
    transfer = Fraction(n * 2 * (T - 1) * size * 2, T * gpu.interconnect_bytes_s)
    n_a2a = 0
    if ep > T:
        # DP attention: each MoE layer dispatches its tokens' hidden states to the experts' owners
        # and combines the results (two all-to-alls); a GPU sends its 1/T share of its group's
        # B·tokens·k assignments, (ep - 1)/ep of them to other GPUs (Rajbhandari et al. 2022,
        # DeepSpeed-MoE; the payload is D activations per assignment).
        n_a2a = 2 * m.n_moe_layers()
        sent = Fraction(-(-spec.batch_size * tokens * m.experts_per_token // T) * m.d_model * p_act, 8)
        transfer += n_a2a * sent * Fraction(ep - 1, ep) / link
    latency = (n + n_a2a) * _exact(spec.collective_latency_s)
    comm = Communication(
        all_reduces=n,
        bytes_per_all_reduce=size,
        link_bytes_s=gpu.interconnect_bytes_s // 2,
        transfer_s=float(transfer),
        latency_s=float(latency),
        seconds=float(transfer + latency),
        all_to_alls=n_a2a,
    )
    return comm, transfer + latency


def tp_communication(m: ModelConfig, gpu: GPU, spec: InferenceSpec, tokens: int) -> Communication:
    """Two all-reduces per layer (Megatron-LM: after W_O and after the MLP output) of the
    activations of `tokens` tokens per sequence (S in the prefill, 1 in a decode step).

    Ring all-reduce: each GPU sends and receives 2(T-1)/T x size (Patarasuk & Yuan 2009; seed
    App. "Collective Communications"), over one direction of the interconnect, plus a fixed
    latency per collective. Parallel-attention blocks (Falcon, GPT-J) can fuse the two into one
    (vLLM's Falcon does), so for them this is an upper bound. The embedding's all-reduce and the
    LM head's logit gather (one each per step) are not counted.
    """
    check_positive_int("tokens", tokens)
    return _communication_exact(m, gpu, spec, tokens)[0]


# ============================================================================ steps
@dataclass(frozen=True)
class Step:
    """One forward pass of the whole batch on one GPU: the prefill, or one decode step."""

    tokens: int  # tokens processed per sequence (S prefill, 1 decode, c naive)
    context_len: int  # tokens the last of them attends over
    matmul_flops: int  # 2 · B · tokens · matmul_params per GPU
    attention_flops: int  # 2·2 · B · L · (A/T) · h_d · sum of the contexts (+ the mixers' mixing, hybrids)
    weight_bytes: int  # weights read
    kv_read_bytes: int  # the KV cache read (+ the mixers' decode state, hybrids)
    kv_write_bytes: int  # the new K/V written (+ the mixers' decode state, hybrids)
    roofline: Roofline
    comm: Communication
    seconds: float  # roofline.seconds + comm.seconds

    @property
    def flops(self) -> int:
        return self.roofline.flops

    @property
    def bytes_moved(self) -> int:
        return self.roofline.bytes_moved

    @property
    def bound(self) -> str:
        return self.roofline.bound


def roofline_step(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, sh: Shard, tokens: int, context: int,
    kv_read_tokens: int, kv_write_tokens: int, towers: tuple[int, int] = (0, 0),
) -> tuple[Step, Fraction, Fraction]:
    """The step, its exact time and its exact communication time. `tokens` new tokens per
    sequence, the last of them at `context`; `towers`: (FLOPs, weight bytes) of the vision tower
    encoding the images in this step (`tower_prefill`)."""
    B = spec.batch_size
    matmul = FLOPS_PER_MAC * B * tokens * sh.matmul_params + towers[0]
    # Token i attends over i positions (at most its window); the new tokens sit at
    # context-tokens+1 .. context. Scores over h_d, re-weighting over h_v per query head.
    first = context - tokens + 1
    # a head's score and value width (MLA's one-token decode over its latent cache runs absorbed: attention.py)
    latent_decode = spec.kv_cache and spec.mla_cache == "latent" and tokens == 1
    head_width = attention_block(m).score_width(m, sh.attention_width, latent_decode)
    attention = B * sum(
        FLOPS_PER_MAC * g.layers * (sh.q_heads * head_width if g.flop_width is None else g.flop_width)
        * g.attended_sum(first, context)
        for g in sh.kv_groups
    )
    for c in sh.compressed:  # DeepSeek-V4: the attended compressed entries and the indexer's scores
        attended, scored = c.attended_sum(first, context)
        attention += B * FLOPS_PER_MAC * c.layers * (c.attend_width * attended + c.index_width * scored)
    weights = weights_read_bytes(sh, spec, B * tokens) + towers[1]
    kv_read = B * kv_bytes(sh, spec, kv_read_tokens, read=True) if kv_read_tokens else 0
    kv_write = B * kv_bytes(sh, spec, kv_write_tokens, held=False) if kv_write_tokens else 0
    if sh.state_groups:  # hybrid: the mixers' conv and state work, and their decode state's traffic
        recurrent = spec.kv_cache and tokens == 1  # one cached token: the recurrent form
        per_token = sum(g.layers * (g.token_flops if recurrent else g.prompt_token_flops) for g in sh.state_groups)
        attention += B * tokens * per_token
        if spec.kv_cache:  # a step reads the state it continues (none before the prompt) and writes it
            state = B * state_bytes(sh, spec)
            kv_read += state if kv_read_tokens else 0
            kv_write += state
    peak = peak_flops(gpu, spec.resolved_compute_dtype)
    bw = gpu.memory_bw_bytes_s
    line = roofline(matmul + attention, weights + kv_read + kv_write, peak, bw)
    comm, comm_s = _communication_exact(m, gpu, spec, tokens)
    # the roofline's max in integers (flops/peak >= bytes/bw), then the one exact time
    exact = (Fraction(line.flops, peak) if line.flops * bw >= line.bytes_moved * peak
             else Fraction(line.bytes_moved, bw)) + comm_s
    step = Step(tokens, context, matmul, attention, weights, kv_read, kv_write, line, comm,
                line.seconds + comm.seconds)
    return step, exact, comm_s


def prefill_step(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> Step:
    """The prefill: S tokens per sequence, causal attention, the cache written (time to first
    token).

    FLOPs per GPU: 2·B·S·N_matmul/T + 2·B·L·(A/T)·h_d·S·(S+1); bytes: the weights once plus
    B·S tokens of K/V written. The seed's 2·B·S·N_params counts the matmuls, not attention.
    """
    sh = rank_shard(m, spec)
    S = spec.prompt_len
    return roofline_step(m, gpu, spec, sh, S, S, 0, S if spec.kv_cache else 0, tower_prefill(m, spec, sh))[0]


def tower_prefill(m: ModelConfig, spec: InferenceSpec, sh: Shard) -> tuple[int, int]:
    """(FLOPs, weight bytes) of encoding the prompt's images, B·images of them, on one GPU.

    First-order count (docs/formulas.md "Towers"): 2 FLOPs per weight per token the weight sees, the
    vision encoder over image_patches patches and the projector over image_tokens tokens per image,
    2·B·images·(N_vision·patches + N_projector·tokens); the encoder's attention over its patches
    (quadratic in them) and element-wise work are not counted; a convolutional encoder (Gemma 3n's
    MobileNetV5) is priced by its own per-image FLOPs (`Towers.image_flops`, counted by layer). The
    towers are held whole and run on every GPU (not split by tensor parallelism); their weights are
    read once per prefill."""
    if not spec.images or m.towers is None or m.towers.text_only:
        return 0, 0
    t = m.towers
    images = spec.batch_size * spec.images
    flops = images * (t.vision_flops + FLOPS_PER_MAC * t.projector * t.image_tokens)
    return flops, tower_bytes(sh, spec)


def with_images(m: ModelConfig, spec: InferenceSpec, images: int) -> InferenceSpec:
    """`spec` with `images` images in each sequence's prompt: prompt_len grows by images × the
    model's tokens per image (`Towers.image_tokens`) and the prefill encodes them (`tower_prefill`)."""
    if isinstance(images, bool) or not isinstance(images, int) or images < 0:
        raise ValueError(f"images ({str(images)[:40]!r}) must be a whole number >= 0")
    if images == 0:
        return spec
    if m.towers is None or not m.towers.image_tokens:
        raise ValueError(f"images ({images}) need a multimodal model with a vision tower; {m.name or 'this model'} has "
                         "none (give a multimodal config.json, e.g. a gemma3 or qwen3_vl one), or drop images")
    if m.towers.text_only:
        raise ValueError(f"images ({images}) need the vision tower, which text_only drops; drop one of the two")
    return dataclasses.replace(spec, prompt_len=spec.prompt_len + images * m.towers.image_tokens,
                               images=spec.images + images)


def decode_step_exact(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, sh: Shard, context: int
) -> tuple[Step, Fraction, Fraction]:
    if spec.kv_cache:  # one token; read the c-1 cached tokens' K/V, write the new token's
        return roofline_step(m, gpu, spec, sh, 1, context, context - 1, 1)
    return roofline_step(m, gpu, spec, sh, context, context, 0, 0)  # naive: a prefill of c tokens


def decode_step(m: ModelConfig, gpu: GPU, spec: InferenceSpec, context_len: int) -> Step:
    """One decode step whose new token is the `context_len`-th of its sequence.

    With the cache: FLOPs 2·B·N_matmul/T + 2·2·B·L·(A/T)·h_d·c; bytes: the weights once, the
    cached c-1 tokens' K/V read, the new token's written (together the cache at c tokens). Naive
    (no cache, the seed's "Naive Inference"): the whole context is reprocessed, a prefill of c.
    """
    check_positive_int("context_len", context_len)
    return decode_step_exact(m, gpu, spec, rank_shard(m, spec), context_len)[0]
