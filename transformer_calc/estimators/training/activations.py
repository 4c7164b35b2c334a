"""Activations one layer keeps for backward, for one micro-batch on one GPU, by convention: the
Korthikanti et al. 2022 terms per tensor (`layer_activations`), the mixers' own bytes
(`mixer_activations`), the output head's (`head_activations`), and the parts of a block
(`block_parts`). Sources and conventions: estimators/training/memory.py's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from transformer_calc.estimators.attention import STANDARD, attention_block
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.params import check_tensor_parallel, kv_heads_per_rank
from transformer_calc.estimators.training.eager import (
    EagerCode,
    eager_code,
    torch_eager_head,
    torch_eager_layer,
)
from transformer_calc.estimators.training.latent_moe import combine_input_elements
from transformer_calc.estimators.training.hybrid_layers import mixer_layer_input
from transformer_calc.estimators.training.trainable import head_trained
from transformer_calc.estimators.training.layer_structure import layer_structure
from transformer_calc.estimators.training.support import check_hybrid_training
from transformer_calc.estimators.training.layer_activations import (
    LayerActivations,
    FUSED_SWIGLU_SAVED,
    GATED_MLP_SAVED,
    LOSS_BYTES,
    MASK_BYTES,
    OUTPUT_GATE_SAVED,
    PLAIN_MLP_SAVED,
    SOFTMAX_STAT_BYTES,
    ceil_div,
)
from transformer_calc.model.config import (
    ATTENTION_KINDS,
    ActivationProfile,
    CrossEntropy,
    FP8Recipe,
    Framework,
    LayerAttention,
    MLPKind,
    ModelConfig,
    Parallelism,
    Recompute,
    Training,
    Workload,
)

if TYPE_CHECKING:  # Gemma 4's module only for a Gemma 4 model (issue 39)
    from transformer_calc.estimators.training import gemma4


def layer_activations(
    m: ModelConfig,
    w: Workload,
    tr: Training,
    par: Parallelism = Parallelism(),
    *,
    eager: EagerCode | None = None,
    moe: bool | None = None,
) -> LayerActivations:
    """Per-layer activation bytes on one GPU (seed eqs. att_actmem_vanilla, mlp_actmem_vanilla,
    act_mem_attn_mlp; Korthikanti et al. 2022 Table 2 for SP and recompute).

    With p = 2, E = 4, MHA and dropout on, `seed` and `default` agree with Korthikanti's Table 2:
    sbh(34 + 5as/h); TP: sbh(10 + 24/t + 5as/(ht)); TP+SP: sbh/t (34 + 5as/h); selective +
    TP+SP: 34 sbh/t; full recompute: 2 sbh (sharded by t with SP).

    The torch-eager profile is `torch_eager_layer` (`eager`: the code's choices, default
    `eager_code(m)`); the other profiles ignore `eager`.
    """
    check_hybrid_training(m, tr)
    moe = m.is_moe if moe is None else moe
    if tr.recompute is Recompute.op:
        from transformer_calc.estimators.flops import check_op_recompute

        check_op_recompute(m, tr.recompute, flash=tr.flash, adapters=bool(tr.adapters))
        return _op_layer_activations(m, w, tr, par)
    last = layer_structure(m).last_layer(m, w, tr, par)  # layers that differ by class: the last layer's
    if last is not None:
        return last
    if tr.activations is ActivationProfile.torch_eager:
        if tr.fp8_recipe is not FP8Recipe.none:
            raise ValueError("fp8_recipe is a Transformer Engine recipe; the torch-eager profile models eager "
                             "PyTorch: use --activations default")
        code = eager or eager_code(m)
        acts = _with_adapters(torch_eager_layer(m, w, tr, par, code, moe=moe), m, w, tr, par, moe, code)
    else:
        acts = _with_fp8(_with_adapters(_layer_activations(m, w, tr, par, moe), m, w, tr, par, moe, None), m, w, tr, par, moe)
    full = layer_structure(m).attention_bytes(m, w, tr, par, LayerAttention.full)
    if full is not None:  # attention shaped by its kind: a full layer's (block_parts has each kind's)
        acts = replace(acts, attention=full)
    return acts


def _op_layer_activations(m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> LayerActivations:
    """What torchtitan's per-op selective AC keeps of one block (`--recompute op`).

    torchtitan/parallelisms/parallelize_llama.py (`_save_list`, `_custom_policy`): MUST_SAVE for
    the outputs of aten.mm except every second one, of SDPA (flash or memory-efficient: output and
    logsumexp) and of reduce_scatter_tensor; everything else is recomputed from the block input,
    which the checkpoint wrapper keeps. In a Llama block's forward order (wq, wk, wv, wo, w1, w3,
    w2; plain MLP: fc1, fc2) the saved matmul outputs are q, v, w1 x and w2's (gated), or q, v,
    fc1 x (plain). Under TP with SP the row-parallel outputs are reduce-scattered and those
    S/T-token outputs are kept too. The same for every profile (the policy names ops, not modules).
    """
    B, S, D, A, T, p = w.batch_size, w.seq_len, m.d_model, m.n_heads, par.tensor, tr.p
    check_tensor_parallel(m, T, par.expert, par.expert_tensor)
    S_rep = ceil_div(S, T) if par.sequence_parallel else S
    hd, A_t, kv_t = m.head_dim, A // T, kv_heads_per_rank(m.n_kv_heads, T)
    F_t = m.d_ff // T
    reduce_scattered = p * B * S_rep * D if T > 1 and par.sequence_parallel else 0
    attn = p * B * S * (A_t + kv_t) * hd  # wq and wv outputs (mm 1 and 3)
    attn += p * B * S * A_t * m.v_dim + SOFTMAX_STAT_BYTES * B * A_t * S  # SDPA output and logsumexp
    attn += reduce_scattered  # after wo (mm 4: recomputed)
    mlp = p * B * S * F_t  # w1 / fc1 output (mm 5)
    if m.gated_mlp:
        mlp += p * B * S * D  # w2 output (mm 7; a partial sum per rank under TP)
    mlp += reduce_scattered
    return LayerActivations(attention=attn, mlp=mlp, norm=p * B * S_rep * D)  # the block input


def _with_fp8(acts: LayerActivations, m: ModelConfig, w: Workload, tr: Training, par: Parallelism, moe: bool) -> LayerActivations:
    """The block's activations with GEMM inputs saved in FP8 (fp8.activation_delta)."""
    if tr.fp8_recipe is FP8Recipe.none or tr.recompute is Recompute.full:
        return acts
    from transformer_calc.estimators.training.fp8 import activation_delta as fp8_delta

    S_rep = ceil_div(w.seq_len, par.tensor) if par.sequence_parallel else w.seq_len
    attn, mlp = fp8_delta(m, w.batch_size, w.seq_len, S_rep, tr, par, moe, flash=tr.flash)
    return LayerActivations(attention=acts.attention + attn, mlp=acts.mlp + mlp, norm=acts.norm)


