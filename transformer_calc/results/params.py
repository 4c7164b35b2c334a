"""`tcalc params`: the exact count with its breakdown, the seed's approximations, weight bytes.

A result is composed here from the estimators; docs/cli.md documents its keys."""

from __future__ import annotations
from typing import Any
from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.estimators.params import (
    count_params,
    seed_block_approx,
    seed_total_approx,
    tensor_parallel_params,
)
from transformer_calc.results.common import model_dict


def params_report(m: ModelConfig, bytes_per_param: int = 2, T: int = 1, dtype: str | None = None) -> dict[str, Any]:
    """`tcalc params`: exact count with breakdown, the seed's approximations, weight bytes."""
    counts = count_params(m)
    total = counts.total
    approx_blocks, approx_total = seed_block_approx(m), seed_total_approx(m)
    per_rank = tensor_parallel_params(m, T) if T > 1 else total
    return {
        "model": model_dict(m),
        "params": counts.as_dict(),
        "approximations": {
            "seed_blocks": approx_blocks,
            "seed_blocks_rel_error": (approx_blocks - total) / total,
            "seed_total": approx_total,
            "seed_total_rel_error": (approx_total - total) / total,
        },
        "weights": {
            "dtype": dtype or {4: "fp32", 2: "bf16", 1: "fp8"}.get(bytes_per_param),
            "bytes_per_param": bytes_per_param,
            "bytes": total * bytes_per_param,
            "tensor_parallel": T,
            "params_per_rank": per_rank,
            "bytes_per_rank": per_rank * bytes_per_param,
        },
    }
