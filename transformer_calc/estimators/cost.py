"""What a run costs: dollars from a price per GPU-hour, energy from the GPUs' power at the
utilisation the time model predicts, and CO2eq from a grid's carbon intensity (issue 40;
docs/formulas.md "Cost" and "Energy and carbon").

Conventions:

- Money: cost = GPU-hours x the price per GPU-hour (the price table, presets/prices.yaml, each
  price with its source and date; `--price-per-gpu-hour` / `--price` replaces it). Cloud prices
  are per instance-hour of 8 GPUs: the table stores the instance price / 8.
- Power per GPU (a stated two-level model): a GPU draws its board power (the datasheet's TDP /
  TGP, presets/hardware.yaml `board_power_w`) while it computes, and IDLE_POWER_FRACTION of it
  while it waits (exposed communication, the pipeline bubble):
  P = P_idle + (P_board − P_idle)·a, with a the active share of the step. The model cards count
  the board power for every GPU-hour (a = 1: "peak power capacity per GPU device"); measured
  8-GPU H100 nodes draw less: at most 8.4 kW of the 10.2 kW rated (Latif et al. 2024,
  arXiv:2412.08602), so board power is an upper bound.
- Node overhead: the host (CPUs, memory, NICs, fans) as a factor on the GPUs' power, default 1.0
  (the GPUs only, as the Llama model cards count); a DGX H100's rated 10.2 kW over its 8 x 700 W
  GPUs is 1.82 (DGX H100 datasheet), the measured peak 8.4 kW is 1.50 (Latif et al. 2024).
- PUE (facility energy / IT energy): default 1.1, the factor Touvron et al. 2023 (LLaMA,
  arXiv:2302.13971 §6, "Carbon footprint") state for Meta's estimates.
- Grid carbon intensity, g CO2eq per kWh, location-based unless the user gives a market-based
  one: default 385, the US national average Touvron et al. 2023 §6 state (0.385 kg CO2eq/kWh).
  With those two factors the Llama 3.1 model card's 11,390 t CO2eq (39.3M H100 GPU-hours at 700 W)
  is reproduced within 3 % (tests/test_cost.py).
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600
JOULES_PER_KWH = 3.6e6
GRAMS_PER_TONNE = 1e6

# ASSUMED, not measured for every part: an idle, clocked-down data-centre GPU draws ~10 % of its
# board power (an H100 SXM ~70 W of 700 W at idle in nvidia-smi). Only the waiting share uses it.
IDLE_POWER_FRACTION = 0.10
PUE = 1.1  # Touvron et al. 2023 (arXiv:2302.13971) §6
NODE_OVERHEAD = 1.0  # the GPUs' board power only, as the Llama model cards count
GRID_G_CO2_PER_KWH = 385.0  # US national average, Touvron et al. 2023 §6


def gpu_hours(seconds: float, gpus: int) -> float:
    """GPU-hours of `gpus` GPUs held for `seconds`."""
    return seconds * gpus / SECONDS_PER_HOUR


def gpu_power_w(board_power_w: float, active_share: float, idle_fraction: float = IDLE_POWER_FRACTION) -> float:
    """P = P_idle + (P_board − P_idle)·a, P_idle = idle_fraction·P_board (module docstring)."""
    idle = idle_fraction * board_power_w
    return idle + (board_power_w - idle) * active_share


def energy_kwh(gpu_hours_: float, power_w: float, node_overhead: float = NODE_OVERHEAD, pue: float = PUE) -> float:
    """Facility energy, kWh: GPU-hours x the GPU's power x node overhead x PUE."""
    return gpu_hours_ * power_w / 1000 * node_overhead * pue


def co2_tonnes(kwh: float, grid_g_co2_per_kwh: float = GRID_G_CO2_PER_KWH) -> float:
    """t CO2eq of `kwh` at the grid's carbon intensity (g CO2eq per kWh)."""
    return kwh * grid_g_co2_per_kwh / GRAMS_PER_TONNE
