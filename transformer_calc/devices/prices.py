"""Accelerator prices per GPU-hour: the sourced table (`presets/prices.yaml`), a user's prices file
(`--prices FILE`, the same schema) and the lookup `price_for`. This module never reads files:
`sources/presets.py` loads the YAML and hands the mapping to `parse_price_table`.

Conventions: US dollars per GPU-hour; a cloud instance of 8 GPUs is its hourly price / 8. `kind`
is on_demand (pay as you go), reserved (a commitment or a reserved block) or spot (preemptible).
Every entry names its `source` and the `date` (YYYY-MM) the price was published or read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from transformer_calc.errors import TcalcError

PRICE_KINDS = ("on_demand", "reserved", "spot")
_DATE = re.compile(r"^(19|20)\d\d-(0[1-9]|1[0-2])$")


class Price(BaseModel):
    """One published price of one accelerator."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str = Field(min_length=1, description="a GPU name or alias of the hardware table")
    kind: Literal["on_demand", "reserved", "spot"]
    usd_per_gpu_hour: Annotated[float, Field(gt=0, lt=1e4, allow_inf_nan=False, strict=False)]
    provider: str = Field(min_length=1)
    date: str = Field(description="YYYY-MM: when the price was published or read")
    source: str = Field(min_length=1)
    notes: str | None = None

    @field_validator("date")
    @classmethod
    def _month(cls, value: str) -> str:
        if not _DATE.match(value):
            raise ValueError(f"date {value[:20]!r} must be YYYY-MM")
        return value


def parse_price_table(data: Mapping[str, Any], where: str = "price table") -> list[Price]:
    """The entries of a prices mapping ({schema_version: 1, prices: [...]}), validated; errors name
    the entry and the field."""
    if not isinstance(data, Mapping) or not isinstance(data.get("prices"), list):
        raise TcalcError(f"{where}: expected a mapping with a 'prices' list")
    extra = sorted(set(data) - {"schema_version", "prices"})
    if extra:
        raise TcalcError(f"{where}: unknown top-level key {str(extra[0])[:40]!r}; expected schema_version, prices")
    if data.get("schema_version", 1) != 1:
        raise TcalcError(f"{where}: schema_version {str(data.get('schema_version'))[:20]!r} is not supported; expected 1")
    out = []
    for i, raw in enumerate(data["prices"], start=1):
        if not isinstance(raw, Mapping):
            raise TcalcError(f"{where} entry #{i}: expected a mapping of fields")
        try:
            out.append(Price.model_validate(dict(raw)))
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise TcalcError(f"{where} entry #{i}: {field + ': ' if field else ''}"
                             f"{err['msg'].removeprefix('Value error, ')}") from None
    return out


def price_for(prices: list[Price], gpu_name: str, kind: str, resolve: Any) -> Price | None:
    """The price of `gpu_name` (a canonical name) of `kind`: of the entries whose `gpu` resolves to
    it (`resolve(name) -> canonical name`), the latest date; the first listed wins a tie. None when
    there is none."""
    if kind not in PRICE_KINDS:
        raise TcalcError(f"--price-kind ({str(kind)[:40]!r}) must be one of {', '.join(PRICE_KINDS)}")
    found = [p for p in prices if p.kind == kind and resolve(p.gpu) == gpu_name]
    if not found:
        return None
    return max(enumerate(found), key=lambda ip: (ip[1].date, -ip[0]))[1]