def _with_adapters(
    acts: LayerActivations, m: ModelConfig, w: Workload, tr: Training, par: Parallelism, moe: bool, code: EagerCode | None
) -> LayerActivations:
    """The block's activations under LoRA/QLoRA/DoRA (finetune.activation_delta): frozen matrices'
    inputs dropped, the adapters' rank-r intermediates (and DoRA's outputs) added."""
    if not tr.adapters or tr.recompute is Recompute.full:
        return acts
    from transformer_calc.estimators.training.finetune import activation_delta

    S_rep = ceil_div(w.seq_len, par.tensor) if par.sequence_parallel else w.seq_len
    eager = code is not None
    delta = activation_delta(
        m, w.batch_size, w.seq_len, S_rep, tr, par, moe,
        # FlashAttention keeps its output, which is W_O's input (default profile; eager SDPA's
        # contiguous copy for W_O is a separate tensor)
        o_input_is_output=tr.flash and not eager,
        # ReLU's backward reads its output, which is W_down's input (torch-eager's ReLU MLP)
        down_input_needed=eager and m.mlp is MLPKind.relu,
    )
    return LayerActivations(attention=acts.attention + delta.attention, mlp=acts.mlp + delta.mlp, norm=acts.norm)


def _layer_activations(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, moe: bool) -> LayerActivations:
    """One block's stored bytes under the seed and default profiles (`layer_activations`' conventions).

    Longer than 60 lines on purpose: the house bar (STYLE.md) — the paper's letters on the first line,
    then one term per tensor with its comment and citation, in the block's forward order."""
    B, S, D, A, T, p = w.batch_size, w.seq_len, m.d_model, m.n_heads, par.tensor, tr.p
    seed = tr.activations is ActivationProfile.seed
    check_tensor_parallel(m, T, par.expert, par.expert_tensor)
    # Replicated under plain TP, sharded along the sequence with SP (Korthikanti sec. 4.2.2).
    S_rep = ceil_div(S, T) if par.sequence_parallel else S
    if tr.recompute is Recompute.full:
        # Only the block input is kept; the block is recomputed in backward.
        return LayerActivations(attention=0, mlp=0, norm=p * B * S_rep * D)
    dropout = True if seed else (tr.dropout if tr.dropout is not None else m.dropout > 0)
    mask = MASK_BYTES if dropout else 0
    if seed:  # MHA with head width D/A, 2-matrix MLP of width E*D, two norms
        hd, kv, F, gated, k_exp, qk_norm, shared_input, norms = D // A, A, m.d_ff, False, 1, False, False, 2
    else:
        hd, kv, gated = m.head_dim, m.n_kv_heads, m.gated_mlp
        F = m.moe_d_ff if moe else m.d_ff
        k_exp = m.experts_per_token if moe else 1
        qk_norm, norms = m.qk_norm, m.norms_per_layer
        shared_input = m.parallel_attn and m.norms_per_layer == 1  # one norm feeds both branches
    A_t, kv_t = A // T, kv_heads_per_rank(kv, T)

    # Attention: input, q, k, v, (normed q, k), core, re-weighted output, output dropout mask.
    attn = p * B * S_rep * D  # input to the QKV projection (the norm's output)
    # q, k, v as its attention block keeps them (MLA: its latents too, attention.py); the seed's MHA is standard
    qkv, kv_t = (STANDARD if seed else attention_block(m)).stored_qkv(m, hd, A_t, kv_t)
    attn += p * B * S * qkv
    if qk_norm:
        attn += p * B * S * (A_t + kv_t) * hd  # q and k after their norms
    if tr.recompute is Recompute.selective:
        core = 0  # QK^T, softmax, dropout and x V are recomputed (Korthikanti sec. 5)
    elif tr.flash:
        core = SOFTMAX_STAT_BYTES * B * A_t * S  # logsumexp per query and head; masks regenerated
    else:
        core = (2 * p + mask) * B * A_t * S * S  # scores, softmax output, dropout mask
    attn += core
    attn += p * B * S * A_t * (hd if seed else m.v_dim)  # re-weighted values, the input to W_O
    if not seed and m.attn_output_gate:
        attn += OUTPUT_GATE_SAVED * p * B * S * A_t * m.v_dim  # sigmoid(gate) and the output it gates
    attn += mask * B * S_rep * D  # dropout after W_O

    # MLP: input, F-wide intermediates (per routed expert), dropout mask; MoE router logits.
    n_saved = GATED_MLP_SAVED if gated else PLAIN_MLP_SAVED
    if gated and not seed and tr.framework is Framework.megatron:
        n_saved = FUSED_SWIGLU_SAVED  # megatron/core/fusions/fused_bias_swiglu.py keeps its input
    mlp = 0 if shared_input else p * B * S_rep * D
    F_t = F // (par.expert_tensor_size if moe else T)
    mlp += k_exp * n_saved * p * B * S * F_t
    if not seed and moe:
        mlp += k_exp * p * B * S * m.expert_d  # the routed (permuted) copies each expert keeps as input
        mlp += p * B * S * m.n_experts  # router logits (softmax/top-k input)
        mlp += p * combine_input_elements(m, B, S)  # LatentMoE: fc2_latent_proj's ℓ-wide input (the combine)
        if m.shared_expert_d_ff:  # the shared expert reads the same input as the router
            mlp += n_saved * p * B * S * (m.shared_expert_d_ff // T)
    mlp += mask * B * S_rep * D

    norm = norms * p * B * S_rep * D  # each norm keeps its input
    return LayerActivations(attention=attn, mlp=mlp, norm=norm)


def mixer_activations(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, kind: LayerAttention, *, eager: EagerCode | None = None
) -> int:
    """The sequence-mixer part of one layer whose mixer is `kind` (a `mixers` kind), on one GPU.

    Its input (the norm's output, p·B·S·D, S/T with SP, as for attention) and what the mixer keeps
    beyond it: `MIXERS[kind].activation_bytes`, torch-eager under the torch-eager profile (what
    transformers' torch fallbacks save, measured), else the fused kernels' convention (fla,
    mamba_ssm, causal-conv1d; docs/formulas.md §2.10). With `mixer_beside_attention` (Falcon-H1)
    the layer's attention runs on the same input: its part is added, the input counted once.
    Full recomputation keeps only the block input (counted with the norms); selective
    recomputation rebuilds attention cores only (Megatron-core's "core_attn"), not mixers.
    """
    check_hybrid_training(m, tr)
    if tr.recompute is Recompute.full:
        return 0
    B, S, T, p = w.batch_size, w.seq_len, par.tensor, tr.p
    S_rep = ceil_div(S, T) if par.sequence_parallel else S
    fused = tr.activations is not ActivationProfile.torch_eager
    mixed = MIXERS[kind].activation_bytes(m, B, S, p, T, fused)
    if tr.adapters:  # frozen projections' inputs dropped, the adapters' tensors added (finetune.py)
        from transformer_calc.estimators.training.finetune import mixer_activation_delta

        mixed += mixer_activation_delta(m, kind, B, S, S_rep, tr, par, fused=fused)
    if tr.fp8_recipe is not FP8Recipe.none:  # in_proj / out_proj inputs kept in FP8 (fp8.py)
        from transformer_calc.estimators.training.fp8 import mixer_activation_delta as fp8_mixer_delta

        mixed += fp8_mixer_delta(m, kind, B, S, S_rep, tr, par, fused=fused)

    def attention() -> int:  # Falcon-H1's attention beside the mixer: its part counts the layer's input once
        return layer_activations(m, w, tr, par, eager=eager).attention

    return mixer_layer_input(m, attention, p * B * S_rep * m.d_model) + mixed  # hybrid_layers.py


@dataclass(frozen=True)
class BlockParts:
    """One layer's activations by part, for models whose layers differ (hybrids): the sequence
    mixer of each kind in the pattern (softmax attention, a `mixers` kind, none), the MLP of a MoE
    and of a dense layer, the norms (the same in every layer)."""

    sequence: dict[LayerAttention, int]
    moe_mlp: int
    dense_mlp: int
    norm: int

    def chunk(self, m: ModelConfig, start: int, stop: int) -> LayerActivations:
        """The sum over layers [start, stop): each kind's count times its part (closed forms)."""
        n_moe = m.n_moe_layers(start, stop)
        n_dense = (stop - start) - n_moe - m.n_channel_free_layers(start, stop)
        seq = sum(m.n_attention_layers(k, start, stop) * b for k, b in self.sequence.items())
        return LayerActivations(attention=seq, mlp=n_moe * self.moe_mlp + n_dense * self.dense_mlp,
                                norm=(stop - start) * self.norm)

    @property
    def largest(self) -> int:
        """The largest block (its sequence mixer and its MLP): what full recomputation rebuilds."""
        return max(self.sequence.values()) + max(self.moe_mlp, self.dense_mlp) + self.norm


def block_parts(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, *, eager: EagerCode | None = None
) -> BlockParts | gemma4.Gemma4Parts:
    """The parts of `BlockParts` for the model's layer pattern (hybrid or not); the layer classes of a
    model whose layers differ by class (training/layer_structure.py)."""
    check_hybrid_training(m, tr)
    classes = layer_structure(m).parts(m, w, tr, par)
    if classes is not None:
        return classes
    moe = layer_activations(m, w, tr, par, eager=eager)
    dense = layer_activations(m, w, tr, par, eager=eager, moe=False) if m.is_moe else moe
    sequence: dict[LayerAttention, int] = {}
    structure = layer_structure(m)
    for kind in dict.fromkeys(m.attention_pattern):
        if kind in ATTENTION_KINDS:
            own = structure.attention_bytes(m, w, tr, par, kind)  # MiMo-V2-Flash: each kind's own
            sequence[kind] = moe.attention if own is None else own
        elif kind is LayerAttention.none:
            sequence[kind] = 0  # Nemotron-H's MLP block: no sequence mixer
        else:
            sequence[kind] = mixer_activations(m, w, tr, par, kind, eager=eager)
    return BlockParts(sequence=sequence, moe_mlp=moe.mlp, dense_mlp=dense.mlp, norm=moe.norm)


def head_activations(
    m: ModelConfig,
    w: Workload,
    tr: Training,
    par: Parallelism = Parallelism(),
    *,
    eager: EagerCode | None = None,
) -> tuple[int, int]:
    """(first-stage, last-stage) bytes outside the blocks that the seed drops as O(V/DL).

    First stage: the embedding dropout mask. Last stage: the final norm's input, the LM head's
    input, and the loss's fp32 softmax over the (vocabulary-parallel) logits, 4·B·S·V/T. Zero
    under the seed profile or with head_activations off. torch-eager: `torch_eager_head`.
    """
    if tr.activations is ActivationProfile.seed or not tr.head_activations:
        return 0, 0
    if tr.activations is ActivationProfile.torch_eager:
        first, last = torch_eager_head(m, w, tr, par, eager or eager_code(m))
        extra_first, extra_last = layer_structure(m).head_extra(m, w, tr, eager=True)
        return first + extra_first, last + extra_last
    B, S, D, T, p = w.batch_size, w.seq_len, m.d_model, par.tensor, tr.p
    S_rep = ceil_div(S, T) if par.sequence_parallel else S
    dropout = tr.dropout if tr.dropout is not None else m.dropout > 0
    first = (MASK_BYTES * B * S_rep * D) if dropout else 0
    last = (p * B * S_rep * D if m.final_norm else 0) + (p * B * S_rep * D if head_trained(m, tr) else 0)
    if tr.loss_kernel is not CrossEntropy.chunked:  # chunked CE keeps no B·S·V tensor
        last += LOSS_BYTES * B * S * ceil_div(m.vocab_size, T)
    first += layer_structure(m).head_extra(m, w, tr, eager=False)[0]  # per-layer inputs (Gemma 4)
    return first, last


def b_min(m: ModelConfig, S: int) -> float:
    """Seed eq. (min_mp_batch_size): the micro-batch above which mixed precision saves memory,
    B_min = 6 D^2 / (8 D S + A S^2) (E = 4, Adam, no parallelism)."""
    D, A = m.d_model, m.n_heads
    return 6 * D * D / (8 * D * S + A * S * S)
