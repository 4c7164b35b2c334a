"""The sequence-mixer blocks' declarations: one entry per `LayerAttention` kind that is not softmax
attention, the one table the model layer and the mixer registry read (docs/adding-a-block.md).

Each `MixerBlock` says, for its kind (the `attention_pattern` entry): the module of
`transformer_calc/estimators/mixers/` that prices it (imported only when a model has the kind), the
ModelConfig fields a pattern with the kind must give, its cross-field check on the raw spec (ValueError
naming the field, the value and the fix), and the fields a result's model section lists only when a
model sets them (so that the JSON of every other model keeps its keys). `checks._check_pattern`,
`config.SHOWN_WHEN_SET` and `estimators.mixers.MIXER_MODULES` are built from this table, so a new mixer
kind is its `LayerAttention` value, one entry here, its estimator module and its source reader.

This module imports nothing from the estimators (imports go one way: estimators -> model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from transformer_calc.errors import clip
from transformer_calc.model.kinds import LayerAttention
from transformer_calc.model.parse import int_or_none

MAMBA2_FIELDS = ("ssm_heads", "ssm_head_dim", "ssm_state_size", "ssm_groups", "ssm_chunk_size", "conv_kernel")
DELTANET_FIELDS = ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim", "conv_kernel")
MAMBA_FIELDS = ("ssm_inner", "ssm_state_size", "ssm_dt_rank", "conv_kernel")


@dataclass(frozen=True)
class MixerBlock:
    """One sequence-mixer kind as the model layer knows it (its costs are its estimator module's)."""

    kind: LayerAttention
    module: str  # transformer_calc/estimators/mixers/<module>.py, holding `MIXER`
    required: tuple[str, ...]  # the fields a pattern with this kind must give
    shown: tuple[str, ...] = ()  # fields a result lists only when set (the required ones are shown when set too)
    check: Callable[[dict[str, Any]], None] | None = None  # cross-field check on the raw spec, after `required`


def _value_heads_multiple(d: dict[str, Any]) -> None:
    """Gated DeltaNet (both kinds): each key head serves H_v/H_k value heads (modeling_qwen3_next.py
    torch_chunk_gated_delta_rule: repeat_interleave)."""
    hk, hv = int_or_none(d.get("linear_key_heads")), int_or_none(d.get("linear_value_heads"))
    if hk and hv and hv % hk:
        raise ValueError(
            f"linear_value_heads ({hv}) must be a multiple of linear_key_heads ({hk}) "
            "(each key head serves H_v/H_k value heads); use a multiple of it"
        )


def _equal_widths(kind: str, why: str, pairs: tuple[tuple[str, str], ...]) -> Callable[[dict[str, Any]], None]:
    """A check that each (field, other) pair of the kind's widths is equal."""

    def check(d: dict[str, Any]) -> None:
        for key, other in pairs:
            if int_or_none(d.get(key)) != int_or_none(d.get(other)):
                raise ValueError(
                    f"{key} ({clip(d.get(key))}) must equal {other} ({clip(d.get(other))}) in a model with {kind} layers "
                    f"({why}); set it to {clip(d.get(other))}"
                )

    return check


def _heads_multiple_of_groups(d: dict[str, Any]) -> None:
    """Mamba-2: the B/C groups split the heads evenly (modeling_mamba2.py)."""
    heads, groups = int_or_none(d.get("ssm_heads")), int_or_none(d.get("ssm_groups"))
    if heads and groups and heads % groups:
        raise ValueError(f"ssm_heads ({heads}) must be a multiple of ssm_groups ({groups}); use a multiple of it")


_HEADS_AND_WIDTHS = (("linear_value_heads", "linear_key_heads"), ("linear_value_head_dim", "linear_key_head_dim"))

# The one table, in the order `_check_pattern` checks the kinds.
MIXER_BLOCKS: tuple[MixerBlock, ...] = (
    MixerBlock(LayerAttention.deltanet, "deltanet", DELTANET_FIELDS, ("deltanet_split_in_proj",), _value_heads_multiple),
    MixerBlock(LayerAttention.kda, "kda", DELTANET_FIELDS, (),
               _equal_widths("kda", "Kimi Delta Attention's q, k and v share heads and width", _HEADS_AND_WIDTHS)),
    MixerBlock(LayerAttention.olmo_gdn, "olmo_gdn", DELTANET_FIELDS, (), _value_heads_multiple),
    MixerBlock(LayerAttention.mamba, "mamba", MAMBA_FIELDS),
    MixerBlock(LayerAttention.lightning, "lightning", ("lightning_block_size",)),
    MixerBlock(LayerAttention.conv, "shortconv", ("conv_kernel",), ("short_conv_bias",)),
    MixerBlock(LayerAttention.mamba2, "mamba2", MAMBA2_FIELDS,
               ("ssm_proj_bias", "ssm_conv_bias", "ssm_out_bias", "ssm_norm"), _heads_multiple_of_groups),
)

BLOCKS_BY_KIND: dict[LayerAttention, MixerBlock] = {b.kind: b for b in MIXER_BLOCKS}


def check_mixer_kinds(d: dict[str, Any], kinds: set[str]) -> None:
    """Each mixer kind of the pattern (`kinds`: their values) has its fields, and they agree."""
    for block in MIXER_BLOCKS:
        if block.kind.value not in kinds:
            continue
        missing = [k for k in block.required if d.get(k) is None]
        if missing:
            raise ValueError(f"attention_pattern has {block.kind.value} layers but {', '.join(missing)} is not given; give it")
        if block.check is not None:
            block.check(d)


def shown_when_set() -> frozenset[str]:
    """Every mixer field a result lists only when the model sets it."""
    return frozenset(name for b in MIXER_BLOCKS for name in (*b.required, *b.shown))
