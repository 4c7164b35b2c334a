"""Sequence mixers other than softmax attention: one module per kind, each declared in the kinds' table
(model/mixer_blocks.py), from which the registry here is built.

`MIXERS[kind]` is the `base.Mixer` of a `LayerAttention` kind that is not softmax attention. The
estimators (params, flops, roofline) sum each kind's per-layer numbers over the layers of that kind;
estimators that do not model a kind yet refuse a model that has it (`require_attention_only`), through the
one table of what each block does not price (estimators/support_table.py), which generates every refusal line.
How to add a kind: docs/adding-a-block.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from transformer_calc.estimators.support_table import Unpriced, refuse
from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.model.mixer_blocks import MIXER_BLOCKS
from transformer_calc.estimators.mixers.base import Mixer, MixerFlops, MixerLinear, MixerParams, MixerState

# kind -> the module holding its `MIXER`, from the kinds' declarations (model/mixer_blocks.py): imported on
# first use, so that a model without mixers (and the CLI's start-up) never loads them (issue 39)
MIXER_MODULES: dict[LayerAttention, str] = {block.kind: block.module for block in MIXER_BLOCKS}


class _Registry(Mapping[LayerAttention, Mixer]):
    """`MIXER_MODULES` as a read-only mapping of kind -> Mixer, each module imported on first use."""

    def __init__(self, modules: dict[LayerAttention, str]) -> None:
        self._modules = modules
        self._loaded: dict[LayerAttention, Mixer] = {}

    def __getitem__(self, kind: LayerAttention) -> Mixer:
        try:
            return self._loaded[kind]
        except KeyError:
            pass
        module = importlib.import_module(f"{__name__}.{self._modules[kind]}")  # KeyError: not a mixer kind
        mixer_: Mixer = module.MIXER
        self._loaded[kind] = mixer_
        return mixer_

    def __contains__(self, kind: object) -> bool:
        return kind in self._modules

    def __iter__(self) -> Iterator[LayerAttention]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


MIXERS: Mapping[LayerAttention, Mixer] = _Registry(MIXER_MODULES)

__all__ = ["MIXERS", "Mixer", "MixerFlops", "MixerLinear", "MixerParams", "MixerState", "mixer",
           "require_attention_only", "require_training_priced", "require_uniform_blocks"]


def mixer(kind: LayerAttention) -> Mixer:
    return MIXERS[kind]


# The estimates' refusals, by the one table of what each block does not price (estimators/support_table.py).
def require_attention_only(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, an estimate written for softmax-attention blocks only (FP8 recipes, the optimizers
    whose states follow each tensor's shape) for a model with any block of the table."""
    refuse(m, what, Unpriced.attention_only)


def require_training_priced(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, a training estimate (memory, timeline, step time) for the blocks no training
    estimate prices yet (Gemma 3n's and DeepSeek-V4's blocks, Zamba2's shared blocks). The mixers, the gated
    attention output, Gemma 4's varied layers (training/gemma4.py), MiMo-V2-Flash's per-kind attention and
    narrower values (training/kind_attention.py) and the latent MoE are priced (docs/formulas.md §2.10)."""
    refuse(m, what, Unpriced.training)


def require_uniform_blocks(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, an estimate that prices every block from one layer's shapes (adapters in
    training/finetune.py, quantized formats in inference/quant.py, which list Gemma 4's layers by class
    before asking here) for a model whose layers differ beyond the mixer kinds."""
    refuse(m, what, Unpriced.uniform)
