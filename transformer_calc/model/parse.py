"""The parsers of user values every config shares: booleans are never numbers, whole numbers as
people type them (8k, 4M, 1e3), byte sizes (70GiB, 80GB).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, model_validator

from transformer_calc.errors import TcalcError, clip


def _is_number_field(annotation: Any) -> bool:
    """int, float, or one of them | None (the fields a boolean must never fill)."""
    import types
    import typing

    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union else (annotation,)
    return any(a in (int, float) for a in args)


def reject_bool_numbers(cls: Any, data: Any) -> None:
    """YAML's yes/on/true and --set n_layers=true are booleans: never a number (True is not 1)."""
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        field = cls.model_fields.get(key)
        if field is not None and isinstance(value, bool) and _is_number_field(field.annotation):
            raise ValueError(f"{key} ({clip(value)}) is a boolean, not a number; give a number")


class StrictInputs(BaseModel):
    """Config models whose numeric fields never take a boolean."""

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        reject_bool_numbers(cls, data)
        return data


_BYTE_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(text: str | int, what: str = "size") -> int:
    """'70GiB' -> 75161927680, '80GB' -> 80000000000, '1.5TiB', '4096' (bytes). GB = 10^9 and
    GiB = 2^30, both explicit; units are case-insensitive. Exact for decimal inputs."""
    import re
    from decimal import Decimal, InvalidOperation

    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = Decimal(text), "b"
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if not match or match.group(2).lower() not in {"", *_BYTE_UNITS}:
            raise ValueError(f"{what} ({clip(text)}) is not a size; write e.g. 70GiB, 80GB or 1.5TiB")
        digits, _, exponent = match.group(1).lower().partition("e")
        if len(digits.split(".")[0].lstrip("0")) + int(exponent or 0) > MAX_EXPONENT:
            raise ValueError(f"{what} ({clip(text)}) is too large; use a size below 1e{MAX_EXPONENT} bytes")
        try:
            value = Decimal(match.group(1))
        except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
            raise ValueError(f"{what} ({clip(text)}) is not a number") from None
        unit = match.group(2).lower() or "b"
    total = value * _BYTE_UNITS[unit]
    if total <= 0:
        raise ValueError(f"{what} ({clip(text)}) must be positive")
    return int(total)


# The one parser of whole numbers as people type them (flags, job-file counts, API strings).
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12, "p": 10**15}


_BINARY = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


MAX_EXPONENT = 30  # 1e30 is beyond any count tcalc takes (tokens, FLOPs, lengths): refused before computing


def parse_whole(text: str | int, what: str = "value", low: int = 1, high: int | None = None,
                binary: bool = False) -> int:
    """'8192', '8k', '4M', '1.4T', '70B', '1e3', '1_000' -> an exact int in [low, high]: suffixes
    decimal (k = 10^3, M = 10^6, G/B = 10^9, T = 10^12, P = 10^15), or binary with `binary`
    (sequence lengths: 8k = 8192). A fraction, a number out of range, or an exponent past
    MAX_EXPONENT is a ValueError naming the value (never a Decimal overflow or a 10^6-digit int)."""
    from decimal import Decimal, InvalidOperation

    if isinstance(text, bool):
        raise ValueError(f"{text} is a boolean, not a number; give a whole number")
    if isinstance(text, int):
        value = text
    else:
        raw = str(text).strip().replace("_", "")
        match = re.fullmatch(r"([+-]?)([0-9]*\.?[0-9]+)(?:[eE]([+-]?[0-9]{1,12}))?\s*([a-zA-Z]?)", raw)
        suffixes = _BINARY if binary else _DECIMAL
        if not match or match.group(4).lower() not in suffixes:
            raise ValueError(f"{clip(text, 40)} is not a whole number (write e.g. 8192, 8k, 4M or 1e3)")
        digits, exponent = match.group(2), int(match.group(3) or 0)
        magnitude = len(digits.split(".")[0].lstrip("0")) + exponent
        if magnitude > MAX_EXPONENT:
            raise ValueError(f"{clip(text, 40)} is too large; use a whole number below 1e{MAX_EXPONENT}")
        try:
            number = Decimal(digits) * (Decimal(10) ** exponent) * suffixes[match.group(4).lower()]
        except InvalidOperation:  # pragma: no cover - the pattern admits only finite decimals
            raise ValueError(f"{clip(text, 40)} is not a number") from None
        if number != number.to_integral_value():
            raise ValueError(f"{clip(text, 40)} is not a whole number")
        value = int(number) * (-1 if match.group(1) == "-" else 1)
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValueError(f"{clip(value, 40)} is out of range; use a whole number {bound}")
    return value


def parse_count(text: str | int, what: str = "count") -> int:
    """'300e9' -> 300000000000, '1.4T' / '70B' / '7M' / '2k' (decimal suffixes), '4096': an exact
    positive integer (a token budget, a FLOP budget, a parameter count); `parse_whole`'s rules."""
    try:
        return parse_whole(text, what)
    except TcalcError:
        raise
    except ValueError as exc:
        reason = str(exc).split(" (write e.g.")[0]
        if "is not a whole number" in reason and not any(ch.isdigit() for ch in str(text)):
            raise ValueError(f"{what} ({clip(text)}) is not a number; write e.g. 300e9, 1.4T or 70B") from None
        raise ValueError(f"{what} ({clip(text)}): {reason}; write e.g. 300e9, 1.4T or 70B") from None


def int_or_none(value: Any) -> int | None:
    """The value if it is a usable int (pydantic reports the others with their field name): the
    cross-field checks read a raw spec before pydantic validates it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+").isdigit():
        return int(value)
    return None
