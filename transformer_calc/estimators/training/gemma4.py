"""Training memory and fine-tuning of Gemma 4's varied layers (docs/formulas.md §5.14 "Training memory",
"Fine-tuning").

Source: transformers 5.23 models/gemma4/modeling_gemma4.py (Gemma4TextDecoderLayer, Gemma4TextAttention,
Gemma4TextMLP, Gemma4TextRouter, Gemma4TextExperts, Gemma4RMSNorm, Gemma4TextModel's per-layer inputs) and
configuration_gemma4.py (`per_layer_config`, `kv_sharing_modes`). A Gemma 4 layer is one of four classes:
its attention kind (sliding, or full with its own head width h_d^full and K/V heads, k = v when
attention_k_eq_v) and whether it is kv-shared (the last num_kv_shared_layers layers: no W_K, W_V, k_norm,
v_norm; they read the K/V of the last earlier layer of their kind, and their dense MLP is 2·d_ff wide with
use_double_wide_mlp). Every layer of a MoE model (26B-A4B) runs the dense MLP and the routed experts side by
side, each branch with its own norms, and the router reads the residual through its own scale-free norm.
With per-layer embeddings (P > 0) every layer gates a P-wide input into the residual after its MLP.

Each class is priced on its own shapes and summed over layers [start, stop) in closed form
(`ModelConfig.n_attention_layers` split at the first kv-shared layer). Parameters (weights, gradients,
optimizer states) come from the exact count (`gemma_layers.varied_attention`, the class's MLP and per-layer input
parts); the sum over all classes plus the embedding-side parts equals `count_params(m).total`.

Activations, per token of one micro-batch (B·S tokens; T = 1: tensor and expert parallelism are refused by
`check_layout`), p bytes per element:

- `default` profile (fused kernels and FlashAttention, the conventions of memory.py's `_layer_activations`):
  every norm keeps its input (p per element), the q/k/v projections their input p·D, q (and k, v unless
  kv-shared) p·(A + 2·n_kv)·h_d and the q/k/v norms' outputs as much, FlashAttention's fp32 logsumexp
  4·A (else the scores and softmax output 2·p·A·S), W_O's input p·A·h_d (FlashAttention's output); the
  gated MLP its input and 4·p·F' (F' = 2·d_ff on a double-wide kv-shared layer); the per-layer input gate
  p·D + 3·p·P; the MoE branch k·(4·p·F_e + p·D) and the router's logits p·E, as `_layer_activations`
  prices a MoE.
- `torch-eager` profile (what autograd saves when eager PyTorch runs modeling_gemma4.py; measured by
  tools/crosscheck/activations_mixers.py, docs/validation.md): Gemma4RMSNorm upcasts its input to fp32
  (kept by pow and by the product with its rsqrt: 4 per element, the input itself in fp32), keeps mean(x²)+eps
  and its power -1/2 (4 bytes each per row) and, with a scale, the fp32 normalized input (4 per element) and
  the weight's fp32 copy (below fp32: 4·width per norm and layer). RoPE keeps only cos and sin (q and k do
  not need a gradient of them): 2·p·S·h_d per attention kind, once for the model (with the head). Eager
  attention keeps q, k, v as the two matmuls take them (contiguous, A heads: 3·p·A·h_d; repeat_kv copies
  a kv-shared layer's borrowed K/V again), the fp32 softmax (4·A·S) and its cast copy (p·A·S below
  fp32). The MLP keeps its input, the GELU input, GELU output, up projection and their product
  (p·D + 4·p·F'); the per-layer input gate its input p·D, the GELU input and output and the product
  (3·p·P); the layer scalar (a buffer) p bytes. transformers' eager experts (Gemma4TextExperts.forward)
  keep, per routed token, its gathered input, the down output and that output weighted (3·p·D), the
  gate_up output 2·p·F_e, act(gate) p·F_e and the product p·F_e, torch.where's two int64 indices (one
  storage) and the gathered fp32 routing weight. The router (Gemma4TextRouter.forward) keeps its
  scale-free norm of the residual, the normed input its scale multiplies and W_router's input (2·p·D),
  the fp32 softmax (4·E), the top-k indices (8·k), values and renormalized weights (4·k each), their sum
  (4) and the gathered per-expert scale (p·k). In fp32 the router's and pre_feedforward_layernorm_2's
  upcasts are the residual that pre_feedforward_layernorm upcasts already (counted once).

The first stage adds the per-layer input path (`head_first`): the table lookup's ids, the projection's
input p·D (in fp32 the first layer's norm keeps that tensor itself), the P-wide norm over L·P per token
and the combined per-layer inputs p·L·P (every layer's gate multiplies a slice of them).

Adapters (LoRA, QLoRA, DoRA): `class_linears` lists each class's modules with PEFT's names; the trainable
parameters, NF4 bytes, adapter FLOPs and activation changes follow finetune.py's conventions class by class
(`_adapter_delta`). finetune.py prices uniform blocks and does not import this module (no import cycle):
its callers ask `trainable_params`, `finetune_step_flops` and `largest_quantized_matrix` here, which fall
back to finetune's for every other model. Checked against PEFT (tools/crosscheck/peft_params.py) and
saved tensors under PEFT (tools/crosscheck/lora_activations.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from transformer_calc.model.config import (
    ActivationProfile,
    LayerAttention,
    ModelConfig,
    Parallelism,
    Recompute,
    Training,
    Workload,
)

from transformer_calc.estimators.support_table import Unpriced, refusal
from transformer_calc.estimators.training.gemma4_layers import LayerClass, is_gemma4, last_class, layer_classes
from transformer_calc.estimators.training.layer_activations import LayerActivations

if TYPE_CHECKING:
    from transformer_calc.estimators.flops import StepFlops
    from transformer_calc.estimators.params import ShardParams
    from transformer_calc.estimators.training.finetune import Linear, Trainable
    from transformer_calc.estimators.training.pipeline import Chunk

__all__ = ["LayerClass", "is_gemma4", "last_class", "layer_classes"]

FP32 = 4  # Gemma4RMSNorm's upcast, the softmax's fp32 output
STAT = 4  # one fp32 per norm row: mean(x²) + eps, and its power -1/2
INDEX = 8  # int64 indices (token ids, top-k, gathers)
EXPERT_INDEX_BYTES = 2 * INDEX  # eager experts: torch.where's (top_k_pos, token_idx), one int64 storage of two rows
EXPERT_D_TENSORS = 3  # eager experts, per routed token: the gathered input, the down output, its weighted copy


# ---------------------------------------------------------------------------- parameters
def class_params(m: ModelConfig, c: LayerClass) -> int:
    """Parameters of one layer of class `c`: the base block (`count_params(m).layer`) with its attention
    replaced by the class's own (`gemma_layers.varied_attention`), the double-wide MLP of a kv-shared layer, and
    the per-layer input gate D x P, projection P x D and norm."""
    from transformer_calc.estimators.gemma_layers import varied_attention
    from transformer_calc.estimators.params import count_params, mlp_params, norm_params

    layer = count_params(m).layer
    keys = ("attn_q", "attn_k", "attn_v", "attn_o", "attn_bias", "qk_norm")
    total = layer.total - sum(getattr(layer, k) for k in keys) + sum(varied_attention(m, c.kind, c.kv_shared).values())
    if c.kv_shared and m.kv_shared_double_mlp:
        width, bias = (m.shared_expert_d_ff, False) if m.is_moe else (m.d_ff, None)
        total += sum(mlp_params(m, 2 * width, bias)) - sum(mlp_params(m, width, bias))
    if m.per_layer_input_dim:
        total += 2 * m.d_model * m.per_layer_input_dim + norm_params(m, m.d_model)
    return total


def blocks_params(m: ModelConfig, start: int, stop: int) -> int:
    """Parameters of layers [start, stop)."""
    return sum(c.count(m, start, stop) * class_params(m, c) for c in layer_classes(m))


def embedding_side_params(m: ModelConfig) -> int:
    """The per-layer input path outside the layers, on the first stage: the V_ple x L·P table, the D x L·P
    model projection and its P-wide norm (modeling_gemma4.py Gemma4TextModel)."""
    from transformer_calc.estimators.params import count_params, norm_params

    if not m.per_layer_input_dim:
        return 0
    full = count_params(m)
    inside = m.n_layers * (2 * m.d_model * m.per_layer_input_dim + norm_params(m, m.d_model))
    return full.per_layer_embedding + full.per_layer_inputs - inside


# ---------------------------------------------------------------------------- activations
ClassActivations = LayerActivations  # bytes one layer of a class keeps for backward (one micro-batch), by part

def check_layout(m: ModelConfig, T: int, ep: int = 1, etp: int | None = None) -> None:
    """Gemma 4's training estimates price one tensor-parallel rank holding every head (T = 1): the per-rank
    parameter shares are priced (`params.shard_params`, inference and serving use them), the per-rank
    activations of the layer classes are not yet; refused by name, as expert parallelism is."""
    from transformer_calc.estimators.params import check_tensor_parallel

    check_tensor_parallel(m, T, ep, etp)
    if T > 1 or (etp or 1) > 1:
        raise refusal(m, f"training (memory, fine-tuning, step time) at T {max(T, etp or 1)}",
                      Unpriced.training_tensor)


def check_training(m: ModelConfig, tr: Training) -> None:
    """Refuse lora targets that select no module (support.check_hybrid_training refuses, by the table of
    estimators/support_table.py, what Gemma 4's training does not price: dropout, the seed profile, FP8 recipes,
    the optimizers whose states follow each tensor's shape)."""
    if tr.adapters:
        check_targets(m, tr)


def class_activations(m: ModelConfig, w: Workload, tr: Training, c: LayerClass) -> ClassActivations:
    """One layer of class `c` (T = 1; see the module docstring for both profiles).

    Longer than 60 lines on purpose: one term per saved tensor of Gemma4DecoderLayer's forward, in
    its order (the measurement's, tools/crosscheck/activations_mixers.py)."""
    B, S, D, A, P, p = w.batch_size, w.seq_len, m.d_model, m.n_heads, m.per_layer_input_dim, tr.p
    N = B * S
    if tr.recompute is Recompute.full:
        return ClassActivations(attention=0, mlp=0, norm=p * N * D)  # the block input
    eager = tr.activations is ActivationProfile.torch_eager
    hd, kv = m.kind_head_dim(c.kind), m.kv_heads_of(c.kind)
    k_eq_v = m.full_k_eq_v and c.kind is not LayerAttention.sliding
    below = p < FP32  # the norms' fp32 upcasts are copies (in fp32 they are the tensors themselves)
    n_norms_d = m.norms_per_layer + (1 if P else 0)  # the block's D-wide scaled norms (+ post_per_layer_input_norm)
    # ---- attention
    attn = p * N * D  # the q/k/v projections' input (the input norm's output)
    if eager:
        # q_norm (scaled, per head), then k_norm (scaled) and v_norm (no scale) unless kv-shared
        attn += _eager_norm_bytes(N * A, hd, scaled=True)
        if not c.kv_shared:
            attn += _eager_norm_bytes(N * kv, hd, scaled=True) + _eager_norm_bytes(N * kv, hd, scaled=False)
            if k_eq_v and not below:  # v_norm upcasts the key projection itself, as k_norm does
                attn -= FP32 * N * kv * hd
        if tr.flash:  # SDPA keeps q, k, v as given, its output and an fp32 logsumexp
            attn += p * N * (A + (0 if c.kv_shared else 2 * kv)) * hd + p * N * A * hd + FP32 * N * A
            core_kept = 0
        else:
            attn += 3 * p * N * A * hd  # q, repeat_kv(k)^T, repeat_kv(v), contiguous as the matmuls take them
            core_kept = FP32 * N * A * S + (p * N * A * S if below else 0)  # fp32 softmax, its cast copy
    else:
        attn += p * N * (A + (0 if c.kv_shared else 2 * kv)) * hd  # q, k, v
        attn += p * N * (A + (0 if c.kv_shared else 2 * kv)) * hd  # q, k norms' outputs and v_norm's input
        if tr.flash:
            core_kept = FP32 * N * A  # its logsumexp (its output is W_O's input, counted below)
        else:
            core_kept = 2 * p * N * A * S  # scores and softmax output
    attn += 0 if tr.recompute is Recompute.selective else core_kept
    attn += p * N * A * hd  # W_O's input
    # ---- MLP (dense: F', or beside the experts: the dense branch at shared_expert_d_ff)
    width = m.shared_expert_d_ff if m.is_moe else m.d_ff
    if c.kv_shared and m.kv_shared_double_mlp:
        width *= 2
    mlp = p * N * D + 4 * p * N * width  # input; GELU input and output, up, their product
    norm_extra = 0
    if m.is_moe:
        E, k, Fe = m.n_experts, m.experts_per_token, m.moe_d_ff
        if eager:
            # router: its scale-free norm of the residual, the scaled input W_router keeps (p·D), the fp32
            # softmax, top-k indices and values, the renormalized weights and the per-expert scale gathered
            mlp += 2 * p * N * D + FP32 * N * E + N * k * (INDEX + 2 * FP32 + p) + FP32 * N
            norm_extra += _eager_norm_bytes(N, D, scaled=False)
            mlp += N * k * (EXPERT_D_TENSORS * p * D + 4 * p * Fe + EXPERT_INDEX_BYTES + FP32)
            if not below:  # the router's and pre_feedforward_layernorm_2's upcasts are the residual itself
                norm_extra -= 2 * FP32 * N * D
        else:
            mlp += k * (4 * p * N * Fe + p * N * D) + p * N * E
    if P:  # per-layer input: the gate's input, GELU input and output, their product with the per-layer input
        mlp += p * N * D + 3 * p * N * P
    # ---- norms
    if eager:
        norm = n_norms_d * _eager_norm_bytes(N, D, scaled=True) + norm_extra
        norm += p  # the layer scalar (a buffer) kept by the in-place product
        if below:  # each scaled norm's fp32 copy of its weight
            norm += FP32 * (n_norms_d * D + hd * (1 if c.kv_shared else 2))
    else:
        norm = (n_norms_d + (1 if m.is_moe else 0)) * p * N * D  # each norm its input (+ the router's)
    if tr.adapters:
        d_attn, d_mlp, d_norm = _adapter_delta(m, w, tr, c, eager, width)
        attn, mlp, norm = attn + d_attn, mlp + d_mlp, norm + d_norm
    return ClassActivations(attention=attn, mlp=mlp, norm=norm)


def _adapter_delta(m: ModelConfig, w: Workload, tr: Training, c: LayerClass, eager: bool, width: int) -> tuple[int, int, int]:
    """(attention, MLP, norms) change of one layer of class `c` under adapters (finetune.activation_delta's
    conventions, per class): a frozen matrix's input is not kept (its weight gets no gradient) unless an
    adapter reads that very tensor (pure bf16/fp32; in mixed precision each adapted module keeps its own
    16-bit copy, `separate_adapter_inputs`); each adapted module keeps its rank-r intermediate (and DoRA's
    two d_out-wide outputs). Dropped when frozen: the q/k/v input, W_O's input (not FlashAttention's output
    in the default profile), the MLP input, W_down's input (GELU's backward needs its input, not the
    product), the per-layer gate's and projection's inputs, the routed experts' inputs and W_down inputs.
    torch-eager also drops what a frozen scale kept: every scaled Gemma4RMSNorm's fp32 normalized input
    (its weight's fp32 copy stays: the input gradient needs it), the router's scaled input and its
    renormalized top-k weights (the per-expert scale's), and the router projection's input unless adapted."""
    from transformer_calc.estimators.training.finetune import (Adapted, adapted, lin_rank, selected,
                                                               separate_adapter_inputs)
    from transformer_calc.model.config import Finetune

    B, S, D, A, P, p = w.batch_size, w.seq_len, m.d_model, m.n_heads, m.per_layer_input_dim, tr.p
    N = B * S
    hd, kv = m.kind_head_dim(c.kind), m.kv_heads_of(c.kind)
    lin = class_linears(m, c)
    chosen = [x for x in lin if selected(x, tr.lora_targets)]
    separate = separate_adapter_inputs(tr)
    ad = adapted(lin, tr) if not separate else Adapted(0, 0, False, False, False, False)
    shared_names = set() if separate else {x.name for x in chosen}
    attn = mlp = norm = 0
    if not ad.qkv:
        attn -= p * N * D
    if not ad.o and not (tr.flash and not eager):
        attn -= p * N * A * hd
    if not ad.gate_up:
        mlp -= p * N * D
    if not ad.down:
        mlp -= p * N * width
    if P:
        mlp -= 0 if "per_layer_input_gate" in shared_names else p * N * D
        mlp -= 0 if "per_layer_projection" in shared_names else p * N * P
    if m.is_moe:
        k, Fe = m.experts_per_token, m.moe_d_ff
        if not ad.experts:
            mlp -= k * p * N * (D + Fe)  # the routed copies the experts read, their W_down inputs
        if eager:
            mlp -= p * N * D  # the router's normed input, kept only for its (frozen) scale
            mlp -= FP32 * N * k  # the renormalized top-k weights, kept only for the (frozen) per-expert scale
            mlp -= 0 if "router.proj" in shared_names else p * N * D
    if eager:  # frozen norm weights: no fp32 normalized input kept
        n_norms_d = m.norms_per_layer + (1 if P else 0)
        norm -= FP32 * N * D * n_norms_d
        attn -= FP32 * N * hd * (A + (0 if c.kv_shared else kv))  # q_norm, k_norm
    dora = 2 if tr.finetune is Finetune.dora else 0

    def kept(x: Linear) -> int:
        r = lin_rank(x, tr)
        tokens = m.experts_per_token * N if x.routed else N
        own = tokens * x.d_in + x.count * r * (x.d_in + x.d_out) if separate else 0
        return p * (tokens * (r + dora * x.d_out) + own)

    attn += sum(kept(x) for x in chosen if x.name in ("q_proj", "k_proj", "v_proj", "o_proj"))
    mlp += sum(kept(x) for x in chosen if x.name not in ("q_proj", "k_proj", "v_proj", "o_proj"))
    return attn, mlp, norm


def _eager_norm_bytes(rows: int, width: int, *, scaled: bool) -> int:
    """Gemma4RMSNorm under autograd: the fp32 input (kept by pow and by x·rsqrt), mean(x²)+eps and its
    power -1/2 per row, and with a scale the fp32 normalized input (kept by the product with the weight)."""
    return FP32 * rows * width * (2 if scaled else 1) + 2 * STAT * rows


@dataclass(frozen=True)
class Gemma4Parts:
    """Every class's activations; sums over layer ranges (memory.BlockParts' interface)."""

    by_class: tuple[tuple[LayerClass, ClassActivations], ...]

    def chunk(self, m: ModelConfig, start: int, stop: int) -> ClassActivations:
        att = mlp = norm = 0
        for c, a in self.by_class:
            n = c.count(m, start, stop)
            att, mlp, norm = att + n * a.attention, mlp + n * a.mlp, norm + n * a.norm
        return ClassActivations(attention=att, mlp=mlp, norm=norm)

    @property
    def largest(self) -> int:
        return max(a.total for _, a in self.by_class)


def parts(m: ModelConfig, w: Workload, tr: Training) -> Gemma4Parts:
    return Gemma4Parts(tuple((c, class_activations(m, w, tr, c)) for c in layer_classes(m)))


def head_first(m: ModelConfig, w: Workload, tr: Training) -> int:
    """What the first stage keeps beyond memory.py's embedding part: the per-layer input path and, under
    torch-eager, RoPE's cos and sin of the full layers' own head width (memory.torch_eager_head counts
    those of head_dim)."""
    B, S, D, P, L, p = w.batch_size, w.seq_len, m.d_model, m.per_layer_input_dim, m.n_layers, tr.p
    N = B * S
    eager = tr.activations is ActivationProfile.torch_eager
    out = 0
    if eager:  # one cos and one sin per attention kind, of that kind's h_d (torch_eager_head counts head_dim's)
        kinds = [k for k in (LayerAttention.sliding, LayerAttention.full) if m.n_attention_layers(k)]
        out += sum(2 * p * S * m.kind_head_dim(k) for k in kinds) - 2 * p * S * m.head_dim
    if not P:
        return out
    side = _side_adapters(m, w, tr)
    if eager:
        # embed_tokens_per_layer reuses the embedding's ids (memory.torch_eager_head); the scaled
        # lookups keep their scalar scales; per_layer_model_projection keeps the embedding output
        # (in fp32 the first layer's input norm keeps that tensor itself; not under frozen weights);
        # per_layer_projection_norm over N·L rows of P (its fp32 normalized input only for a trained
        # weight); the combined per-layer inputs
        out += 2 * p + (p * N * D if p < FP32 and side.keeps_input else 0)
        out += _eager_norm_bytes(N * L, P, scaled=not tr.adapters) + (FP32 * P if p < FP32 else 0)
        out += p * N * L * P
    else:  # projection input, its norm's input, the inputs
        out += (p * N * D if side.keeps_input else 0) + p * N * L * P + p * N * L * P
    return out + side.kept


@dataclass(frozen=True)
class _Side:
    keeps_input: bool  # per_layer_model_projection's input is kept (trained weight, or an adapter reads it)
    kept: int  # its adapter's tensors


def _side_adapters(m: ModelConfig, w: Workload, tr: Training) -> _Side:
    from transformer_calc.estimators.training.finetune import lin_rank, selected, separate_adapter_inputs
    from transformer_calc.model.config import Finetune

    if not tr.adapters:
        return _Side(True, 0)
    chosen = [x for x in side_linears(m) if selected(x, tr.lora_targets)]
    N, p = w.batch_size * w.seq_len, tr.p
    separate = separate_adapter_inputs(tr)
    dora = 2 if tr.finetune is Finetune.dora else 0
    kept = sum(p * (N * (lin_rank(x, tr) + dora * x.d_out)
                    + ((N * x.d_in + lin_rank(x, tr) * (x.d_in + x.d_out)) if separate else 0)) for x in chosen)
    return _Side(bool(chosen) and not separate, kept)


def final_norm_delta(m: ModelConfig, w: Workload, tr: Training) -> int:
    """torch-eager: what Gemma4RMSNorm keeps as the final norm beyond eager._eager_norm's LlamaRMSNorm (the
    fp32 normalized input instead of the p-byte one, a second fp32 statistic, below fp32 the weight's copy)."""
    N, D, p = w.batch_size * w.seq_len, m.d_model, tr.p
    if not m.final_norm:
        return 0
    frozen = bool(tr.adapters)
    gemma = _eager_norm_bytes(N, D, scaled=not frozen) + (FP32 * D if p < FP32 else 0)
    return gemma - (FP32 * N * D + STAT * N + (0 if frozen else p * N * D))


# ---------------------------------------------------------------------------- adapters (LoRA, QLoRA, DoRA)
def class_linears(m: ModelConfig, c: LayerClass) -> list[Linear]:
    """The adaptable modules of one layer of class `c` (T = 1), as PEFT finds them in modeling_gemma4.py:
    self_attn.q_proj, k_proj, v_proj (not on a kv-shared layer; no v_proj on a k = v full layer), o_proj;
    mlp.gate_proj, up_proj, down_proj (2·d_ff on a double-wide kv-shared layer; beside the experts in a MoE
    layer); per_layer_input_gate and per_layer_projection (all-linear only: no target names them); in a MoE
    layer router.proj (an nn.Linear: all-linear takes it, as does the `router` target) and the experts'
    stacked gate_up_proj and down_proj (`experts`: PEFT's target_parameters; never all-linear)."""
    from transformer_calc.estimators.training.finetune import Linear
    from transformer_calc.model.config import LoraTarget as T_

    D, A, P = m.d_model, m.n_heads, m.per_layer_input_dim
    hd, kv = m.kind_head_dim(c.kind), m.kv_heads_of(c.kind)
    out = [Linear("q_proj", frozenset({T_.q}), D, A * hd)]
    if not c.kv_shared:
        out.append(Linear("k_proj", frozenset({T_.k}), D, kv * hd))
        if not (m.full_k_eq_v and c.kind is not LayerAttention.sliding):
            out.append(Linear("v_proj", frozenset({T_.v}), D, kv * hd))
    out.append(Linear("o_proj", frozenset({T_.o}), A * hd, D, "row"))
    F = (m.shared_expert_d_ff if m.is_moe else m.d_ff) * (2 if c.kv_shared and m.kv_shared_double_mlp else 1)
    out += [Linear("gate_proj", frozenset({T_.gate}), D, F), Linear("up_proj", frozenset({T_.up}), D, F),
            Linear("down_proj", frozenset({T_.down}), F, D, "row")]
    if P:
        out += [Linear("per_layer_input_gate", frozenset(), D, P, all_linear_only=True),
                Linear("per_layer_projection", frozenset(), P, D, "row", all_linear_only=True)]
    if m.is_moe:
        E, Fe = m.n_experts, m.moe_d_ff
        ex = frozenset({T_.experts})
        out += [Linear("router.proj", frozenset({T_.router}), D, E, "rep"),
                Linear("experts.gate_up_proj", ex, D, 2 * Fe, count=E, routed=True, all_linear=0),
                Linear("experts.down_proj", ex, Fe, D, "row", count=E, routed=True, all_linear=0)]
    return out


def side_linears(m: ModelConfig) -> list[Linear]:
    """Outside the layers (first stage): per_layer_model_projection D -> L·P (all-linear only)."""
    from transformer_calc.estimators.training.finetune import Linear

    if not m.per_layer_input_dim:
        return []
    return [Linear("per_layer_model_projection", frozenset(), m.d_model, m.n_layers * m.per_layer_input_dim,
                   all_linear_only=True)]


def check_targets(m: ModelConfig, tr: Training) -> None:
    """A target list that selects no module of this model is an error (PEFT raises too)."""
    from transformer_calc.estimators.training.finetune import selected

    mods = [x for c in layer_classes(m) for x in class_linears(m, c)]
    if not any(selected(x, tr.lora_targets) for x in mods):
        names = ",".join(t.value for t in tr.lora_targets)
        raise ValueError(f"lora_targets ({names}) select no module of this model (experts and router need "
                         "Gemma 4's MoE); choose from q,k,v,o,gate,up,down,experts,router or all-linear")


def adapter_params(m: ModelConfig, tr: Training, start: int, stop: int) -> int:
    """Trainable adapter parameters of layers [start, stop)."""
    from transformer_calc.estimators.training.finetune import adapted

    return sum(c.count(m, start, stop) * adapted(class_linears(m, c), tr).params for c in layer_classes(m))


def trainable_params(m: ModelConfig, tr: Training) -> Trainable:
    """finetune.trainable_params, Gemma 4's layer classes included (what PEFT's get_nb_trainable_parameters
    reports). finetune.py prices uniform blocks; its callers ask here."""
    from transformer_calc.estimators.params import count_params
    from transformer_calc.estimators.training import finetune
    from transformer_calc.estimators.training.finetune import Trainable, adapted

    if not tr.adapters or not is_gemma4(m):
        return finetune.trainable_params(m, tr)
    check_targets(m, tr)
    counts = count_params(m)
    side = adapted(side_linears(m), tr)
    modules = sum(c.count(m, 0, m.n_layers) * adapted(class_linears(m, c), tr).modules for c in layer_classes(m))
    head = 0
    if tr.train_head:
        head = counts.lm_head + counts.lm_head_bias if not m.tied_embeddings else (0 if tr.train_embeddings else counts.embedding)
    return Trainable(adapters=adapter_params(m, tr, 0, m.n_layers) + side.params,
                     embedding=counts.embedding if tr.train_embeddings else 0, head=head,
                     adapted_modules=modules + side.modules)


def adapter_flops_per_token(m: ModelConfig, tr: Training) -> int:
    """Forward FLOPs of every adapter per token: 2·r·(d_in + d_out) per adapted module (a routed expert's
    on the k experts a token goes to)."""
    from transformer_calc.estimators.training.finetune import lin_rank, selected

    def per_token(x: Linear) -> int:
        return 2 * lin_rank(x, tr) * (x.d_in + x.d_out) * (m.experts_per_token if x.routed else 1)

    total = sum(c.count(m, 0, m.n_layers) * sum(per_token(x) for x in class_linears(m, c) if selected(x, tr.lora_targets))
                for c in layer_classes(m))
    return total + sum(per_token(x) for x in side_linears(m) if selected(x, tr.lora_targets))


def quantized_elements(m: ModelConfig, start: int, stop: int) -> tuple[int, int]:
    """(elements, NF4 bytes) of the matrices bitsandbytes quantizes in layers [start, stop) (every nn.Linear
    but the output layer; the routed experts per expert matrix, as finetune.block_matrices assumes), and the
    first stage's per_layer_model_projection is counted by `side_quantized`."""
    from transformer_calc.estimators.training.finetune import nf4_bytes

    elems = nf4 = 0
    for c in layer_classes(m):
        n = c.count(m, start, stop)
        for x in class_linears(m, c):
            if x.name == "router.proj":
                continue  # the router stays 16-bit (finetune.block_matrices' convention)
            size = x.d_in * x.d_out
            per = x.count if not x.routed else x.count * (2 if x.name.endswith("gate_up_proj") else 1)
            size = size // (2 if x.name.endswith("gate_up_proj") else 1)  # one expert matrix of D x F_e
            elems += n * per * size
            nf4 += n * per * nf4_bytes(size)
    return elems, nf4


def side_quantized(m: ModelConfig) -> tuple[int, int]:
    from transformer_calc.estimators.training.finetune import nf4_bytes

    return sum(x.d_in * x.d_out for x in side_linears(m)), sum(nf4_bytes(x.d_in * x.d_out) for x in side_linears(m))


def largest_quantized_matrix(m: ModelConfig, T: int = 1, ep: int = 1, etp: int | None = None) -> int:
    """finetune.largest_quantized_matrix, Gemma 4's layer classes included (bitsandbytes dequantizes one
    matrix at a time)."""
    from transformer_calc.estimators.training import finetune

    if not is_gemma4(m):
        return finetune.largest_quantized_matrix(m, T, ep, etp)
    return max([x.d_in * x.d_out // (2 if x.name.endswith("gate_up_proj") else 1)
                for c in layer_classes(m) for x in class_linears(m, c) if x.name != "router.proj"]
               + [x.d_in * x.d_out for x in side_linears(m)])


def frozen_weight_bytes(m: ModelConfig, tr: Training, params: int, ranges: list[tuple[int, int]], first: bool) -> tuple[int, int]:
    """finetune.frozen_weight_bytes for Gemma 4: (bytes, of which NF4) of `params` frozen parameters of a GPU
    holding layers `ranges` (and the first stage's per-layer input path when `first`). QLoRA quantizes each
    class's matrices (and per_layer_model_projection); the rest stays at p bytes (fp32 with fp32_unquantized)."""
    from transformer_calc.estimators.training.finetune import FP32_BYTES, Finetune

    if tr.finetune is not Finetune.qlora:
        if tr.frozen_weights is not None:
            stored, n = tr.frozen_weights
            return -(-params * stored // n), 0
        return params * tr.p, 0
    elems = nf4 = 0
    for start, stop in ranges:
        e, b = quantized_elements(m, start, stop)
        elems, nf4 = elems + e, nf4 + b
    if first:
        e, b = side_quantized(m)
        elems, nf4 = elems + e, nf4 + b
    unquantized = FP32_BYTES if tr.fp32_unquantized else tr.p
    return (params - elems) * unquantized + nf4, nf4


def finetune_step_flops(m: ModelConfig, step: StepFlops, tr: Training, full_recompute: bool) -> tuple[int, int]:
    """finetune.finetune_step_flops, Gemma 4's layer classes included: (weight-gradient FLOPs not executed,
    adapter FLOPs executed), the adapters running forward, input and weight gradients (3 forwards; 4 with
    full recomputation) as finetune.py counts them."""
    from transformer_calc.estimators.training import finetune

    if not tr.adapters or not is_gemma4(m):
        return finetune.finetune_step_flops(m, step, tr, full_recompute)
    skipped = step.forward - step.attention_cores - (step.lm_head if finetune.head_trained(m, tr) else 0)
    passes = 3 + (1 if full_recompute else 0)
    return skipped, passes * adapter_flops_per_token(m, tr) * step.tokens


# ---------------------------------------------------------------------------- the stage's layers
@dataclass(frozen=True)
class Gemma4Layers:
    """training/layer_structure.py's `LayerStructure` for Gemma 4: each layer class priced with its own widths,
    the per-layer input path on the first stage, T = 1 and cp = 1 only (refused by name otherwise)."""

    varied: bool = True  # a middle stage can hold more of the larger full layers
    # its fp32 norm tensors are a large part of a recomputed block, and the block's backward peaks as it
    # starts, the whole block alive, above the attention backward's point (measured:
    # tools/crosscheck/activations_mixers.py)
    recomputed_block_peaks_at_start: bool = True
    differs: bool = True

    def check_layout(self, m: ModelConfig, par: Parallelism) -> None:
        check_layout(m, par.tensor, par.expert, par.expert_tensor)
        if par.context > 1:
            raise refusal(m, f"context parallelism (cp {par.context})", Unpriced.context)

    def check_tensor(self, m: ModelConfig, T: int) -> None:
        check_layout(m, T)

    def check_training(self, m: ModelConfig, tr: Training) -> None:
        check_training(m, tr)

    def attention_bytes(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism,
                        kind: LayerAttention) -> int | None:
        return None  # every class priced whole (`parts`, `last_layer`)

    def params(self, m: ModelConfig, shard: ShardParams, chunks: tuple[Chunk, ...], first: bool) -> int:
        return sum(blocks_params(m, c.start, c.stop) for c in chunks) + (embedding_side_params(m) if first else 0)

    def side_adapter_params(self, m: ModelConfig, tr: Training) -> tuple[int, int]:
        from transformer_calc.estimators.training.finetune import adapted

        return adapted(side_linears(m), tr).params, 0  # the PLE projection's, on the first stage

    def adapter_params(self, m: ModelConfig, tr: Training, chunks: tuple[Chunk, ...], par: Parallelism) -> int:
        return sum(adapter_params(m, tr, c.start, c.stop) for c in chunks)

    def frozen_weight_bytes(self, m: ModelConfig, tr: Training, params: int, chunks: tuple[Chunk, ...],
                            first: bool, par: Parallelism) -> tuple[int, int]:
        return frozen_weight_bytes(m, tr, params, [(c.start, c.stop) for c in chunks], first)

    def last_layer(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> LayerActivations:
        """The last layer's class (`parts` has every class)."""
        check_layout(m, par.tensor, par.expert, par.expert_tensor)
        last = class_activations(m, w, tr, last_class(m))
        return LayerActivations(attention=last.attention, mlp=last.mlp, norm=last.norm)

    def parts(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> Gemma4Parts:
        check_layout(m, par.tensor, par.expert, par.expert_tensor)
        return parts(m, w, tr)

    def head_extra(self, m: ModelConfig, w: Workload, tr: Training, eager: bool) -> tuple[int, int]:
        """The per-layer input path on the first stage; under torch-eager the final norm's fp32 tensors too."""
        return head_first(m, w, tr), final_norm_delta(m, w, tr) if eager else 0

    def last_attention_widths(self, m: ModelConfig, hd: int, v_dim: int, kv_t: int) -> tuple[int, int, int]:
        """The last layer's class: its own head width and K/V heads (T = 1)."""
        last = last_class(m)
        width = m.kind_head_dim(last.kind)
        return width, width, m.kv_heads_of(last.kind)

    def block_params(self, m: ModelConfig, shard: ShardParams) -> tuple[int, int]:
        """The largest layer class (full layers are wider); the first layer's class."""
        largest = max(class_params(m, c) for c in layer_classes(m))
        return largest, class_params(m, LayerClass(m.attention_pattern[0], m.first_kv_shared_layer == 0))


LAYERS = Gemma4Layers()
