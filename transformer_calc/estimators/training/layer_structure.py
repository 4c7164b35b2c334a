"""How training prices the layers a pipeline stage holds: one protocol, one implementation per layer
structure, chosen once per model (`layer_structure`). Training memory (memory.py) and its callers never ask
which family a model is; they call the model's `LayerStructure`.

- `UNIFORM`: every layer priced from one layer's shapes by kind (attention kinds, mixers, MoE or dense
  channel): `params.shard_params`' blocks, finetune.py's adapters and frozen weights.
- `KIND_ATTENTION`: the same, but each attention kind's own bytes (MiMo-V2-Flash, training/kind_attention.py).
- Gemma 4's layer classes (training/gemma4.py `LAYERS`): each class (attention kind, kv-shared) priced
  with its own widths, the per-layer input path on the first stage (docs/formulas.md §5.14).

A new layer structure is one more implementation in its own module, registered in `STRUCTURES` under a
`LayerStructureKind` the model computes (`ModelConfig.layer_structure_kind`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from transformer_calc.estimators.training import kind_attention
from transformer_calc.estimators.support_table import Unpriced, refuse
from transformer_calc.estimators.training.layer_activations import LayerActivations
from transformer_calc.estimators.training.trainable import Trainable, all_trainable
from transformer_calc.model.config import LayerAttention, LayerStructureKind, ModelConfig, Parallelism, Training, Workload

if TYPE_CHECKING:
    from transformer_calc.estimators.params import ShardParams
    from transformer_calc.estimators.training.finetune import LayerCounts
    from transformer_calc.estimators.training.pipeline import Chunk

# finetune.py (adapters, frozen and NF4 weights) and gemma4.py (its layer classes) are imported where a
# model or a setting needs them: a full-training run of another family never loads them (issue 39)


class LayerStructure(Protocol):
    """What training memory asks of the layers of one pipeline stage (its chunks of layers)."""

    @property
    def varied(self) -> bool:
        """Layers differ by class in parameters: a middle stage can hold more than the first."""

    def check_layout(self, m: ModelConfig, par: Parallelism) -> None:
        """ValueError (the setting, the value, the fix) for a layout these layers are not priced for."""

    def check_tensor(self, m: ModelConfig, T: int) -> None:
        """ValueError when T ranks are not priced for these layers."""

    def params(self, m: ModelConfig, shard: ShardParams, chunks: tuple[Chunk, ...], first: bool) -> int:
        """Parameters of the stage's layers on one GPU (with the first stage's per-layer inputs)."""

    def side_adapter_params(self, m: ModelConfig, tr: Training) -> tuple[int, int]:
        """Adapter parameters outside the layers: (on the first stage, on the last)."""

    def adapter_params(self, m: ModelConfig, tr: Training, chunks: tuple[Chunk, ...], par: Parallelism) -> int:
        """Adapter parameters of the stage's layers on one GPU."""

    def frozen_weight_bytes(self, m: ModelConfig, tr: Training, params: int, chunks: tuple[Chunk, ...],
                            first: bool, par: Parallelism) -> tuple[int, int]:
        """(bytes of the frozen base weights, of them NF4-quantized) of the stage under adapters."""

    def last_layer(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> LayerActivations | None:
        """What the model's last layer keeps for backward when its layers differ by class (None: the
        estimators' one-layer formula holds)."""

    def parts(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> Any:
        """Every layer class's stored bytes (`chunk(m, start, stop)`, `largest`), or None: the layer
        pattern's kinds (activations.BlockParts)."""

    def head_extra(self, m: ModelConfig, w: Workload, tr: Training, eager: bool) -> tuple[int, int]:
        """Bytes the first and last stages keep beyond the embedding, head and loss (per-layer inputs)."""

    def last_attention_widths(self, m: ModelConfig, hd: int, v_dim: int, kv_t: int) -> tuple[int, int, int]:
        """(h_d, v width, K/V heads on a rank) of the last layer's attention, given the model's."""

    def block_params(self, m: ModelConfig, shard: ShardParams) -> tuple[int, int]:
        """(the largest block's parameters, the first block's) on one GPU."""

    @property
    def recomputed_block_peaks_at_start(self) -> bool:
        """A fully recomputed block's backward peaks as it starts, the whole block alive (Gemma 4's fp32 norms)."""

    @property
    def differs(self) -> bool:
        """Layers differ beyond MoE vs dense (activations.BlockParts per class or kind; no tensor inventory)."""

    def check_training(self, m: ModelConfig, tr: Training) -> None:
        """TcalcError (one line) for a training setting these layers are not priced under."""

    def attention_bytes(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism,
                        kind: LayerAttention) -> int | None:
        """The attention part of one layer of `kind` when it is shaped by its kind (None: the one-layer formula's)."""


def stage_counts(m: ModelConfig, chunks: tuple[Chunk, ...]) -> LayerCounts:
    """The layer counts (finetune.LayerCounts) of a stage's chunks, summed."""
    from transformer_calc.estimators.training.finetune import LayerCounts, layer_counts

    seq: dict[LayerAttention, int] = {}
    moe = dense = 0
    for c in chunks:
        lc = layer_counts(m, c.start, c.stop)
        for k, n in lc.sequence.items():
            seq[k] = seq.get(k, 0) + n
        moe, dense = moe + lc.moe, dense + lc.dense
    return LayerCounts(sequence=seq, moe=moe, dense=dense)


@dataclass(frozen=True)
class UniformLayers:
    """Layers priced from one layer's shapes per kind: the attention kinds, the mixers, MoE or dense."""

    varied: bool = False
    recomputed_block_peaks_at_start: bool = False
    differs: bool = False

    def check_layout(self, m: ModelConfig, par: Parallelism) -> None:
        if par.context > 1:  # attention's ring; the blocks that are not priced under it: support_table.py
            refuse(m, f"context parallelism (cp {par.context})", Unpriced.context)

    def check_tensor(self, m: ModelConfig, T: int) -> None:
        return None

    def params(self, m: ModelConfig, shard: ShardParams, chunks: tuple[Chunk, ...], first: bool) -> int:
        return sum(shard.blocks(m, c.start, c.stop) for c in chunks)

    def side_adapter_params(self, m: ModelConfig, tr: Training) -> tuple[int, int]:
        from transformer_calc.estimators.training.finetune import adapted, check_targets, embedding_linears

        check_targets(m, tr)
        first, last = (adapted(x, tr).params for x in embedding_linears(m))
        return first, last

    def adapter_params(self, m: ModelConfig, tr: Training, chunks: tuple[Chunk, ...], par: Parallelism) -> int:
        from transformer_calc.estimators.training.finetune import block_adapter_params, layer_counts

        return sum(block_adapter_params(m, tr, layer_counts(m, c.start, c.stop), par.tensor, par.expert,
                                        par.expert_tensor) for c in chunks)

    def frozen_weight_bytes(self, m: ModelConfig, tr: Training, params: int, chunks: tuple[Chunk, ...],
                            first: bool, par: Parallelism) -> tuple[int, int]:
        from transformer_calc.estimators.training.finetune import frozen_weight_bytes

        return frozen_weight_bytes(m, tr, params, stage_counts(m, chunks), par.tensor, par.expert, par.expert_tensor)

    def last_layer(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> LayerActivations | None:
        return None

    def parts(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> Any:
        return None

    def head_extra(self, m: ModelConfig, w: Workload, tr: Training, eager: bool) -> tuple[int, int]:
        return 0, 0

    def last_attention_widths(self, m: ModelConfig, hd: int, v_dim: int, kv_t: int) -> tuple[int, int, int]:
        return hd, v_dim, kv_t

    def block_params(self, m: ModelConfig, shard: ShardParams) -> tuple[int, int]:
        largest = max(shard.layer, shard.dense_layer)
        return largest, largest

    def check_training(self, m: ModelConfig, tr: Training) -> None:
        return None

    def attention_bytes(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism,
                        kind: LayerAttention) -> int | None:
        return None


@dataclass(frozen=True)
class KindAttentionLayers(UniformLayers):
    """Attention shaped by its kind (MiMo-V2-Flash: sliding layers with their own K/V heads and sinks, values
    narrower than h_d): the uniform layers but for each kind's attention bytes (training/kind_attention.py)."""

    differs: bool = True

    def attention_bytes(self, m: ModelConfig, w: Workload, tr: Training, par: Parallelism,
                        kind: LayerAttention) -> int | None:
        return kind_attention.attention_bytes(m, w, tr, par, kind)


UNIFORM = UniformLayers()
KIND_ATTENTION = KindAttentionLayers()


def _gemma4_layers() -> LayerStructure:
    from transformer_calc.estimators.training import gemma4  # loaded for a Gemma 4 model only (issue 39)

    return gemma4.LAYERS


# the model's kind (ModelConfig.layer_structure_kind) -> its implementation
STRUCTURES: dict[LayerStructureKind, Callable[[], LayerStructure]] = {
    LayerStructureKind.uniform: lambda: UNIFORM,
    LayerStructureKind.kind_attention: lambda: KIND_ATTENTION,
    LayerStructureKind.gemma4: _gemma4_layers,
}

_last: tuple[Any, LayerStructure] = (None, UNIFORM)  # the last model asked and its structure (rebound whole: thread-safe)


def layer_structure(m: ModelConfig) -> LayerStructure:
    """The model's layer structure, the one place training chooses it (a lookup by the model's kind)."""
    global _last
    last = _last
    if last[0] is m:  # a frozen model: the same object, the same answer (asked ~20 times per timeline)
        return last[1]
    structure = STRUCTURES[m.layer_structure_kind]()
    _last = (m, structure)
    return structure


def trainable_params(m: ModelConfig, tr: Training) -> Trainable:
    """The trainable parameters: every one under full training (trainable.py, no adapter module
    imported); under adapters finetune.py's count, or Gemma 4's layer classes (gemma4.trainable_params
    dispatches between the two)."""
    if not tr.adapters:
        return all_trainable(m)
    from transformer_calc.estimators.training.gemma4 import trainable_params as adapted_params

    return adapted_params(m, tr)
