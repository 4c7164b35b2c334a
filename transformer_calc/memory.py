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
- Pipeline: 1F1B keeps up to P micro-batches in flight on the first stage (P - s on stage s,
  assuming at least P micro-batches per step); embedding on the first stage, final norm and head
  on the last. The report is for the most loaded stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.config import (
    MASTER_COPY_BYTES,
    ActivationProfile,
    ModelConfig,
    Optimizer,
    Parallelism,
    Precision,
    Recompute,
    Training,
    Workload,
)
from transformer_calc.params import shard_params

MASK_BYTES = 1  # a torch.bool dropout mask element (seed: "one byte of memory per element")
SOFTMAX_STAT_BYTES = 4  # FlashAttention keeps one fp32 logsumexp per query row and head
LOSS_BYTES = 4  # the cross-entropy keeps an fp32 softmax over the vocabulary (Megatron upcasts logits)
PLAIN_MLP_SAVED = 2  # pre-activation and activation output, F wide each (seed "MLP Activations")
GATED_MLP_SAVED = 4  # gate pre-activation, act(gate), up projection, their product (input to W_down)

# Optimizer state elements per parameter (excluding the master copy), and their bytes.
_STATES = {
    Optimizer.adamw: 2,  # first and second moments (Kingma & Ba 2015; Loshchilov & Hutter 2019)
    Optimizer.adam: 2,
    Optimizer.sgd: 0,
    Optimizer.sgd_momentum: 1,  # momentum buffer
    Optimizer.lion: 1,  # one momentum (Chen et al. 2023)
    Optimizer.adam_8bit: 2,  # two 8-bit moments (Dettmers et al. 2022); block absmax ignored
}


def optimizer_bytes_per_param(tr: Training) -> int:
    """Optimizer memory per parameter: states (+ the fp32 master copy in mixed precision).

    Seed eq. (optimizer_states_mem_mp): Adam in mixed precision keeps 12 bytes/parameter: 4 for
    the master copy, 4 + 4 for the two moments. In fp32 (eq. optimizer_states_mem_no_mp) 8.
    Pure bf16 keeps states in 2 bytes and no master copy; 8-bit Adam keeps 1-byte states.
    """
    if tr.optimizer is Optimizer.adam_8bit:
        state_bytes = 1
    else:
        state_bytes = 2 if tr.precision is Precision.bf16 else 4
    master = MASTER_COPY_BYTES if tr.precision is Precision.mixed else 0
    return master + _STATES[tr.optimizer] * state_bytes


