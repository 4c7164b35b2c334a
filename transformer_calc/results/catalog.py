"""`tcalc presets` and `tcalc hardware`: the model presets and the accelerator table.

A result is composed here from the estimators; docs/cli.md documents its keys."""

from __future__ import annotations

from pydantic import ConfigDict, RootModel

from transformer_calc.results.base import Result
from typing import Any
from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.estimators.params import (
    count_params,
    seed_block_approx,
    seed_total_approx,
    tensor_parallel_params,
)
from transformer_calc.results.common import gpu_dict


def presets_report() -> list[dict[str, Any]]:
    """`tcalc presets`: every model preset with its key numbers and source."""
    from transformer_calc.sources.presets import model_presets, preset_model

    rows = []
    for name, entry in model_presets().items():
        m = preset_model(name)
        rows.append(
            {
                "name": name,
                "family": entry.get("family"),
                "aliases": list(entry.get("aliases", [])),
                "params": count_params(m).total,
                "n_layers": m.n_layers,
                "d_model": m.d_model,
                "n_heads": m.n_heads,
                "n_kv_heads": m.n_kv_heads,
                "d_ff": m.d_ff,
                "vocab_size": m.vocab_size,
                "max_seq_len": m.max_seq_len,
                "mlp": m.mlp.value,
                "n_experts": m.n_experts,
                "source": entry.get("source"),
            }
        )
    return rows


def hardware_report() -> list[dict[str, Any]]:
    """`tcalc hardware`: every accelerator with capacity, bandwidth, dense peaks, λ_math."""
    from transformer_calc.sources.presets import hardware_table

    return [gpu_dict(gpu) for gpu in hardware_table().values()]


def gpu_report(name: str) -> dict[str, Any]:
    """`tcalc hardware NAME`: one accelerator, looked up by name or alias (did-you-mean)."""
    from transformer_calc.sources.presets import gpu

    return gpu_dict(gpu(name))


class PresetsResult(RootModel[list[dict[str, Any]]]):
    """`tcalc presets`: one mapping per model preset."""

    model_config = ConfigDict(frozen=True)


class HardwareResult(RootModel[list[dict[str, Any]] | dict[str, Any]]):
    """`tcalc hardware [NAME]`: every accelerator, or one in detail."""

    model_config = ConfigDict(frozen=True)
