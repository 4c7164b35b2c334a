"""Optimizer state bytes, tensor by tensor: the optimizers whose memory depends on shapes.

Sources (docs/formulas.md §2.8):
- AdamW / Adam: two moments per parameter (Kingma & Ba 2015; Loshchilov & Hutter 2019).
- Adafactor (Shazeer & Stern 2018; torch.optim.Adafactor and transformers' Adafactor): for a
  matrix of R x C, the second moment is factored into a row vector (R) and a column vector (C);
  other tensors keep it whole; no first moment (beta1 = None, both libraries' default). A tensor
  of more than two dimensions (transformers 5's stacked experts, E x R x C) factors over its last
  two: E·(R + C), which is what tcalc counts per expert matrix.
- Muon (Jordan et al. 2024, github.com/KellerJordan/Muon `MuonWithAuxAdam`): one momentum buffer
  for every 2-D hidden weight matrix (attention, MLP, experts, router); the embedding, the LM
  head and every gain or bias go to AdamW (two moments). Newton-Schulz's bf16 working copies of
  one matrix are temporaries, not counted.
- 8-bit AdamW (Dettmers et al. 2022; bitsandbytes `Optimizer2State`, optim_bits=8): both moments
  as uint8 with one fp32 absmax per block of 256 elements each (block_wise=True); tensors of
  fewer than `min_8bit_size` = 4096 elements keep fp32 moments. Paged 8-bit AdamW (is_paged=True)
  allocates the same bytes in CUDA unified memory, which the driver pages out to the host under
  memory pressure: tcalc counts them on the GPU (the resident worst case) and says so.

State bytes are those of the master precision: 4 in mixed precision and fp32, 2 in pure bf16.
The fp32 master copy (mixed precision) is added by the caller, once per parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from transformer_calc.model.config import ModelConfig, Optimizer, Precision, Training

if TYPE_CHECKING:
    from transformer_calc.estimators.training.finetune import LayerCounts

BNB_BLOCK = 256  # bitsandbytes blockwise optimizer quantization block
BNB_ABSMAX_BYTES = 4  # one fp32 absmax per block and state
BNB_MIN_8BIT_SIZE = 4096  # min_8bit_size: smaller tensors keep 32-bit states
EIGHT_BIT = frozenset({Optimizer.adam_8bit, Optimizer.adamw_8bit, Optimizer.paged_adamw_8bit})
SHAPED = frozenset({Optimizer.adafactor, Optimizer.muon, *EIGHT_BIT})  # bytes depend on tensor shapes

# Plain optimizers: state elements per parameter (the master copy excluded).
STATES = {
    Optimizer.adamw: 2,  # first and second moments
    Optimizer.adam: 2,
    Optimizer.sgd: 0,
    Optimizer.sgd_momentum: 1,  # momentum buffer
    Optimizer.lion: 1,  # one momentum (Chen et al. 2023)
}


@dataclass(frozen=True)
class Tensors:
    """`count` tensors of one shape: a matrix rows x cols, or a vector of `rows` elements (cols 0).

    group: 'hidden' (2-D weights inside the blocks, adapters' A and B), 'embedding' (token and
    position tables), 'head' (the LM head), 'vector' (norms, biases, sinks, DoRA magnitudes).
    """

    group: str
    rows: int
    cols: int
    count: int = 1

    @property
    def numel(self) -> int:
        return self.rows * (self.cols or 1) * self.count


def state_bytes(tr: Training) -> int:
    """Bytes of one fp32-or-bf16 optimizer state element."""
    return 2 if tr.precision is Precision.bf16 else 4


@dataclass(frozen=True)
class GroupBytes:
    """One parameter group of the optimizer: its rule, parameters and state bytes."""

    group: str
    params: int
    state_bytes: int

    def as_dict(self) -> dict[str, object]:
        return {"group": self.group, "params": self.params, "state_bytes": self.state_bytes,
                "bytes_per_param": self.state_bytes / self.params if self.params else None}


def groups(tr: Training, tensors: list[Tensors]) -> list[GroupBytes]:
    """Optimizer state bytes per parameter group (the master copy not included)."""
    s = state_bytes(tr)
    out: dict[str, list[int]] = {}

    def add(name: str, params: int, nbytes: int) -> None:
        cell = out.setdefault(name, [0, 0])
        cell[0] += params
        cell[1] += nbytes

    for t in tensors:
        n = t.numel
        if tr.optimizer in STATES:
            add(tr.optimizer.value, n, STATES[tr.optimizer] * s * n)
        elif tr.optimizer is Optimizer.adafactor:
            if t.cols:  # factored second moment: a row and a column vector per matrix
                add("adafactor factored (matrices)", n, s * t.count * (t.rows + t.cols))
            else:
                add("adafactor unfactored (vectors)", n, s * n)
        elif tr.optimizer is Optimizer.muon:
            if t.group == "hidden" and t.cols:
                add("muon (hidden matrices)", n, s * n)  # one momentum buffer
            else:
                add("adamw (embedding, head, gains, biases)", n, 2 * s * n)
        else:  # bitsandbytes 8-bit: uint8 moments + fp32 absmax per 256-block, or fp32 when small
            per_tensor = t.rows * (t.cols or 1)
            if per_tensor < BNB_MIN_8BIT_SIZE:
                add("32-bit states (tensors < 4096 elements)", n, 2 * s * n)
            else:
                blocks = -(-per_tensor // BNB_BLOCK)
                add("8-bit states", n, t.count * 2 * (per_tensor + BNB_ABSMAX_BYTES * blocks))
    return [GroupBytes(k, v[0], v[1]) for k, v in out.items()]


# ---------------------------------------------------------------------------- tensor inventories
def block_tensors(m: ModelConfig, moe: bool, T: int = 1, ep: int = 1, etp: int | None = None) -> list[Tensors]:
    """The parameter tensors of one block on one rank: its Linear weights, the routed experts
    (one matrix per expert and projection), the router, and the rest as vectors (norms, biases,
    sinks, q/k norms) whose total makes the block's shard exact."""
    from transformer_calc.estimators.training.finetune import block_linears
    from transformer_calc.estimators.params import shard_params

    etp = T if etp is None else etp
    out = [Tensors("hidden", lin.d_out, lin.d_in) for lin in block_linears(m, moe, T)]
    if moe:
        F = m.moe_d_ff // etp
        n_mats = 3 if m.gated_mlp else 2
        out.append(Tensors("hidden", F, m.d_model, (n_mats - 1) * (m.n_experts // ep)))  # gate, up: F x D
        out.append(Tensors("hidden", m.d_model, F, m.n_experts // ep))  # down: D x F
        if m.router:
            out.append(Tensors("hidden", m.n_experts, m.d_model))
    shard = shard_params(m, T, ep, etp)
    total = shard.layer if moe else shard.dense_layer
    vectors = total - sum(t.numel for t in out)  # norms, biases (the experts' too), sinks
    if vectors:
        out.append(Tensors("vector", vectors, 0))
    return out


def stage_tensors(m: ModelConfig, T: int, ep: int, etp: int | None, n_moe: int, n_dense: int,
                  first: bool, last: bool, P: int) -> list[Tensors]:
    """Every parameter tensor one GPU of a pipeline stage holds (before ZeRO)."""
    from transformer_calc.estimators.params import count_params, shard_params

    out: list[Tensors] = []
    for moe, n in ((True, n_moe), (False, n_dense)):
        if n:
            out += [Tensors(t.group, t.rows, t.cols, t.count * n) for t in block_tensors(m, moe, T, ep, etp)]
    full, shard = count_params(m), shard_params(m, T, ep, etp)
    rows = -(-m.vocab_size // T)
    if first:
        out.append(Tensors("embedding", rows, m.d_embedding))
        if full.position:
            out.append(Tensors("embedding", m.max_seq_len + m.position_offset, m.d_model))
        if full.embedding_projection:
            out.append(Tensors("hidden", m.d_model, m.d_embedding, 2))
        if full.embedding_norm:
            out.append(Tensors("vector", full.embedding_norm, 0))
    if last:
        if full.final_norm:
            out.append(Tensors("vector", full.final_norm, 0))
        if not m.tied_embeddings:
            out.append(Tensors("head", rows, m.d_embedding))
        elif P > 1:
            out.append(Tensors("head", rows, m.d_embedding))  # the last stage's copy of the tied table
        if full.lm_head_bias:
            out.append(Tensors("vector", shard.lm_head - (0 if m.tied_embeddings else rows * m.d_embedding), 0))
    return out


def adapter_tensors(m: ModelConfig, tr: Training, T: int, n_moe: int, n_dense: int, first: bool, last: bool,
                    P: int, counts: LayerCounts | None = None) -> list[Tensors]:
    """The trainable tensors under adapters: A (r x d_in) and B (d_out x r) per adapted module,
    DoRA's magnitude vectors, a trained embedding or head. `counts`: the layers by kind (a hybrid's:
    finetune.layer_counts), in place of n_moe attention+MoE blocks and n_dense attention+MLP ones."""
    from transformer_calc.model.config import Finetune
    from transformer_calc.estimators.training.finetune import adapter_linears, block_linears, embedding_linears, lin_rank, selected

    out: list[Tensors] = []

    def adapters(linears: list, n: int) -> None:
        for lin in linears:
            if selected(lin, tr.lora_targets):
                out.append(Tensors("hidden", lin_rank(lin, tr), lin.d_in, n * lin.count))
                out.append(Tensors("hidden", lin.d_out, lin_rank(lin, tr), n * lin.count))
                if tr.finetune is Finetune.dora:
                    out.append(Tensors("vector", lin.d_out, 0, n * lin.count))

    if counts is not None:
        from transformer_calc.estimators.training.finetune import layer_linears

        for linears, n in layer_linears(m, counts, T):
            adapters(linears, n)
    for moe, n in ((True, n_moe), (False, n_dense)) if counts is None else ():
        if n:
            adapters(adapter_linears(m, True, T) if moe else block_linears(m, False, T), n)
    side_first, side_last = embedding_linears(m)
    rows = -(-m.vocab_size // T)
    if first:
        adapters(side_first, 1)
        if tr.train_embeddings:
            out.append(Tensors("embedding", rows, m.d_embedding))
    if last:
        adapters(side_last, 1)
        if tr.train_head and not m.tied_embeddings:
            out.append(Tensors("head", rows, m.d_embedding))
            if m.lm_head_bias:
                out.append(Tensors("vector", rows, 0))
        elif m.tied_embeddings and (tr.train_head or tr.train_embeddings) and not (first and tr.train_embeddings):
            out.append(Tensors("head", rows, m.d_embedding))
    return out


def model_groups(m: ModelConfig, tr: Training) -> list[GroupBytes]:
    """The optimizer's parameter groups over the whole model (T = P = 1): the trainable tensors
    (every parameter, or the adapters and a trained embedding/head).

    An optimizer whose states are per parameter (AdamW, SGD, Lion) does not depend on shapes: the
    trainable parameters (layer_structure.trainable_params, every layer structure's one entry point) are
    one group. A shape-dependent one (SHAPED) reads the tensor inventory: the adapters' tensors summed
    over the layers by kind (finetune.layer_counts: a uniform model is one kind), or every parameter
    tensor (models whose layers the inventory does not hold are refused before: support.py)."""
    if tr.optimizer not in SHAPED:
        from transformer_calc.estimators.training.layer_structure import trainable_params

        n = trainable_params(m, tr).total
        return groups(tr, [Tensors("vector", n, 0)] if n else [])
    if tr.adapters:
        from transformer_calc.estimators.training.finetune import layer_counts

        return groups(tr, adapter_tensors(m, tr, 1, 0, 0, True, True, 1, counts=layer_counts(m)))
    n_moe = m.n_moe_layers()
    return groups(tr, stage_tensors(m, 1, 1, None, n_moe, m.n_layers - n_moe, True, True, 1))


def master_bytes(tr: Training) -> int:
    """The fp32 master copy per parameter: mixed precision only, and not under adapters (the
    trainable parameters are themselves fp32 there)."""
    return 4 if tr.precision is Precision.mixed and not tr.adapters else 0
