"""Sequence mixers other than softmax attention: one module per kind, each declared in the kinds' table
(model/mixer_blocks.py), from which the registry here is built.

`MIXERS[kind]` is the `base.Mixer` of a `LayerAttention` kind that is not softmax attention. The
estimators (params, flops, roofline) sum each kind's per-layer numbers over the layers of that kind;
estimators that do not model a kind yet refuse a model that has it (`require_attention_only`). The blocks
some estimates do not price (mixers among them) are one table, `BLOCK_SUPPORT`: each names its block and
the estimates that price it, and every refusal line is generated from it (`unpriced`).
How to add a kind: docs/adding-a-block.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from transformer_calc.errors import TcalcError
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

__all__ = ["BLOCK_SUPPORT", "BlockSupport", "Estimate", "MIXERS", "Mixer", "MixerFlops", "MixerLinear", "MixerParams",
           "MixerState", "mixer", "require_attention_only", "require_regular_layers", "require_training_priced",
           "require_uniform_blocks", "unpriced"]


def mixer(kind: LayerAttention) -> Mixer:
    return MIXERS[kind]


class Estimate(str, Enum):
    """The families of estimates a block may or may not be priced in (`BLOCK_SUPPORT`)."""

    training = "training"  # memory, the timeline, step time (the training estimates)
    uniform = "uniform"  # estimates that price every block from one layer's shapes: adapters, quantized formats
    attention_only = "attention_only"  # estimates written for softmax-attention blocks only (FP8 recipes, ...)


@dataclass(frozen=True)
class BlockSupport:
    """A block beyond the standard attention + MLP/MoE layer: how a refusal names it (`labels`, empty when
    the model has none) and the estimates that price it."""

    labels: Callable[[ModelConfig], list[str]]
    priced: frozenset[Estimate]


_TRAINED_UNIFORM = frozenset({Estimate.training, Estimate.uniform})
# The one table of the blocks some estimates do not price yet, in the order a refusal lists them. Gemma 4's
# and Gemma 3n's varied layers and DeepSeek-V4's blocks are refused by `require_regular_layers`.
BLOCK_SUPPORT: tuple[BlockSupport, ...] = (
    BlockSupport(lambda m: [MIXERS[k].name for k in m.mixer_kinds], _TRAINED_UNIFORM),
    BlockSupport(lambda m: ["gated attention output"] if m.attn_output_gate else [], _TRAINED_UNIFORM),
    BlockSupport(lambda m: ["one-mixer-per-layer (Nemotron-H block)"] if m.one_mixer_per_layer else [],
                 _TRAINED_UNIFORM),
    BlockSupport(lambda m: ["shared transformer block (Zamba2)"] if m.shared_block_layer_ids else [], frozenset()),
    BlockSupport(lambda m: ["sliding attention with its own K/V heads or sinks (MiMo-V2-Flash)"]
                 if m.per_kind_attention else [], frozenset({Estimate.training})),  # training/kind_attention.py
    BlockSupport(lambda m: ["latent MoE (Nemotron 3 Super)"] if m.moe_latent_dim is not None else [],
                 frozenset({Estimate.training})),  # training/: experts, all-to-all and casts in ℓ
    BlockSupport(lambda m: ["value heads narrower than head_dim (MiMo-V2-Flash)"]
                 if not m.is_mla and m.v_dim != m.head_dim else [], frozenset({Estimate.training})),
)


def unpriced(m: ModelConfig, estimate: Estimate) -> list[str]:
    """The model's blocks that `estimate` does not price, by name (BLOCK_SUPPORT's order)."""
    return [label for block in BLOCK_SUPPORT if estimate not in block.priced for label in block.labels(m)]


def require_attention_only(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, an estimate that does not model the model's non-attention mixers (or
    Qwen3-Next's gated attention output) yet, rather than give a number that ignores them."""
    require_regular_layers(m, what)
    _refuse(m, what, unpriced(m, Estimate.attention_only))


def require_training_priced(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, a training estimate (memory, timeline, step time) for the parts it does not
    price yet: Gemma 3n's and DeepSeek-V4's blocks, Zamba2's shared blocks, Nemotron 3 Super's latent MoE.
    The mixers of this package and the gated attention output are priced (docs/formulas.md §2.10), Gemma 4's
    varied layers (estimators/training/gemma4.py) and MiMo-V2-Flash's per-kind attention and narrower values
    (estimators/training/kind_attention.py)."""
    from transformer_calc.estimators.training.gemma4_layers import is_gemma4

    if not is_gemma4(m):
        require_regular_layers(m, what)
    _refuse(m, what, unpriced(m, Estimate.training))


def require_uniform_blocks(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, an estimate that prices every block from one layer's shapes (adapters in
    training/finetune.py, quantized formats in inference/quant.py, which lists Gemma 4's layers by class
    before asking here) for a model whose layers differ beyond the mixer kinds: Gemma 4's varied layers
    (priced by class in training/gemma4.py where supported),
    MiMo-V2-Flash's per-kind attention and narrower values, and what `require_training_priced` refuses."""
    require_training_priced(m, what)
    require_regular_layers(m, what)
    _refuse(m, what, unpriced(m, Estimate.uniform))


def _refuse(m: ModelConfig, what: str, kinds: list[str]) -> None:
    if kinds:
        raise TcalcError(
            f"{what} is not modeled for {', '.join(kinds)} layers yet (model {m.name or 'given'}); "
            "use tcalc params, flops or inference for this model"
        )


def require_regular_layers(m: ModelConfig, what: str) -> None:
    """Refuse, in one line, an estimate that does not model Gemma 4's varied layers yet (full layers of
    another head width, k=v, shared-KV layers without a cache of their own, per-layer embeddings, the
    scaled router: `ModelConfig.irregular_layers`) or DeepSeek-V4's blocks, rather than price every layer
    as the base one."""
    if m.irregular_layers:
        if m.deepseek_v4 is not None:
            family, priced = "", "tcalc params and flops, and inference and serve at T 1 with a plain weight dtype"
        elif m.unpriced_blocks:  # AltUp / LAuReL: Gemma 3n's language model, whose training is not priced
            family, priced = "Gemma 3n; ", "tcalc params, flops, inference and serve"
        else:
            family, priced = "Gemma 4; ", "tcalc params, flops, inference, serve and (at T 1) memory"
        raise TcalcError(f"{what} is not modeled for {', '.join(m.irregular_layers)} ({family}model {m.name or 'given'}) "
                         f"yet; {priced} price this model")

