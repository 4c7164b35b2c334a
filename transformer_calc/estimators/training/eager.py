"""The `torch-eager` activation profile (docs/formulas.md §2.4): tensor by tensor, what eager PyTorch
running the transformers modeling code saves for backward, validated against saved_tensors_hooks
measurements (tools/crosscheck/activations.py, docs/validation.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from transformer_calc.estimators.params import check_tensor_parallel, kv_heads_per_rank
from transformer_calc.estimators.training.latent_moe import combine_input_elements
from transformer_calc.estimators.training.trainable import head_trained
from transformer_calc.estimators.training.support import check_hybrid_training
from transformer_calc.estimators.training.layer_activations import (
    LayerActivations,
    GATED_MLP_SAVED,
    LOSS_BYTES,
    MASK_BYTES,
    OUTPUT_GATE_SAVED,
    PLAIN_MLP_SAVED,
    SOFTMAX_STAT_BYTES,
    ceil_div,
)
from transformer_calc.model.config import (
    CrossEntropy,
    MLPKind,
    ModelConfig,
    NormKind,
    Parallelism,
    Positional,
    Recompute,
    Training,
    Workload,
)


# ---------------------------------------------------------------------------- torch-eager profile
# What eager PyTorch keeps for backward when it runs the transformers 5.23 modeling code, tensor by
# tensor: every tensor an autograd node saves, once per storage (views share one), parameters
# excluded. Read from models/{gpt2,llama}/modeling_*.py, activations.py, loss/loss_utils.py and
# the autograd formulas (tools/autograd/derivatives.yaml); checked against
# torch.autograd.graph.saved_tensors_hooks by tools/crosscheck/activations.py (docs/validation.md).
# Dropout is CUDA's: F.dropout dispatches to the fused native_dropout, which keeps a torch.bool
# mask (ATen Dropout.cpp, is_fused_kernel_acceptable); on CPU dropout is bernoulli_ * input and
# keeps a p-byte mask instead.
FP32_BYTES = 4  # upcast copies: the RMSNorm input, the softmax and the loss's log-softmax
STAT_BYTES = 4  # LayerNorm's mean and rstd, RMSNorm's rsqrt: one fp32 per token (CUDA's acc type)
INDEX_BYTES = 8  # int64 token ids (kept by the embedding) and loss targets
LOSS_SCALAR_BYTES = 4  # cross_entropy's total_weight, one fp32 scalar
GELU_NEW_EXTRA = 3  # NewGELUActivation (activations.py): tanh(u), 0.5·x and 1 + tanh(u), F wide each
QKV_OPERANDS = 3  # q, k, v as the two batched matmuls take them: contiguous, A heads each


@dataclass(frozen=True)
class EagerCode:
    """The choices of the eager code that a ModelConfig does not fix (torch-eager profile).

    softmax_fp32  softmax(scores, dtype=torch.float32).to(dtype): the Llama-derived
                  eager_attention_forward (Llama, Mistral, Qwen2, Gemma, GPT-NeoX, OPT, Phi);
                  GPT-2's runs in the input dtype. Only matters below fp32.
    act_extra     F-wide tensors the MLP activation saves beyond the one a fused kernel keeps
                  (F.gelu, F.silu, F.relu: 0; GPT-2's default gelu_new, written out in Python: 3).
    attn_dropout, resid_dropout, embed_dropout
                  where the code has dropout modules (masks exist only there, and only when the
                  model's dropout is on): GPT-2 all three; Llama only on the attention weights.
    """

    name: str
    softmax_fp32: bool = True
    act_extra: int = 0
    attn_dropout: bool = True
    resid_dropout: bool = True
    embed_dropout: bool = True


HF_LLAMA = EagerCode("hf-llama", softmax_fp32=True, resid_dropout=False, embed_dropout=False)
HF_GPT2 = EagerCode("hf-gpt2", softmax_fp32=False, act_extra=GELU_NEW_EXTRA)  # gelu_new
HF_GPT2_EXACT_GELU = replace(HF_GPT2, name="hf-gpt2 (gelu)", act_extra=0)  # activation_function: gelu


def eager_code(m: ModelConfig) -> EagerCode:
    """The eager code tcalc assumes for a ModelConfig.

    Learned absolute positions with LayerNorm and no position offset is the GPT-2 layout (HF
    GPT-2; tcalc's gpt2 and gpt3 presets): HF_GPT2. Its activation follows `activation_impl`
    (set from a Hugging Face config and by the GPT-2/GPT-3 presets): gelu_new, HF GPT-2's default
    and the assumption when it is not known, is written out in Python and keeps 3·p·F more bytes
    per token and layer than a fused kernel (exact gelu, gelu_pytorch_tanh). Everything else:
    HF_LLAMA.
    """
    gpt2_layout = (
        m.positional is Positional.learned and m.norm is NormKind.layernorm and m.position_offset == 0
    )
    if not gpt2_layout:
        return HF_LLAMA
    if m.mlp is MLPKind.gelu and m.activation_impl in (None, "gelu_new"):
        return HF_GPT2
    if m.mlp is MLPKind.gelu and m.activation_impl == "gelu":
        return HF_GPT2_EXACT_GELU
    return replace(HF_GPT2, name=f"hf-gpt2 ({m.activation_impl or m.mlp.value})", act_extra=0)


def _eager_norm(m: ModelConfig, p: int, tokens: int, frozen: bool = False) -> int:
    """Bytes one norm keeps for backward over `tokens` tokens (its output is the next op's input,
    counted there). `frozen`: the norm's weight gets no gradient (adapters)."""
    D = m.d_model
    if m.norm is NormKind.rmsnorm:
        # LlamaRMSNorm: x.to(float32) (kept by pow(2) and by x * rsqrt; the input itself in fp32),
        # rsqrt(mean(x²) + eps) (kept by that product), the normalized x cast back to p bytes (kept
        # by weight * x for the weight's gradient: not when the weight is frozen; without a weight
        # the next matmul keeps it).
        keeps_normalized = m.norm_affine and not frozen
        return FP32_BYTES * tokens * D + STAT_BYTES * tokens + (p * tokens * D if keeps_normalized else 0)
    # torch.layer_norm keeps its input, mean and rstd (fp32 on CUDA; CPU keeps them in p bytes)
    return p * tokens * D + 2 * STAT_BYTES * tokens


def torch_eager_layer(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, code: EagerCode, moe: bool | None = None
) -> LayerActivations:
    """Per-layer bytes eager PyTorch keeps (docs/formulas.md §2.4). T=1, no dropout, per token:

        norms  2·(p·D + 8) LayerNorm  |  2·(4·D + 4 + p·D) RMSNorm
        attn   p·D + 3·p·A·h_d + s·A·S + [p·A·S if s != p] + p·A·h_d      (s = 4 or p, softmax)
        mlp    p·D + (2 + act_extra)·p·F  (ReLU 1·p·F: it keeps its output)  |  gated 4·p·F

    Dropout on adds the masks (1 byte) where `code` has dropout, and the dropped-out attention
    weights (p·A·S) that the P·V matmul keeps. Sharding under T/SP as in the default profile.

    Longer than 60 lines on purpose: one term per saved tensor in the modeling code's forward order,
    each with its comment, as the saved_tensors_hooks measurement lists them; split, the order that
    makes it checkable against the measurement would be lost.
    """
    check_hybrid_training(m, tr)
    B, S, D, A, T, p = w.batch_size, w.seq_len, m.d_model, m.n_heads, par.tensor, tr.p
    moe = m.is_moe if moe is None else moe
    hd, kv = m.head_dim, m.n_kv_heads
    F = m.moe_d_ff if moe else m.d_ff
    F_t = F // (par.expert_tensor_size if moe else T)
    k_exp = m.experts_per_token if moe else 1
    check_tensor_parallel(m, T, par.expert, par.expert_tensor)
    S_rep = ceil_div(S, T) if par.sequence_parallel else S
    if tr.recompute is Recompute.full:
        return LayerActivations(attention=0, mlp=0, norm=p * B * S_rep * D)  # the block input
    dropout = tr.dropout if tr.dropout is not None else m.dropout > 0
    attn_mask = MASK_BYTES if dropout and code.attn_dropout else 0
    resid_mask = MASK_BYTES if dropout and code.resid_dropout else 0
    A_t, kv_t = A // T, kv_heads_per_rank(kv, T)
    shared_input = m.parallel_attn and m.norms_per_layer == 1

    attn = p * B * S_rep * D  # input of the QKV projection(s) (the norm output)
    if tr.flash:
        # SDPA takes q, k, v as projected (k, v at n_kv heads); the kernel keeps its output and an
        # fp32 logsumexp per query row and head (Dao et al. 2022).
        attn += p * B * S * (A_t + 2 * kv_t) * hd
        core = p * B * S * A_t * hd + SOFTMAX_STAT_BYTES * B * A_t * S
    else:
        # matmul copies its transposed operands contiguous (q; k^T for GPT-2) and repeat_kv expands
        # k and v to A heads (GQA saves no activation memory in eager attention)
        attn += QKV_OPERANDS * p * B * S * A_t * hd
        softmax_bytes = FP32_BYTES if code.softmax_fp32 else p
        core = softmax_bytes * B * A_t * S * S  # softmax output (its backward needs it)
        if attn_mask or softmax_bytes != p:
            core += p * B * A_t * S * S  # weights as P·V takes them: dropped out and/or cast back
        core += attn_mask * B * A_t * S * S  # the dropout mask (torch.bool)
    if m.qk_norm:
        attn += p * B * S * (A_t + kv_t) * hd  # q and k after their norms (not measured)
    if tr.recompute is Recompute.selective:
        core = 0  # rebuilt in backward (Korthikanti sec. 5)
    attn += core
    attn += p * B * S * A_t * hd  # W_O input (attention output made contiguous)
    if m.attn_output_gate:
        attn += OUTPUT_GATE_SAVED * p * B * S * A_t * hd  # sigmoid(gate) and the output it gates
    attn += resid_mask * B * S_rep * D

    mlp = 0 if shared_input else p * B * S_rep * D  # input of W_up (and W_gate)
    if m.gated_mlp:
        n_wide = GATED_MLP_SAVED  # act input (gate), act(gate), up, product (W_down input)
    elif m.mlp is MLPKind.relu:
        n_wide = 1  # relu keeps its output, which is W_down's input
    else:
        n_wide = PLAIN_MLP_SAVED  # act input (kept by F.gelu) and act output (W_down input)
    mlp += k_exp * (n_wide + code.act_extra) * p * B * S * F_t
    if moe:  # as in the default profile (not measured)
        mlp += k_exp * p * B * S * m.expert_d + p * B * S * m.n_experts
        mlp += p * combine_input_elements(m, B, S)  # LatentMoE: fc2_latent_proj's ℓ-wide input
        if m.shared_expert_d_ff:
            mlp += (n_wide + code.act_extra) * p * B * S * (m.shared_expert_d_ff // T)
    mlp += resid_mask * B * S_rep * D

    norm = m.norms_per_layer * _eager_norm(m, p, B * S_rep, frozen=tr.adapters)
    return LayerActivations(attention=attn, mlp=mlp, norm=norm)


def torch_eager_head(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, code: EagerCode
) -> tuple[int, int]:
    """(first-stage, last-stage) bytes outside the blocks that eager PyTorch keeps.

    First: token ids (int64, kept by the embedding), position ids (int64, (1, S)) for learned
    positions or RoPE's cos and sin ((1, S, h_d), computed once and shared by every layer), the
    embedding dropout mask. Last: the final norm, the LM head input, and the loss: HF's
    ForCausalLMLoss casts the logits to fp32 and log_softmax keeps its fp32 output (4·B·S·V; the
    logits themselves are kept by nobody), nll_loss the shifted int64 targets and a scalar.
    """
    B, S, D, T, p = w.batch_size, w.seq_len, m.d_model, par.tensor, tr.p
    S_rep = ceil_div(S, T) if par.sequence_parallel else S
    dropout = tr.dropout if tr.dropout is not None else m.dropout > 0
    # the token ids, kept by the embedding for its weight's gradient (not when it is frozen)
    first = INDEX_BYTES * B * S if not tr.adapters or tr.train_embeddings else 0
    if m.positional is Positional.learned:
        first += INDEX_BYTES * S if not tr.adapters else 0  # position ids (the table is frozen under adapters)
    elif m.positional is Positional.rotary:
        first += 2 * p * S * m.head_dim
    if dropout and code.embed_dropout:
        first += MASK_BYTES * B * S_rep * D
    last = _eager_norm(m, p, B * S_rep, frozen=tr.adapters) if m.final_norm else 0
    last += p * B * S_rep * D if head_trained(m, tr) else 0  # LM head input (for its weight gradient)
    if tr.loss_kernel is not CrossEntropy.chunked:
        last += LOSS_BYTES * B * S * ceil_div(m.vocab_size, T)
    last += INDEX_BYTES * B * S + LOSS_SCALAR_BYTES
    return first, last
