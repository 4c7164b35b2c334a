"""Gemma 4's layer classes (estimators/training/gemma4.py prices them; docs/formulas.md §5.14): which models
have them, and how many layers of each class a range of layers holds. Kept apart, importing only the model
config, so that the low-level refusals (estimators/mixers) can ask `is_gemma4` without an import cycle.

Source: transformers 5.23 models/gemma4/configuration_gemma4.py (`layer_types`, `kv_sharing_modes`: the last
num_kv_shared_layers layers read the K/V of the last earlier layer of their kind).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import ATTENTION_KINDS, LayerAttention, LayerStructureKind, ModelConfig


def is_gemma4(m: ModelConfig) -> bool:
    """Gemma 4's varied layers (and no Gemma 3n or DeepSeek-V4 block): what this module prices."""
    return m.layer_structure_kind is LayerStructureKind.gemma4


@dataclass(frozen=True)
class LayerClass:
    """One of Gemma 4's layer classes: its attention kind and whether it borrows another layer's K/V."""

    kind: LayerAttention
    kv_shared: bool

    def count(self, m: ModelConfig, start: int, stop: int) -> int:
        """Layers of this class among [start, stop) (closed form)."""
        first = m.first_kv_shared_layer
        lo, hi = (max(start, first), stop) if self.kv_shared else (start, min(stop, first))
        return m.n_attention_layers(self.kind, lo, hi) if lo < hi else 0


def layer_classes(m: ModelConfig) -> list[LayerClass]:
    """The classes the model has (at least one layer each)."""
    out = []
    for kind in (k for k in LayerAttention if k in ATTENTION_KINDS):
        for shared in (False, True):
            c = LayerClass(kind, shared)
            if c.count(m, 0, m.n_layers):
                out.append(c)
    return out


def last_class(m: ModelConfig) -> LayerClass:
    """The class of the model's last layer (the block a pipeline's backward starts from)."""
    kind = m.attention_pattern[(m.n_layers - 1) % len(m.attention_pattern)]
    return LayerClass(kind, m.kv_shared_layers > 0)
