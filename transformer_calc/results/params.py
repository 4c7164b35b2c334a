"""`tcalc params`: the exact count with its breakdown, the seed's approximations, weight bytes.

The typed result (`ParamsResult`) is the command's JSON (`model_dump(mode="json")`), the Python
API's return value and what render reads; docs/cli.md documents its keys.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from pydantic import create_model

from transformer_calc.estimators.params import (
    OPTIONAL_KEYS,
    LayerParams,
    ModelParams,
    count_params,
    seed_block_approx,
    seed_total_approx,
    tensor_parallel_params,
)
from transformer_calc.model.config import ModelConfig
from transformer_calc.results.base import Result, Section
from transformer_calc.results.common import CheckpointSection, ModelSection, TowersSection, model_section, towers_section

if TYPE_CHECKING:
    from transformer_calc.requests.flops import ParamsRequest


def _count_fields() -> dict[str, Any]:
    """The keys of `ModelParams.as_dict`, in its order, each an exact int."""
    names = ["total", "non_embedding", "active"]
    names += [f.name for f in fields(ModelParams) if f.name not in ("layer", "dense_layer", "attention_by_field")]
    names += ["per_layer"] + [f"per_layer_{f.name}" for f in fields(LayerParams)]
    names += [f"layers_{f.name}" for f in fields(LayerParams)]
    names += ["n_dense_layers", "per_dense_layer", "layers", "total_with_mtp"]
    # OPTIONAL_KEYS (Zamba2's shared_blocks): a key only for the models that have them
    return {name: ((int | None, None) if name in OPTIONAL_KEYS else (int, ...)) for name in names}


# Every count of `estimators.params.ModelParams` (whole model, per block, per component summed over
# the blocks), generated from the estimator's own dataclasses: a new component is a new key here
# without a second declaration.
ParamCounts = create_model("ParamCounts", __base__=Section, **_count_fields())


class Approximations(Section):
    seed_blocks: int  # (4+2E)·L·D², the seed's blocks-only formula
    seed_blocks_rel_error: float  # (approx - exact) / exact
    seed_total: int  # 12·L·D² + V·D
    seed_total_rel_error: float


class WeightBytes(Section):
    dtype: str | None
    bytes_per_param: int
    bytes: int
    tensor: int  # T
    params_per_rank: int
    bytes_per_rank: int


class ParamsResult(Result):
    model: ModelSection
    params: ParamCounts
    approximations: Approximations
    weights: WeightBytes
    towers: TowersSection | None = None
    checkpoint: CheckpointSection | None = None


def params_report(m: ModelConfig, bytes_per_param: int = 2, T: int = 1, dtype: str | None = None,
                  checkpoint: CheckpointSection | None = None) -> ParamsResult:
    """`tcalc params`: exact count with breakdown, the seed's approximations, weight bytes."""
    counts = count_params(m)
    lm = counts.total  # the language model: what the seed's approximations describe
    towers = m.tower_params  # counted towers (0: text-only decoder, or text_only), whole on every rank
    total = lm + towers
    approx_blocks, approx_total = seed_block_approx(m), seed_total_approx(m)
    per_rank = (tensor_parallel_params(m, T) + towers) if T > 1 else total
    breakdown = counts.as_dict()
    for key in ("total", "non_embedding", "active", "total_with_mtp"):  # whole-model counts: towers in
        breakdown[key] += towers
    extra: dict[str, Any] = {}
    if (section := towers_section(m, "params")) is not None:
        extra["towers"] = section
    if checkpoint is not None:
        extra["checkpoint"] = checkpoint
    return ParamsResult(
        model=model_section(m),
        params=ParamCounts(**breakdown),
        approximations=Approximations(
            seed_blocks=approx_blocks,
            seed_blocks_rel_error=(approx_blocks - lm) / lm,
            seed_total=approx_total,
            seed_total_rel_error=(approx_total - lm) / lm,
        ),
        weights=WeightBytes(
            dtype=dtype or {4: "fp32", 2: "bf16", 1: "fp8"}.get(bytes_per_param),
            bytes_per_param=bytes_per_param,
            bytes=total * bytes_per_param,
            tensor=T,
            params_per_rank=per_rank,
            bytes_per_rank=per_rank * bytes_per_param,
        ),
        **extra,
    )


# ---------------------------------------------------------------------------- the command
def run_params(req: ParamsRequest) -> ParamsResult:
    from transformer_calc.devices.hardware import COMPUTE_DTYPE_BYTES, compute_dtype
    from transformer_calc.results.common import source_checkpoint

    name = compute_dtype(req.dtype, req.p) or "bf16"
    src = req.source()
    return params_report(src.model, bytes_per_param=COMPUTE_DTYPE_BYTES[name], T=req.tensor, dtype=name,
                         checkpoint=source_checkpoint(src))
