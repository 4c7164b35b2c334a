"""The options of what a run costs (issue 40), declared once and shared by `tcalc train` and
`tcalc serve`: the price, the energy factors and (train) the failure and checkpoint model. Their
defaults and sources: estimators/cost.py, estimators/goodput.py, presets/prices.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from transformer_calc.requests.base import opt, positive

COST = "Cost, energy and goodput"


def _non_negative(text: object) -> float:
    """A finite number >= 0 (a count of seconds that may be none)."""
    import math

    if isinstance(text, bool):
        raise ValueError(f"{text!r} is a boolean, not a number; write e.g. 0")
    try:
        value = float(str(text).strip())
    except (ValueError, OverflowError):
        raise ValueError(f"{str(text)[:40]} is not a number; write e.g. 0") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{str(text)[:40]} is out of range; use a number >= 0")
    return value


def _at_least_one(text: object) -> float:
    value = positive(text)
    if value < 1:
        raise ValueError(f"{value} is below 1; a factor on the IT power is >= 1 (1: none)")
    return value


Price = Annotated[float | None, opt("--price-per-gpu-hour", "--price", help="US dollars per GPU-hour; replaces the price table's \\[default: the table's latest --price-kind price for the GPU, presets/prices.yaml].", panel=COST, parse=positive, job=False)]
PriceKind = Annotated[str | None, opt("--price-kind", help="on_demand | reserved | spot: which of the table's prices \\[default: on_demand].", panel=COST, job=False)]
Prices = Annotated[Path | None, opt("--prices", help="A prices file in presets/prices.yaml's schema: its entries win over the table's \\[default: none].", panel=COST, job=False)]
Pue = Annotated[float | None, opt("--pue", help="Power usage effectiveness, facility / IT energy \\[default: 1.1, Touvron et al. 2023].", panel=COST, parse=_at_least_one, job=False)]
NodeOverhead = Annotated[float | None, opt("--node-overhead", help="The host's power (CPUs, NICs, fans) as a factor on the GPUs' \\[default: 1.0, GPUs only; DGX H100 rated 1.82].", panel=COST, parse=_at_least_one, job=False)]
GridIntensity = Annotated[float | None, opt("--grid-intensity-g-per-kwh", "--grid-intensity", help="Grid carbon intensity, g CO2eq per kWh, location- or market-based \\[default: 385, the US average of Touvron et al. 2023].", panel=COST, parse=_non_negative, job=False)]
InterruptionRate = Annotated[float | None, opt("--interruptions-per-gpu-day", help="Job interruptions per GPU-day \\[default: 5.27e-4, fitted on Llama 3's 466 in 54 days on 16,384 H100].", panel=COST, parse=positive, job=False)]
StorageGbS = Annotated[float | None, opt("--storage-gb-s", help="Checkpoint storage bandwidth per GPU, GB/s, each way \\[default: 0.122, Llama 3's 2 TB/s over 16,384 GPUs].", panel=COST, parse=positive, job=False)]
CheckpointMode = Annotated[str | None, opt("--checkpoint-mode", help="sync (training waits for the write) | async (only for the copy to host memory) \\[default: sync].", panel=COST, job=False)]
CheckpointInterval = Annotated[float | None, opt("--checkpoint-interval-s", help="Training seconds between checkpoints \\[default: Daly's optimum].", panel=COST, parse=positive, job=False)]
RestartS = Annotated[float | None, opt("--restart-s", help="Seconds from an interruption to training again, the checkpoint's read aside \\[default: 600, assumed].", panel=COST, parse=_non_negative, job=False)]

__all__ = ["COST", "CheckpointInterval", "CheckpointMode", "GridIntensity", "InterruptionRate", "NodeOverhead", "Price",
           "PriceKind", "Prices", "Pue", "RestartS", "StorageGbS"]
