"""Training memory per GPU: weights, gradients, optimizer states and activations.

Sources: seed notes 003, Part "Training", sec. "Memory" (mixed precision: M_model = 2N,
M_grad = 4N, M_optim = 12N; activations per layer: attention BS((5p+1)D + (2p+1)AS), MLP
(2Ep+p+1)BSD, LayerNorm 2pBSD; tensor- and sequence-parallel forms), Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models", Table 2 and sec. 5: sequence
parallelism, selective and full recomputation), Rajbhandari et al. 2020 (ZeRO stages 1-3),
Narayanan et al. 2021 (1F1B pipeline schedule), Dao et al. 2022 (FlashAttention stores no S x S
matrix, only softmax statistics).

Conventions (docs/formulas.md "Training memory" has the tables and worked examples):
- Bytes are exact ints. A micro-batch is B sequences of S tokens on one data-parallel replica.
- Model states follow the seed: in mixed precision the fp32 master copy is counted with the
  optimizer (12 bytes/parameter for Adam), gradients are 4 bytes unless `grad_bytes` says 2.
- Activations count the inputs each operation keeps for its backward pass, p bytes per element,
  dropout masks 1 byte per element (torch.bool) and only when dropout is on.
- The `torch-eager` profile (docs/formulas.md §2.4) instead counts, tensor by tensor, what eager
  PyTorch running the transformers modeling code saves for backward (validated against
  saved_tensors_hooks measurements: tools/crosscheck/activations.py, docs/validation.md).
- Pipeline: 1F1B keeps up to P micro-batches in flight on the first stage (P - s on stage s,
  assuming at least P micro-batches per step); embedding on the first stage, final norm and head
  on the last. The report is for the most loaded stage.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError

from transformer_calc.estimators.mixers import MIXERS, require_attention_only, require_training_priced
from dataclasses import dataclass, replace

from transformer_calc.model.config import (
    ATTENTION_KINDS,
    MASTER_COPY_BYTES,
    CPCommType,
    ActivationProfile,
    CrossEntropy,
    FP8Recipe,
    Framework,
    LayerAttention,
    MLPKind,
    ModelConfig,
    NormKind,
    Offload,
    Optimizer,
    Parallelism,
    PipelineSchedule,
    Positional,
    Precision,
    Recompute,
    Training,
    Workload,
)
from transformer_calc.estimators.training import gemma4, kind_attention
from transformer_calc.estimators.training.layer_activations import LayerActivations
from transformer_calc.estimators.training.finetune import LayerCounts, head_trained, layer_counts
from transformer_calc.estimators.training.optimizers import SHAPED
from transformer_calc.estimators.training.schedules import PARAMETER_COPIES, forwards_in_flight
from transformer_calc.estimators.params import check_tensor_parallel, kv_heads_per_rank, shard_params

MASK_BYTES = 1  # a torch.bool dropout mask element (seed: "one byte of memory per element")
SOFTMAX_STAT_BYTES = 4  # FlashAttention keeps one fp32 logsumexp per query row and head
LOSS_BYTES = 4  # the cross-entropy keeps an fp32 softmax over the vocabulary (Megatron upcasts logits)
PLAIN_MLP_SAVED = 2  # pre-activation and activation output, F wide each (seed "MLP Activations")
GATED_MLP_SAVED = 4  # gate pre-activation, act(gate), up projection, their product (input to W_down)
FUSED_SWIGLU_SAVED = 3  # Megatron-core's fused SwiGLU: its [gate | up] input (2F) and W_down's input (F)
OUTPUT_GATE_SAVED = 2  # Qwen3-Next's gated attention output: sigmoid(gate) and the output it multiplies

def optimizer_bytes_per_param(tr: Training) -> int:
    """Optimizer memory per parameter: states (+ the fp32 master copy in mixed precision), for the
    optimizers whose bytes do not depend on shapes.

    Seed eq. (optimizer_states_mem_mp): Adam in mixed precision keeps 12 bytes/parameter: 4 for
    the master copy, 4 + 4 for the two moments. In fp32 (eq. optimizer_states_mem_no_mp) 8.
    Pure bf16 keeps states in 2 bytes and no master copy. Adafactor, Muon and the 8-bit AdamWs
    depend on the tensors' shapes (transformer_calc/estimators/training/optimizers.py); for them this is the master
    copy plus the nominal per-element states (Adafactor 0, Muon 1, 8-bit 2 one-byte), and the
    memory itself is computed tensor by tensor.
    """
    from transformer_calc.estimators.training.optimizers import EIGHT_BIT, STATES, state_bytes

    master = MASTER_COPY_BYTES if tr.precision is Precision.mixed else 0
    if tr.optimizer in EIGHT_BIT:
        return master + 2
    nominal = {Optimizer.adafactor: 0, Optimizer.muon: 1}
    states = STATES[tr.optimizer] if tr.optimizer in STATES else nominal[tr.optimizer]
    return master + states * state_bytes(tr)


# ---------------------------------------------------------------------------- activations
def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


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
    if gemma4.is_gemma4(m):  # varied layers: the last layer's class (block_parts has every class)
        gemma4.check_layout(m, par.tensor, par.expert, par.expert_tensor)
        last = gemma4.class_activations(m, w, tr, gemma4.last_class(m))
        return LayerActivations(attention=last.attention, mlp=last.mlp, norm=last.norm)
    if tr.activations is ActivationProfile.torch_eager:
        if tr.fp8_recipe is not FP8Recipe.none:
            raise ValueError("fp8_recipe is a Transformer Engine recipe; the torch-eager profile models eager "
                             "PyTorch: use --activations default")
        code = eager or eager_code(m)
        acts = _with_adapters(torch_eager_layer(m, w, tr, par, code, moe=moe), m, w, tr, par, moe, code)
    else:
        acts = _with_fp8(_with_adapters(_layer_activations(m, w, tr, par, moe), m, w, tr, par, moe, None), m, w, tr, par, moe)
    if kind_attention.shaped_by_kind(m):  # MiMo-V2-Flash: a full layer's attention (block_parts has each kind's)
        acts = replace(acts, attention=kind_attention.attention_bytes(m, w, tr, par, LayerAttention.full))
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
    if not seed and m.is_mla:
        # MLA (modeling_deepseek_v3.py): the latents, replicated on every TP rank, are kept twice
        # (the RMSNorm's input and the up-projection's input); the rotary key part once; then
        # per-head q and k of h_d = d_nope + d_rope and v of d_v.
        r_q, r_kv, rope = m.q_lora_rank or 0, m.kv_lora_rank or 0, m.qk_rope_head_dim or 0
        attn += p * B * S * (2 * r_q + 2 * r_kv + rope)
        attn += p * B * S * A_t * (2 * hd + m.v_dim)
        kv_t = A_t  # the score/attention shapes below are per query head
    else:
        attn += p * B * S * (A_t + 2 * kv_t) * hd  # q, k, v
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
        mlp += k_exp * p * B * S * D  # the routed (permuted) copies each expert keeps as input
        mlp += p * B * S * m.n_experts  # router logits (softmax/top-k input)
        if m.shared_expert_d_ff:  # the shared expert reads the same input as the router
            mlp += n_saved * p * B * S * (m.shared_expert_d_ff // T)
    mlp += mask * B * S_rep * D

    norm = norms * p * B * S_rep * D  # each norm keeps its input
    return LayerActivations(attention=attn, mlp=mlp, norm=norm)


def check_hybrid_training(m: ModelConfig, tr: Training) -> None:
    """Refuse, in one line each, the training estimates that do not price a hybrid model's mixers:
    the seed profile (the notes' attention-only equations), FP8 recipes and
    the optimizers whose states depend on each tensor's shape (no tensor inventory of the mixers); and,
    for every model, the parts no training estimate prices yet (`require_training_priced`)."""
    require_training_priced(m, "training memory")
    if kind_attention.shaped_by_kind(m):  # MiMo-V2-Flash
        kind_attention.check_training(m, tr)
    if gemma4.is_gemma4(m):
        gemma4.check_training(m, tr)
    if (gemma4.is_gemma4(m) or kind_attention.shaped_by_kind(m)) and tr.optimizer in SHAPED:
        raise TcalcError(f"optimizer {tr.optimizer.value} keeps states shaped per tensor, not listed for the varied "
                         f"layers of {m.name or 'this model'}; use adamw, adam, sgd or lion")
    if not (m.is_hybrid or m.one_mixer_per_layer or m.attn_output_gate):
        return
    if tr.activations is ActivationProfile.seed:
        kinds = ", ".join(MIXERS[k].name for k in m.mixer_kinds) or "hybrid"
        raise TcalcError(f"activations seed (the notes' equations) covers attention-only transformers, not the {kinds} "
                         f"layers of {m.name or 'this model'}; use --activations default or torch-eager")
    if tr.fp8_recipe is not FP8Recipe.none and (m.is_hybrid or m.one_mixer_per_layer):
        # Megatron-core runs Mamba-2's and Gated DeltaNet's in_proj/out_proj as Transformer Engine
        # linears (FP8 under the recipe), the conv and scan in bf16/fp32; fp8.py and precision.py price
        # the recipe per attention block (weight copies, scaling state, FP8-saved inputs, casts), not yet
        # per mixer layer
        kinds = ", ".join(MIXERS[k].name for k in m.mixer_kinds) or "one-mixer-per-layer"
        raise TcalcError(f"an FP8 recipe is not modeled for {kinds} layers yet (model {m.name or 'given'}): its "
                         "FP8 weight copies, scaling state and FP8-saved inputs are priced per attention block "
                         "only; use --fp8-recipe none")
    if tr.fp8_recipe is not FP8Recipe.none:
        require_attention_only(m, "an FP8 recipe")
    if tr.optimizer in SHAPED and not tr.adapters:  # under adapters the states are the adapters' (optimizers.py)
        require_attention_only(m, f"optimizer {tr.optimizer.value} (states shaped per tensor)")


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
    if m.mixer_beside_attention:  # the attention part already counts the shared input
        return layer_activations(m, w, tr, par, eager=eager).attention + mixed
    return p * B * S_rep * m.d_model + mixed


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
    """The parts of `BlockParts` for the model's layer pattern (hybrid or not); Gemma 4's layer classes."""
    if gemma4.is_gemma4(m):
        check_hybrid_training(m, tr)
        gemma4.check_layout(m, par.tensor, par.expert, par.expert_tensor)
        return gemma4.parts(m, w, tr)
    moe = layer_activations(m, w, tr, par, eager=eager)
    dense = layer_activations(m, w, tr, par, eager=eager, moe=False) if m.is_moe else moe
    sequence: dict[LayerAttention, int] = {}
    for kind in dict.fromkeys(m.attention_pattern):
        if kind in ATTENTION_KINDS and kind_attention.shaped_by_kind(m):  # MiMo-V2-Flash: each kind's own
            sequence[kind] = kind_attention.attention_bytes(m, w, tr, par, kind)
        elif kind in ATTENTION_KINDS:
            sequence[kind] = moe.attention
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
        if gemma4.is_gemma4(m):
            first, last = first + gemma4.head_first(m, w, tr), last + gemma4.final_norm_delta(m, w, tr)
        return first, last
    B, S, D, T, p = w.batch_size, w.seq_len, m.d_model, par.tensor, tr.p
    S_rep = ceil_div(S, T) if par.sequence_parallel else S
    dropout = tr.dropout if tr.dropout is not None else m.dropout > 0
    first = (MASK_BYTES * B * S_rep * D) if dropout else 0
    last = (p * B * S_rep * D if m.final_norm else 0) + (p * B * S_rep * D if head_trained(m, tr) else 0)
    if tr.loss_kernel is not CrossEntropy.chunked:  # chunked CE keeps no B·S·V tensor
        last += LOSS_BYTES * B * S * ceil_div(m.vocab_size, T)
    if gemma4.is_gemma4(m):  # the per-layer input path
        first += gemma4.head_first(m, w, tr)
    return first, last


def b_min(m: ModelConfig, S: int) -> float:
    """Seed eq. (min_mp_batch_size): the micro-batch above which mixed precision saves memory,
    B_min = 6 D^2 / (8 D S + A S^2) (E = 4, Adam, no parallelism)."""
    D, A = m.d_model, m.n_heads
    return 6 * D * D / (8 * D * S + A * S * S)


# ---------------------------------------------------------------------------- per GPU
@dataclass(frozen=True)
class StageMemory:
    """Memory of one GPU of one pipeline stage (bytes)."""

    stage: int
    n_layers: int
    params: int  # parameters held by this GPU before ZeRO sharding
    weights: int
    gradients: int
    optimizer: int
    attention: int
    mlp: int
    norm: int
    other: int  # embedding/head/loss activations (first and last stage)
    in_flight: int  # forwards whose activations are alive (1F1B: micro-batches; interleaved: model-chunk forwards)
    recompute_working: int = 0  # what recomputation rebuilds for one block during backward
    trainable: int | None = None  # parameters with gradients on this GPU before ZeRO (None: params)
    adapter_weights: int = 0  # of `weights`: the trainable parameters' copy (adapters, trained embedding/head)
    quantized_weights: int = 0  # of `weights`: the NF4 codes and constants (QLoRA)
    fp8_weights: int = 0  # of `weights`: FP8 weight copies (both usages) and scaling state
    host_weights: int = 0  # off the GPU (ZeRO-Infinity parameter offload): 16-bit parameter partition
    host_gradients: int = 0  # off the GPU (ZeRO-Offload): fp32 gradient partition
    host_optimizer: int = 0  # off the GPU (ZeRO-Offload): optimizer states and fp32 master

    @property
    def trainable_params(self) -> int:
        return self.params if self.trainable is None else self.trainable

    @property
    def offloaded(self) -> int:
        """Bytes this GPU's training keeps in host memory or on NVMe."""
        return self.host_weights + self.host_gradients + self.host_optimizer

    @property
    def stored(self) -> int:
        """Activations kept for backward (everything but the recomputation working set)."""
        return self.attention + self.mlp + self.norm + self.other

    @property
    def activations(self) -> int:
        return self.stored + self.recompute_working

    @property
    def model_states(self) -> int:
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> int:
        return self.model_states + self.activations


MAX_LISTED_STAGES = 64  # beyond this only the first and last stage are computed (the others
# hold no more layers, fewer micro-batches and no embedding or head: never the most loaded)


def stage_layers(L: int, P: int) -> list[int]:
    """Layers per stage, as even as possible (the first L mod P stages take one more)."""
    if P > L:
        raise ValueError(f"pipeline stages P ({P}) exceed n_layers ({L}); use P <= {L}")
    return [_layers_on_stage(L, P, s) for s in range(P)]


def _layers_on_stage(L: int, P: int, s: int) -> int:
    return L // P + (1 if s < L % P else 0)


# ---------------------------------------------------------------------------- pipelines as run
@dataclass(frozen=True)
class Chunk:
    """One model chunk (virtual stage) of one pipeline rank: blocks [start, stop), and whether it
    runs the embedding or the head and loss."""

    start: int
    stop: int
    embedding: bool = False
    head: bool = False

    @property
    def n_layers(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class PipelineStage:
    """Pipeline rank `stage`: its model chunks in chunk order (one without interleaving)."""

    stage: int
    chunks: tuple[Chunk, ...]

    @property
    def n_layers(self) -> int:
        return sum(c.n_layers for c in self.chunks)


def _uneven(par: Parallelism) -> bool:
    return (par.first_stage_layers is not None or par.last_stage_layers is not None
            or par.embedding_in_split or par.loss_in_split)  # fmt: skip


def pipeline_units(L: int, par: Parallelism) -> list[int]:
    """Units of the split per pipeline rank (blocks; with embedding_in_split / loss_in_split the
    embedding and the head+loss count as one unit each), checked as Megatron-core checks them.

    Source: megatron/core/transformer/transformer_config.py (TransformerConfig.__post_init__,
    "Uneven PP" and account_for_embedding/loss_in_pipeline_split) and transformer_layer.py
    (get_transformer_layer_offset):
    - first/last given (--decoder-first/last-pipeline-num-layers): those stages hold them, the
      middle stages split the rest evenly (it must divide); with v virtual stages v divides the
      first, the last and each middle stage's count. Not together with the accounting flags.
    - embedding/loss in the split: L + 1 (+ 1) units, divisible by P (by P·v when interleaved).
    - otherwise: tcalc's even split (the first L mod P stages take one more; Megatron itself needs
      P | L), P·v | L when interleaved.
    """
    P, v = par.pipeline, par.virtual_stages
    first, last = par.first_stage_layers, par.last_stage_layers
    if (first is not None or last is not None) and (par.embedding_in_split or par.loss_in_split):
        raise ValueError("first_stage_layers / last_stage_layers cannot be combined with embedding_in_split / "
                         "loss_in_split (Megatron-core refuses both); give one way of evening the stages")
    if first is not None or last is not None:
        middle_stages = P - (first is not None) - (last is not None)
        middle = L - (first or 0) - (last or 0)
        if middle_stages < 0 or middle < 0 or bool(middle) != bool(middle_stages):
            raise ValueError(f"first_stage_layers ({first}) and last_stage_layers ({last}) leave {middle} blocks for "
                             f"{max(middle_stages, 0)} middle stages of P = {P}; choose counts that leave blocks for "
                             "every middle stage and none without one")
        if middle_stages and middle % middle_stages:
            raise ValueError(f"the {middle} middle blocks must split evenly over the {middle_stages} middle stages "
                             f"(n_layers {L} - first {first or 0} - last {last or 0}); change first/last_stage_layers")
        each = middle // middle_stages if middle_stages else 0
        units = [each] * P
        if first is not None:
            units[0] = first
        if last is not None:
            units[-1] = last
        if v > 1 and any(u % v for u in units):
            raise ValueError(f"with {v} virtual stages every stage's block count must be a multiple of {v} "
                             f"(stages hold {sorted(set(units))}); change first/last_stage_layers or --virtual-stages")
        return units
    if par.embedding_in_split or par.loss_in_split:
        N = L + par.embedding_in_split + par.loss_in_split
        if N % (P * v):
            raise ValueError(f"n_layers ({L}) + embedding and loss units ({N - L}) = {N} must be divisible by P x "
                             f"virtual stages ({P} x {v}) when they count in the pipeline split")
        return [N // P] * P
    if P > L:
        raise ValueError(f"pipeline stages P ({P}) exceed n_layers ({L}); use P <= {L}")
    if v > 1 and L % (P * v):
        raise ValueError(f"n_layers ({L}) must be divisible by P x virtual stages ({P} x {v}); or give "
                         "first/last_stage_layers, or embedding_in_split / loss_in_split, as Megatron-core does")
    return [_layers_on_stage(L, P, s) for s in range(P)]


def pipeline_stage(L: int, par: Parallelism, s: int, units: list[int] | None = None) -> PipelineStage:
    """Rank s's chunks. Chunk c of rank s covers units [c·N/v + offset_s, + units_s/v), offset_s
    the units of the ranks before it in one round (Megatron get_transformer_layer_offset: model
    chunk c of every rank holds the c-th of v consecutive slices of the model)."""
    units = units if units is not None else pipeline_units(L, par)
    v = par.virtual_stages if par.pipeline > 1 else 1
    emb, loss = int(par.embedding_in_split), int(par.loss_in_split)
    N = sum(units)
    offset = sum(units[:s]) // v
    width = units[s] // v
    chunks = []
    for c in range(v):
        a = c * (N // v) + offset
        b = a + width
        # units -> blocks: the embedding is unit 0, the head and loss unit N - 1
        start, stop = min(max(a - emb, 0), L), min(max(b - emb, 0), L)
        chunks.append(Chunk(start, stop, embedding=s == 0 and c == 0,
                            head=s == par.pipeline - 1 and c == v - 1))
    del loss
    return PipelineStage(s, tuple(chunks))


def chunk_forwards_in_flight(P: int, v: int, m: int, s: int, group: int | None = None) -> list[int]:
    """Forwards whose activations rank s holds when its first backward starts, per model chunk.

    Non-interleaved 1F1B (Narayanan et al. 2021 §2.2.1; Megatron-core schedules.py
    forward_backward_pipelining_without_interleaving): P − s − 1 warm-up forwards and one more,
    at most m. Interleaved (§2.2.2; forward_backward_pipelining_with_interleaving):
    2·(P − s − 1) + (v − 1)·N warm-up forwards and one more, at most m·v, taken in groups of N
    micro-batches per chunk (get_model_chunk_id: forward k runs chunk (k mod N·v) // N). N, the
    contiguous micro-batches per chunk (`group`), is P in Narayanan et al.'s schedule (the
    default); the Llama 3 paper's schedule makes it tunable (arXiv:2407.21783 §3.3.2, Figure 6:
    "N = 5"), as Megatron-core's `microbatch_group_size_per_vp_stage` does (P ≤ N ≤ m).
    When N does not divide m the last group holds the m mod N left (get_model_chunk_id's
    microbatch_group_size_per_vp_stage tables run them through every chunk in turn).
    """
    if v <= 1 or P <= 1:
        return [min(P - s, m)]
    N = P if group is None else group
    total = min(2 * (P - s - 1) + (v - 1) * N + 1, m * v)
    full, last = divmod(m, N)  # groups of N micro-batches, and the last group's size
    if total <= full * N * v:
        rounds, rest = divmod(total, N * v)
        return [rounds * N + min(max(rest - c * N, 0), N) for c in range(v)]
    rest = total - full * N * v  # into the last, smaller group (last > 0 here: total <= m·v)
    return [full * N + min(max(rest - c * last, 0), last) for c in range(v)]


def check_microbatch_group(par: Parallelism, m: int) -> None:
    """Megatron-core's range for N (schedules.py forward_backward_pipelining_with_interleaving:
    "The number of contiguous micro-batches in a virtual pipeline stage should range in [PP, M]"),
    the range the Llama 3 paper describes between DFS (N = P) and BFS (N = M)."""
    N = par.microbatch_group
    if N is None:
        return
    if par.schedule is not PipelineSchedule.interleaved:
        raise ValueError(f"microbatch_group ({N}) groups the micro-batches of an interleaved schedule; "
                         "give --virtual-stages 2 or more, or drop --microbatch-group")
    if not par.pipeline <= N <= m:
        raise ValueError(f"microbatch_group ({N}) must lie between P ({par.pipeline}) and the micro-batches per "
                         f"step ({m}); give an N in that range or drop --microbatch-group")


@dataclass(frozen=True)
class FrameworkMemory:
    """Megatron-core memory settings `Training` does not carry (no CLI flag yet; the validation rows of
    tools/validation/train_runs.yaml give them from the recipes they ran).

    fp8_param_gather: Megatron-core's `--fp8-param-gather` (Megatron-Bridge MixedPrecisionConfig
        `fp8_param_gather`, on in its FP8 current-scaling and MXFP8 recipes,
        src/megatron/bridge/training/mixed_precision.py): the GEMM weights are created as FP8 tensors
        (Transformer Engine `fp8_model_init`), so no 16-bit compute copy of them is held beside the
        FP8 copies and the distributed optimizer's fp32 master; under MXFP8 the 16-bit parameters
        live in the gradient buffer for the all-gather (`reuse_grad_buf_for_mxfp8_param_ag`,
        megatron/core/distributed/param_and_grad_buffer.py), no buffer of their own either.
    offloaded_layers: Megatron-core's activation offloading (`cpu_offloading`,
        `cpu_offloading_num_layers`, `cpu_offloading_weights` off: Megatron-Bridge
        scripts/performance/utils/overrides.py _set_recompute_overrides): the stored activations of
        the first N blocks go to host memory (megatron/core/transformer/transformer_block.py
        `get_cpu_offload_context`); its double-buffered handler keeps one offloaded block in transit
        on the GPU (copied out during the next block's forward, back in during the later block's
        backward). Megatron refuses it with pipeline parallelism and needs N < the layers
        (megatron/core/transformer/transformer_config.py); the time of the copies is not priced
        (they overlap the compute).
    """

    fp8_param_gather: bool = False
    offloaded_layers: int = 0
    recompute_modules: tuple[str, ...] = ()

    # recompute_modules: Megatron-core's `--recompute-modules` (recompute_granularity selective);
    # priced: "mla_up_proj", Multi-Latent Attention's up-projections
    # (megatron/core/transformer/multi_latent_attention.py `recompute_up_proj`: the up-projected and
    # rotated q, k, v go through a CheckpointWithoutOutput whose outputs are discarded once the core
    # attention has run, `discard_output_and_register_recompute(core_attn_out)`, and rebuilt before
    # its backward): a block keeps its latents, not the per-head q, k, v, and one block's q, k, v
    # are alive again during its backward (the recomputation working set).
    PRICED_MODULES = ("mla_up_proj",)


def training_memory(
    m: ModelConfig,
    w: Workload,
    tr: Training = Training.model_validate({}),  # the defaults: p and grad_bytes follow the precision
    par: Parallelism = Parallelism(),
    *,
    eager: EagerCode | None = None,
    all_stages: bool = True,
    framework_memory: FrameworkMemory | None = None,
) -> list[StageMemory]:
    """Per-GPU memory of every pipeline stage (most loaded: `max(stages, key=total)`).

    O(1) in L, S and B; O(P) for P <= MAX_LISTED_STAGES, else (or with all_stages=False, enough
    to find the most loaded) only the first and last stage.
    `eager` matters only to the torch-eager profile (default: `eager_code(m)`).
    `framework_memory`: Megatron-core settings outside `Training` (FrameworkMemory).
    """
    check_hybrid_training(m, tr)
    fwm = framework_memory or FrameworkMemory()
    _check_framework_memory(m, tr, par, fwm)
    T, P, dp, zero = par.tensor, par.pipeline, par.data, par.zero
    cp = par.context
    if gemma4.is_gemma4(m):
        gemma4.check_layout(m, T, par.expert, par.expert_tensor)
    if cp > 1 and gemma4.is_gemma4(m):
        raise ValueError(f"context parallelism (cp {cp}) is not priced for Gemma 4's varied layers (its kv-shared "
                         "layers read other layers' K/V); use cp 1")
    if cp > 1 and m.is_hybrid:
        kinds = ", ".join(MIXERS[k].name for k in m.mixer_kinds)
        raise ValueError(f"context parallelism (cp {cp}) is not priced for {kinds} layers (their recurrent state "
                         "passes from one sequence shard to the next: a pipeline over the cp ranks, not a ring); use cp 1")
    if cp > 1:
        # Context parallelism (Megatron-core CP): each of cp ranks holds S/cp tokens of every
        # sequence and its activations; the weights are replicated, and ZeRO / the distributed
        # optimizer shards their states over dp x cp. The attention ring adds, per layer being
        # computed, the K/V block received while the local one is used (2 buffers of
        # b·(S/cp)·n_kv·h_d·p each for K and V); counted with the recomputation working set.
        # All-gather CP (cp_comm_type all_gather) holds cp such blocks: the gathered K/V.
        if w.seq_len % cp:
            raise ValueError(f"S ({w.seq_len}) must be divisible by the context-parallel size cp ({cp})")
        w = w.model_copy(update={"seq_len": w.seq_len // cp})
        dp = dp * cp
    ep, etp = par.expert, par.expert_tensor_size
    shard = shard_params(m, T, ep, etp)
    edp = expert_data_parallel(par, cp)
    layer = layer_activations(m, w, tr, par, eager=eager)
    dense_act = layer_activations(m, w, tr, par, eager=eager, moe=False) if m.is_moe else layer
    parts = block_parts(m, w, tr, par, eager=eager) if layers_differ(m) else None
    first_extra, last_extra = head_activations(m, w, tr, par, eager=eager)
    working = _recompute_working_set(m, w, tr, par, eager)
    mla_qkv = 0
    if "mla_up_proj" in fwm.recompute_modules:  # the per-head q, k, v (FrameworkMemory), one block's rebuilt
        mla_qkv = tr.p * w.batch_size * w.seq_len * (m.n_heads // T) * (2 * m.head_dim + m.v_dim)
        working += mla_qkv
    if cp > 1:
        kv_t = m.n_heads // T if m.is_mla else kv_heads_per_rank(m.n_kv_heads, T)
        # all_gather CP (Llama 3 §3.3.2; TE AttnFuncWithCPAndKVAllGather): the whole sequence's K/V,
        # gathered, and in the backward their gradients before the reduce-scatter: cp x the ring's
        gathered = cp if par.cp_comm_type is CPCommType.all_gather else 1
        working += gathered * 2 * 2 * w.batch_size * w.seq_len * kv_t * (m.head_dim + m.v_dim) // 2 * tr.p
    opt_bytes = optimizer_bytes_per_param(tr)
    if tr.adapters:
        from transformer_calc.estimators.training.finetune import adapted, block_adapter_params, check_targets, embedding_linears, layer_counts

        if gemma4.is_gemma4(m):  # per layer class (adapter_params per stage below); the PLE projection's
            side_last = 0
            side_first = adapted(gemma4.side_linears(m), tr).params
        else:
            check_targets(m, tr)
            side_first, side_last = (adapted(x, tr).params for x in embedding_linears(m))
        table = ceil_div(m.vocab_size, T) * m.d_embedding
        opt_bytes = trainable_optimizer_bytes(tr)
    _check_offload(tr, par)
    stages = []
    units = pipeline_units(m.n_layers, par)
    v = par.virtual_stages if P > 1 else 1
    m_micro = tr.micro_batches if tr.micro_batches is not None else P  # timeline.micro_batches
    check_microbatch_group(par, m_micro)
    for s in _stages_to_evaluate(m, P, all_stages, uneven=_uneven(par)):
        chunks = pipeline_stage(m.n_layers, par, s, units).chunks
        n = sum(c.n_layers for c in chunks)
        is_first, is_last = s == 0, s == P - 1
        if gemma4.is_gemma4(m):  # every layer class's own parameters (the per-layer input path on stage 0)
            params = sum(gemma4.blocks_params(m, c.start, c.stop) for c in chunks)
            params += gemma4.embedding_side_params(m) if is_first else 0
        else:
            params = sum(shard.blocks(m, c.start, c.stop) for c in chunks)
        # Routed experts are sharded by ZeRO over the expert-data-parallel group (Megatron-core
        # distributed optimizer / DeepSpeed-MoE), the rest over all data-parallel replicas.
        n_moe = sum(m.n_moe_layers(c.start, c.stop) for c in chunks)
        experts = n_moe * shard.routed_experts
        if is_first:
            params += shard.embedding
        if is_last:
            params += shard.final_norm + shard.lm_head + (shard.tied_head_copy if P > 1 else 0)
        # The forwards alive at the stage's first backward, per chunk (1F1B warm-up depth, and
        # the interleaved schedule's: Narayanan et al. 2021 §2.2; chunk_forwards_in_flight)
        # zero-bubble and DualPipe schedules hold their own counts (schedules.forwards_in_flight)
        alive = (forwards_in_flight(par.schedule, P, v, m_micro, s)
                 or chunk_forwards_in_flight(P, v, m_micro, s, par.microbatch_group))
        in_flight = sum(alive)
        alive_moe = sum(k * m.n_moe_layers(c.start, c.stop) for k, c in zip(alive, chunks))
        alive_dense = sum(k * c.n_layers for k, c in zip(alive, chunks)) - alive_moe
        if fwm.offloaded_layers:  # P = 1 (checked): blocks 0..N-1 of the one micro-batch in flight are on the
            # host but for the one in transit (FrameworkMemory)
            off_moe = m.n_moe_layers(0, fwm.offloaded_layers - 1)
            alive_moe -= in_flight * off_moe
            alive_dense -= in_flight * (fwm.offloaded_layers - 1 - off_moe)
        alive_first = sum(k for k, c in zip(alive, chunks) if c.embedding)
        alive_last = sum(k for k, c in zip(alive, chunks) if c.head)
        dense = params - experts
        n_dense = n - n_moe

        def sharded(stage: int) -> int:
            """Parameters one GPU keeps of a state ZeRO shards from `stage` on."""
            if zero < stage:
                return params
            return ceil_div(dense, dp) + ceil_div(experts, edp)

        weights, trainable, adapter_w, nf4 = sharded(3) * tr.p, params, 0, 0
        if tr.adapters:
            from transformer_calc.estimators.training.finetune import frozen_weight_bytes, trainable_weight_bytes

            if gemma4.is_gemma4(m):
                trainable = sum(gemma4.adapter_params(m, tr, c.start, c.stop) for c in chunks)
            else:
                trainable = sum(block_adapter_params(m, tr, layer_counts(m, c.start, c.stop), T, ep, par.expert_tensor)
                                for c in chunks)
            if is_first:
                trainable += side_first + (table if tr.train_embeddings else 0)
            if is_last:
                trainable += side_last
                if not m.tied_embeddings and tr.train_head:
                    trainable += shard.lm_head
                elif m.tied_embeddings and (tr.train_head or tr.train_embeddings) and not (is_first and tr.train_embeddings):
                    trainable += table  # the tied table (the last stage's copy when P > 1)
            if gemma4.is_gemma4(m):
                frozen, nf4 = gemma4.frozen_weight_bytes(m, tr, params, [(c.start, c.stop) for c in chunks], is_first)
            else:
                frozen, nf4 = frozen_weight_bytes(m, tr, params, _stage_counts(m, chunks), T, ep, par.expert_tensor)
            if zero >= 3:  # ZeRO-3 / FSDP shards the frozen parameters too
                frozen, nf4 = ceil_div(frozen * sharded(3), params), ceil_div(nf4 * sharded(3), params)
            adapter_w = _shard_trainable(trainable, 3, zero, dp) * trainable_weight_bytes(tr)
            weights = frozen + adapter_w
        if tr.framework is Framework.torchtitan and zero >= 3 and tr.precision is Precision.mixed and not tr.adapters:
            # FSDP2 in torchtitan (parallelize_llama.apply_fsdp, MixedPrecisionPolicy(param_dtype=bf16)):
            # the sharded parameters are the fp32 master copy (counted with the optimizer); 16-bit
            # copies exist only gathered: a unit at a time (the timeline's `gathered`), or the whole
            # stage under pipeline parallelism, which keeps them unsharded between micro-batches
            # (reshard_after_forward off when PP is on)
            weights = params * tr.p if P > 1 else 0
        gradients = _shard_trainable(trainable, 2, zero, dp) * tr.grad_bytes if tr.adapters else sharded(2) * tr.grad_bytes
        copies = PARAMETER_COPIES.get(par.schedule, 1) if P > 1 else 1
        if copies > 1:  # DualPipe: both directions' copies of the parameters, each with its gradients
            weights, gradients = weights * copies, gradients * copies
        opt_params = _shard_trainable(trainable, 1, zero, dp) if tr.adapters else sharded(1)
        optimizer = opt_params * opt_bytes
        if tr.optimizer in SHAPED:  # states tensor by tensor (optimizers.py), ZeRO-sharded pro rata
            from transformer_calc.estimators.training.optimizers import adapter_tensors, groups, stage_tensors

            if tr.adapters:
                tensors = adapter_tensors(m, tr, T, n_moe, n_dense, is_first, is_last, P,
                                          counts=_stage_counts(m, chunks) if layers_differ(m) else None)
            else:
                tensors = stage_tensors(m, T, ep, par.expert_tensor, n_moe, n_dense, is_first, is_last, P)
            states = sum(g.state_bytes for g in groups(tr, tensors))
            master = MASTER_COPY_BYTES if tr.precision is Precision.mixed and not tr.adapters else 0
            held = trainable if tr.adapters else params
            optimizer = master * opt_params + ceil_div(states * opt_params, max(held, 1))
        fp8_w = 0
        if tr.fp8_recipe is not FP8Recipe.none:  # FP8 weight copies and scaling state (fp8.py)
            from transformer_calc.estimators.training.fp8 import block_gemms, scaling_state_bytes, weight_copy_bytes

            elems = gemms = 0
            for moe_kind, count in ((True, n_moe), (False, n_dense)):
                if count:
                    e, g = block_gemms(m, moe_kind, T, ep, par.expert_tensor)
                    elems, gemms = elems + count * e, gemms + count * g
            fp8_w = weight_copy_bytes(elems, tr.fp8_recipe) + scaling_state_bytes(gemms, tr.fp8_recipe)
            # --fp8-param-gather: the GEMM weights' 16-bit copy is not held (FrameworkMemory)
            no_16bit = elems * tr.p if fwm.fp8_param_gather else 0
            if zero >= 3:  # sharded with the weights they are copies of
                fp8_w = ceil_div(fp8_w * sharded(3), max(params, 1))
                no_16bit = ceil_div(no_16bit * sharded(3), max(params, 1))
            weights += fp8_w - no_16bit
        host_w = host_g = host_o = 0
        if tr.offload is not Offload.none:
            # ZeRO-Offload (Ren et al. 2021): optimizer states, fp32 master and the fp32 gradient
            # partition live on the host, and the update runs there; the GPU keeps the 16-bit
            # parameters and reduces gradients through its buckets (timeline). ZeRO-Infinity's
            # parameter offload (Rajbhandari et al. 2021) moves the ZeRO-3 parameter partition too.
            host_o, optimizer = optimizer, 0
            host_g, gradients = ceil_div(trainable if tr.adapters else dense + experts, dp) * OFFLOAD_GRAD_BYTES, 0
            if tr.offload is Offload.optimizer_params:
                host_w, weights, adapter_w, nf4, fp8_w = weights, 0, 0, 0, 0

        other = alive_first * first_extra + alive_last * last_extra
        if parts is not None:  # hybrid: each chunk's layers by kind (BlockParts.chunk)
            acts = [parts.chunk(m, c.start, c.stop) for c in chunks]
            attention = sum(k * a.attention for k, a in zip(alive, acts))
            mlp = sum(k * a.mlp for k, a in zip(alive, acts))
            norm = sum(k * a.norm for k, a in zip(alive, acts))
        else:
            attention = alive_moe * layer.attention + alive_dense * dense_act.attention
            attention -= (alive_moe + alive_dense) * mla_qkv  # recompute_modules mla_up_proj (FrameworkMemory)
            mlp = alive_moe * layer.mlp + alive_dense * dense_act.mlp
            norm = alive_moe * layer.norm + alive_dense * dense_act.norm
        stages.append(
            StageMemory(
                stage=s,
                n_layers=n,
                params=params,
                weights=weights,
                gradients=gradients,
                optimizer=optimizer,
                attention=attention,
                mlp=mlp,
                norm=norm,
                other=other,
                in_flight=in_flight,
                recompute_working=working if n else 0,
                trainable=trainable if tr.adapters else None,
                adapter_weights=adapter_w,
                quantized_weights=nf4,
                fp8_weights=fp8_w,
                host_weights=host_w,
                host_gradients=host_g,
                host_optimizer=host_o,
            )
        )
    return stages


def _check_framework_memory(m: ModelConfig, tr: Training, par: Parallelism, fwm: FrameworkMemory) -> None:
    """FrameworkMemory's settings where Megatron-core takes them."""
    if fwm.fp8_param_gather and tr.fp8_recipe is FP8Recipe.none:
        raise ValueError("fp8_param_gather keeps the GEMM weights in FP8: it needs an fp8_recipe")
    unpriced = [k for k in fwm.recompute_modules if k not in FrameworkMemory.PRICED_MODULES]
    if unpriced:
        raise ValueError(f"recompute_modules {', '.join(unpriced)} not priced (priced: "
                         f"{', '.join(FrameworkMemory.PRICED_MODULES)})")
    if "mla_up_proj" in fwm.recompute_modules and (not m.is_mla or tr.recompute is not Recompute.none or layers_differ(m)):
        raise ValueError("recompute_modules mla_up_proj recomputes Multi-Latent Attention's up-projections: it needs an "
                         "MLA model with uniform blocks and recompute none")
    N = fwm.offloaded_layers
    if N:
        if par.pipeline > 1:  # transformer_config.py: "no support for Pipeline parallelism with CPU offloading"
            raise ValueError(f"activation offloading ({N} layers) is not supported with pipeline parallelism "
                             f"(P {par.pipeline}); use P 1")
        if not 0 < N < m.n_layers:
            raise ValueError(f"offloaded_layers ({N}) must lie between 1 and n_layers - 1 ({m.n_layers - 1})")
        if layers_differ(m):
            raise ValueError("activation offloading is priced for uniform blocks only")


def _stage_counts(m: ModelConfig, chunks: tuple[Chunk, ...]) -> LayerCounts:
    """The layer counts (finetune.LayerCounts) of a stage's chunks, summed."""
    seq: dict[LayerAttention, int] = {}
    moe = dense = 0
    for c in chunks:
        lc = layer_counts(m, c.start, c.stop)
        for k, n in lc.sequence.items():
            seq[k] = seq.get(k, 0) + n
        moe, dense = moe + lc.moe, dense + lc.dense
    return LayerCounts(sequence=seq, moe=moe, dense=dense)


OFFLOAD_GRAD_BYTES = 4  # DeepSpeed's CPU optimizer updates from an fp32 gradient partition on the host


def _shard_trainable(count: int, stage: int, zero: int, dp: int) -> int:
    """Trainable parameters one GPU keeps of a state ZeRO shards from `stage` on."""
    return count if zero < stage else ceil_div(count, dp)


def _check_offload(tr: Training, par: Parallelism) -> None:
    """ZeRO-Offload works with ZeRO stages 1-3; parameter offload (ZeRO-Infinity) needs stage 3."""
    if tr.offload is Offload.none:
        return
    if par.zero < 1:
        raise ValueError(f"offload {tr.offload.value} needs ZeRO (DeepSpeed offloads the ZeRO partition); give --zero 1, 2 or 3")
    if tr.offload is Offload.optimizer_params and par.zero < 3:
        raise ValueError(f"offload optimizer+params needs ZeRO stage 3 (zero is {par.zero}); give --zero 3 or --offload optimizer")


def trainable_optimizer_bytes(tr: Training) -> int:
    """Optimizer bytes per trainable parameter under adapters: the states only, since the
    trainable parameters are already held at the update's precision (no separate master copy)."""
    master = MASTER_COPY_BYTES if tr.precision is Precision.mixed else 0
    return optimizer_bytes_per_param(tr) - master


def expert_data_parallel(par: Parallelism, cp: int = 1) -> int:
    """Expert-data-parallel size: the T*CP*dp ranks of a stage regrouped as ep*etp*edp (Megatron-core
    MoE 'parallel folding': context parallelism folds into the expert groups); ep*etp must divide T*CP*dp."""
    ep, etp = par.expert, par.expert_tensor_size
    if (par.tensor * cp * par.data) % (ep * etp):
        raise ValueError(
            f"expert parallel ep ({ep}) x expert tensor parallel ({etp}) must divide T x dp" + (" x CP" if cp > 1 else "")
            + f" ({par.tensor} x {par.data}" + (f" x {cp}" if cp > 1 else "") + "); raise dp or lower ep"
        )
    return par.tensor * cp * par.data // (ep * etp)


def _stages_to_evaluate(m: ModelConfig, P: int, all_stages: bool, uneven: bool = False) -> list[int]:
    """Stages whose memory is computed. Uniform blocks: the middle stages hold no more layers,
    fewer micro-batches and no embedding or head than the first, so the first and the last bound
    them; with an uneven split (first/last stages lighter) the second and the second to last too.
    Mixed dense and MoE blocks (DeepSeek's dense first layers): the stages after the first
    can hold more parameters, so the first MAX_LISTED_STAGES are computed (and the last)."""
    mixed = m.is_moe and m.n_moe_layers() not in (0, m.n_layers)
    mixed = mixed or gemma4.is_gemma4(m)  # Gemma 4: a middle stage can hold more of the larger full layers
    if not mixed:
        if all_stages and P <= MAX_LISTED_STAGES:
            return list(range(P))
        return sorted({0, P - 1, *((min(1, P - 1), max(P - 2, 0)) if uneven else ())})
    limit = MAX_LISTED_STAGES if all_stages else 4
    return sorted({*range(min(P, limit)), P - 1})


def _recompute_working_set(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, eager: EagerCode | None = None
) -> int:
    """What recomputation rebuilds during backward, alive for one layer at a time.

    Full: one block's activations as if stored; selective: one block's attention core. Not in the
    seed profile (the seed counts stored activations only, as Korthikanti's Table 2 does).
    """
    if tr.recompute is Recompute.none or tr.activations is ActivationProfile.seed:
        return 0
    plain = tr.model_copy(update={"recompute": Recompute.none})
    if layers_differ(m):  # hybrid: the largest block; selective rebuilds one attention core
        stored_parts = block_parts(m, w, plain, par, eager=eager)
        if tr.recompute is Recompute.full:
            return stored_parts.largest
        if not any(k in ATTENTION_KINDS for k in m.attention_pattern) and not m.mixer_beside_attention:
            return 0
        kept = layer_activations(m, w, tr, par, eager=eager)
        return layer_activations(m, w, plain, par, eager=eager).attention - kept.attention
    kinds = [m.is_moe] + ([False] if m.is_moe and m.has_dense_mlp_layers else [])
    best = 0
    for moe in kinds:  # the larger of a MoE block's and a dense block's
        stored = layer_activations(m, w, plain, par, eager=eager, moe=moe)
        if tr.recompute is Recompute.full:
            best = max(best, stored.total)
        elif tr.recompute is Recompute.op:  # the block's recomputed tensors, alive for its backward
            best = max(best, stored.total - layer_activations(m, w, tr, par, eager=eager, moe=moe).total, 0)
        else:
            without_core = layer_activations(m, w, tr, par, eager=eager, moe=moe)
            best = max(best, stored.attention - without_core.attention)
    return best


def layers_differ(m: ModelConfig) -> bool:
    """Layers whose activations differ by more than MoE vs dense: a hybrid pattern, blocks that are a
    sequence mixer or an MLP alone (Nemotron-H), Gemma 4's layer classes (training/gemma4.py), or
    MiMo-V2-Flash's attention kinds (training/kind_attention.py)."""
    return m.is_hybrid or m.one_mixer_per_layer or gemma4.is_gemma4(m) or kind_attention.shaped_by_kind(m)


def most_loaded(stages: list[StageMemory]) -> StageMemory:
    return max(stages, key=lambda st: st.total)


# ---------------------------------------------------------------------------- fitting
def valid_tensor_parallel(m: ModelConfig, limit: int = 64) -> list[int]:
    """T values the Megatron layout allows: T divides n_heads and d_ff; K/V heads shard or
    replicate (T and n_kv_heads divide one another)."""
    out = []
    for T in range(1, min(limit, m.n_heads) + 1):
        if m.n_heads % T:
            continue
        try:
            check_tensor_parallel(m, T)
            kv_heads_per_rank(m.n_kv_heads, T)
            if gemma4.is_gemma4(m):  # training at T > 1 not priced for its layer classes yet
                gemma4.check_layout(m, T)
        except TcalcError:
            raise
        except ValueError:
            continue
        out.append(T)
    return out


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
        mlp += k_exp * p * B * S * D + p * B * S * m.n_experts
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
