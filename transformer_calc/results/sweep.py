"""`tcalc sweep`: a grid priced point by point (estimators/sweep.py); its result type."""

from __future__ import annotations

from typing import Any

from transformer_calc.results.base import Result


class SweepResult(Result):
    axes: dict[str, list[Any]]
    metrics: list[str]
    points_total: int
    points: list[dict[str, Any]]
    skipped: int
    skipped_reasons: list[str]