# ---------------------------------------------------------------------------- activations
@dataclass(frozen=True)
class LayerActivations:
    """Bytes one transformer block keeps for backward, for one micro-batch, on one GPU."""

    attention: int
    mlp: int
    norm: int

    @property
    def total(self) -> int:
        return self.attention + self.mlp + self.norm


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def layer_activations(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism = Parallelism()
) -> LayerActivations:
    """Per-layer activation bytes on one GPU (seed eqs. att_actmem_vanilla, mlp_actmem_vanilla,
    act_mem_attn_mlp; Korthikanti et al. 2022 Table 2 for SP and recompute).

    With p = 2, E = 4, MHA and dropout on, `seed` and `default` agree with Korthikanti's Table 2:
    sbh(34 + 5as/h); TP: sbh(10 + 24/t + 5as/(ht)); TP+SP: sbh/t (34 + 5as/h); selective +
    TP+SP: 34 sbh/t; full recompute: 2 sbh (sharded by t with SP).
    """
    B, S, D, A, T, p = w.batch_size, w.seq_len, m.d_model, m.n_heads, par.tensor, tr.p
    seed = tr.activations is ActivationProfile.seed
    if A % T:
        raise ValueError(f"n_heads ({A}) must be divisible by T ({T}); use a divisor of {A}")
    # Replicated under plain TP, sharded along the sequence with SP (Korthikanti sec. 4.2.2).
    S_rep = _ceil_div(S, T) if par.sequence_parallel else S
    if tr.recompute is Recompute.full:
        # Only the block input is kept; the block is recomputed in backward.
        return LayerActivations(attention=0, mlp=0, norm=p * B * S_rep * D)
    dropout = True if seed else (tr.dropout if tr.dropout is not None else m.dropout > 0)
    mask = MASK_BYTES if dropout else 0
    if seed:  # MHA with head width D/A, 2-matrix MLP of width E*D, two norms
        hd, kv, F, gated, k_exp, qk_norm, shared_input, norms = D // A, A, m.d_ff, False, 1, False, False, 2
    else:
        hd, kv, F, gated = m.head_dim, m.n_kv_heads, m.d_ff, m.gated_mlp
        k_exp, qk_norm, norms = m.experts_per_token, m.qk_norm, m.norms_per_layer
        shared_input = m.parallel_attn and m.norms_per_layer == 1  # one norm feeds both branches
    A_t, kv_t = A // T, max(kv // T, 1)
    if F % T:
        raise ValueError(f"d_ff ({F}) must be divisible by T ({T}); use a divisor of {F}")

    # Attention: input, q, k, v, (normed q, k), core, re-weighted output, output dropout mask.
    attn = p * B * S_rep * D  # input to the QKV projection (the norm's output)
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
    attn += p * B * S * A_t * hd  # re-weighted values, the input to W_O
    attn += mask * B * S_rep * D  # dropout after W_O

    # MLP: input, F-wide intermediates (per routed expert), dropout mask; MoE router logits.
    n_saved = GATED_MLP_SAVED if gated else PLAIN_MLP_SAVED
    mlp = 0 if shared_input else p * B * S_rep * D
    mlp += k_exp * n_saved * p * B * S * (F // T)
    if not seed and m.is_moe:
        mlp += k_exp * p * B * S * D  # the routed (permuted) copies each expert keeps as input
        mlp += p * B * S * m.n_experts  # router logits (softmax/top-k input)
    mlp += mask * B * S_rep * D

    norm = norms * p * B * S_rep * D  # each norm keeps its input
    return LayerActivations(attention=attn, mlp=mlp, norm=norm)


def head_activations(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism = Parallelism()
) -> tuple[int, int]:
    """(first-stage, last-stage) bytes outside the blocks that the seed drops as O(V/DL).

    First stage: the embedding dropout mask. Last stage: the final norm's input, the LM head's
    input, and the loss's fp32 softmax over the (vocabulary-parallel) logits, 4·B·S·V/T. Zero
    under the seed profile or with head_activations off.
    """
    if tr.activations is ActivationProfile.seed or not tr.head_activations:
        return 0, 0
    B, S, D, T, p = w.batch_size, w.seq_len, m.d_model, par.tensor, tr.p
    S_rep = _ceil_div(S, T) if par.sequence_parallel else S
    dropout = tr.dropout if tr.dropout is not None else m.dropout > 0
    first = (MASK_BYTES * B * S_rep * D) if dropout else 0
    last = (p * B * S_rep * D if m.final_norm else 0) + p * B * S_rep * D
    last += LOSS_BYTES * B * S * _ceil_div(m.vocab_size, T)
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
    other: int  # embedding/head/loss activations and the recomputation working set
    in_flight: int  # micro-batches whose activations are alive (1F1B)

    @property
    def activations(self) -> int:
        return self.attention + self.mlp + self.norm + self.other

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
    return [L // P + (1 if s < L % P else 0) for s in range(P)]


def _layers_on_stage(L: int, P: int, s: int) -> int:
    return L // P + (1 if s < L % P else 0)


def training_memory(
    m: ModelConfig, w: Workload, tr: Training = Training(), par: Parallelism = Parallelism()
) -> list[StageMemory]:
    """Per-GPU memory of every pipeline stage (most loaded: `max(stages, key=total)`).

    O(1) in L, S and B; O(P) for P <= MAX_LISTED_STAGES, else only the first and last stage.
    """
    T, P, dp, zero = par.tensor, par.pipeline, par.data, par.zero
    if P > m.n_layers:
        raise ValueError(f"pipeline stages P ({P}) exceed n_layers ({m.n_layers}); use P <= {m.n_layers}")
    shard = shard_params(m, T)
    layer = layer_activations(m, w, tr, par)
    first_extra, last_extra = head_activations(m, w, tr, par)
    working = _recompute_working_set(m, w, tr, par)
    opt_bytes = optimizer_bytes_per_param(tr)
    stages = []
    indices = range(P) if P <= MAX_LISTED_STAGES else (0, P - 1)
    for s in indices:
        n = _layers_on_stage(m.n_layers, P, s)
        is_first, is_last = s == 0, s == P - 1
        params = n * shard.layer
        if is_first:
            params += shard.embedding
        if is_last:
            params += shard.final_norm + shard.lm_head + (shard.tied_head_copy if P > 1 else 0)
        in_flight = P - s  # 1F1B warm-up depth (Narayanan et al. 2021, sec. 2.2)
        # ZeRO shards over data-parallel replicas: 1 optimizer, 2 + gradients, 3 + weights.
        w_params = _ceil_div(params, dp) if zero >= 3 else params
        g_params = _ceil_div(params, dp) if zero >= 2 else params
        o_params = _ceil_div(params, dp) if zero >= 1 else params
        other = in_flight * ((first_extra if is_first else 0) + (last_extra if is_last else 0))
        stages.append(
            StageMemory(
                stage=s,
                n_layers=n,
                params=params,
                weights=w_params * tr.p,
                gradients=g_params * tr.grad_bytes,
                optimizer=o_params * opt_bytes,
                attention=in_flight * n * layer.attention,
                mlp=in_flight * n * layer.mlp,
                norm=in_flight * n * layer.norm,
                other=other + (working if n else 0),
                in_flight=in_flight,
            )
        )
    return stages


def _recompute_working_set(m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> int:
    """What recomputation rebuilds during backward, alive for one layer at a time.

    Full: one block's activations as if stored; selective: one block's attention core. Not in the
    seed profile (the seed counts stored activations only, as Korthikanti's Table 2 does).
    """
    if tr.recompute is Recompute.none or tr.activations is ActivationProfile.seed:
        return 0
    stored = layer_activations(m, w, tr.model_copy(update={"recompute": Recompute.none}), par)
    if tr.recompute is Recompute.full:
        return stored.total
    without_core = layer_activations(m, w, tr, par)
    return stored.attention - without_core.attention


def most_loaded(stages: list[StageMemory]) -> StageMemory:
    return max(stages, key=lambda st: st.total)


# ---------------------------------------------------------------------------- fitting
def max_micro_batch(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, capacity: int
) -> int:
    """Largest micro-batch B whose most loaded stage fits in `capacity` bytes (0: none fits).

    Memory is affine in B on every stage (model states fixed, activations linear), so the answer
    is exact and O(P): B_max = min over stages of (capacity - fixed) // per_sequence.
    """
    one = training_memory(m, w.model_copy(update={"batch_size": 1}), tr, par)
    two = training_memory(m, w.model_copy(update={"batch_size": 2}), tr, par)
    best: int | None = None
    for a, b in zip(one, two):
        slope = b.total - a.total
        fixed = a.total - slope
        if fixed > capacity:
            return 0
        limit = (capacity - fixed) // slope if slope else None
        if limit is not None:
            best = limit if best is None else min(best, limit)
    return max(best if best is not None else 0, 0)


def valid_tensor_parallel(m: ModelConfig, limit: int = 64) -> list[int]:
    """T values the Megatron layout allows: T divides n_heads and d_ff; K/V heads shard or
    replicate (T and n_kv_heads divide one another)."""
    kv = m.n_kv_heads
    return [
        T
        for T in range(1, min(limit, m.n_heads) + 1)
        if m.n_heads % T == 0 and m.d_ff % T == 0 and (kv % T == 0 or T % kv == 0)
    ]


def min_parallelism(
    m: ModelConfig,
    w: Workload,
    tr: Training,
    par: Parallelism,
    capacity: int,
    vary_pipeline: bool = False,
    max_pipeline: int = 64,
) -> tuple[int, int] | None:
    """Smallest T (pipeline fixed) or smallest T·P (ties: smaller T) whose most loaded GPU fits.

    None when no allowed T (and P <= min(L, max_pipeline)) fits.
    """
    Ps = range(1, min(m.n_layers, max_pipeline) + 1) if vary_pipeline else [par.pipeline]
    candidates = sorted(
        ((T * P, T, P) for T in valid_tensor_parallel(m) for P in Ps), key=lambda c: (c[0], c[1])
    )
    for _, T, P in candidates:
        trial = par.model_copy(update={"tensor": T, "pipeline": P})
        if most_loaded(training_memory(m, w, tr, trial)).total <= capacity:
            return T, P
    return None
