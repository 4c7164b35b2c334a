"""The typed contract of a command's result (issue 21).

A result is a tree of frozen pydantic models (`Section`s) whose fields are the command's JSON keys,
in the JSON's order: `--format json` is `result.model_dump(mode="json")`, the Python API returns
the object itself (`tc.memory(...).memory.peak_bytes`), render reads its attributes, and
`tcalc schema COMMAND` prints its JSON Schema. Every number is finite by construction (a NaN or
an infinity is an internal error, never output). Optional top-level sections a command did not
produce are left unset and so absent from the JSON, as before.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


def _non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN/infinity inside plain containers, else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        for k, v in value.items():
            if (bad := _non_finite(v, f"{path}.{k}")) is not None:
                return bad
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if (bad := _non_finite(v, f"{path}[{i}]")) is not None:
                return bad
    return None


# Fractions of a peak: a utilization is achieved work over the most the hardware can do, so it lies
# in [0, 1] whatever the convention (MFU, HFU; Chowdhery et al. 2022 App. B).
UTILIZATIONS = frozenset({"mfu", "hfu", "mbu"})
TOLERANCE = 1e-9


class Section(BaseModel):
    """A typed part of a result: frozen, no undeclared keys, every number finite, every
    utilization physically possible (an impossible one is errors.ImpossibleResult, a bug)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="after")
    def _finite(self) -> Section:
        for name, value in self.__dict__.items():
            if not isinstance(value, BaseModel) and (bad := _non_finite(value, name)) is not None:
                raise ValueError(f"{type(self).__name__}.{bad} is not a finite number")
            if name in UTILIZATIONS and isinstance(value, float) and not -TOLERANCE <= value <= 1 + TOLERANCE:
                from transformer_calc.errors import ImpossibleResult

                raise ImpossibleResult(f"{type(self).__name__}.{name} = {value:.4g} is not a fraction of the peak")
        return self


class Result(Section):
    """A command's whole result. `model_dump` leaves out the optional sections the command did not
    produce (unset fields), so the JSON has no key for them."""

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("exclude_unset", True)
        return super().model_dump(**kwargs)

    def model_dump_json(self, **kwargs: Any) -> str:
        kwargs.setdefault("exclude_unset", True)
        return super().model_dump_json(**kwargs)
