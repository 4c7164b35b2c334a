"""What a run costs, as result sections (issue 40): the price used and where it comes from, the
energy and CO2eq, and (training) the failures, checkpoints and goodput. `tcalc train` puts them in
its `budget`, `tcalc serve` in its `cost`; the formulas are estimators/cost.py and goodput.py."""

from __future__ import annotations

import math
from typing import Any

from transformer_calc.results.base import Section


class PriceSection(Section):
    usd_per_gpu_hour: float
    kind: str  # on_demand | reserved | spot | given (--price-per-gpu-hour)
    provider: str | None
    date: str | None  # YYYY-MM the price was published or read
    source: str


class EnergySection(Section):
    """Energy and CO2eq: P = P_idle + (P_board − P_idle)·active_share per GPU, x node overhead x PUE."""

    board_power_w: float  # per GPU, the hardware table's (TDP/TGP)
    board_power_source: str
    active_share: float  # the share of the time the GPU computes (the rest waits at idle power)
    power_w_per_gpu: float
    node_overhead: float
    pue: float
    kwh: float  # facility energy of the whole run (serve: one hour)
    kwh_per_million_tokens: float  # train: training tokens; serve: output tokens
    grid_intensity_g_per_kwh: float
    co2_tonnes: float


class GoodputSection(Section):
    """Failures and checkpoints (estimators/goodput.py): goodput = 1 − δ/τ − (R + (τ+δ)/2)/M."""

    interruptions_per_gpu_day: float
    mtti_s: float  # M, mean time to interruption of the job
    checkpoint_bytes: int  # weights + fp32 master + optimizer states, one copy
    checkpoint_mode: str  # sync | async
    storage_bytes_s: float  # all GPUs together, each way
    save_s: float  # δ, training stopped per checkpoint
    restore_s: float
    restart_s: float  # R: restart overhead + restore
    interval_s: float  # τ, training between checkpoints (Daly's optimum unless given)
    goodput: float  # the share of wall-clock time that trains
    interruptions: float  # expected over the run
    time_s: float  # wall-clock, with failures and checkpoints
    days: float
    gpu_hours: float  # held: wall-clock x GPUs
    cost: float | None = None  # gpu_hours x the price


class ServeCost(Section):
    """A deployment's cost per hour and per million tokens, at its best layout."""

    price: PriceSection | None  # None: no price for the GPU (give --price-per-gpu-hour)
    gpus: int
    cost_per_hour: float | None
    input_tokens_per_s: float
    output_tokens_per_s: float
    prefill_share: float  # of the GPUs' time, the prompts' prefill (serve's layouts[].prefill_share): input tokens' share of the cost
    cost_per_million_input_tokens: float | None
    cost_per_million_output_tokens: float | None
    request_rate: float | None  # --request-rate, requests/s
    gpus_for_request_rate: int | None  # whole replicas of the best layout that serve --request-rate
    cost_per_hour_for_request_rate: float | None
    energy: EnergySection | None = None  # one hour of the deployment


# ---------------------------------------------------------------------------- the options
def cost_options(req: Any, job: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The cost options `names` of a request: each flag (API keyword) given, else the job file's
    cost: section's value (read by the option's parser, as a flag is), else None (the default)."""
    from transformer_calc.errors import TcalcError

    section = job.cost if job is not None else {}
    options = type(req).options()
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(req, name)
        if value is None and section.get(name) is not None:
            value, parse = section[name], options[name].parse
            if parse is not None:
                try:
                    value = parse(value)
                except (ValueError, TcalcError) as exc:
                    raise TcalcError(f"job file cost: {name}: {exc}") from None
        out[name] = value
    return out


# ---------------------------------------------------------------------------- the builders
def price_section(gpu: Any, given: float | None, kind: str | None, prices_path: Any) -> PriceSection | None:
    """The price per GPU-hour: given, else the table's (a --prices file's entries first)."""
    from transformer_calc.devices.hardware import resolve_gpu
    from transformer_calc.devices.prices import price_for
    from transformer_calc.errors import TcalcError
    from transformer_calc.sources.presets import hardware_table, price_table, prices_file

    if given is not None:
        if not (0 < given < float("inf")):
            raise TcalcError(f"--price-per-gpu-hour ({given}) must be a positive number")
        return PriceSection(usd_per_gpu_hour=given, kind="given", provider=None, date=None,
                            source="given: --price-per-gpu-hour, or the job file's cost: price_per_gpu_hour")
    table = hardware_table()

    def canonical(name: str) -> str | None:
        try:
            return resolve_gpu(name, table).name
        except TcalcError:
            return None

    kind = kind or "on_demand"
    found = price_for(prices_file(prices_path), gpu.name, kind, canonical) if prices_path is not None else None
    if found is None:  # a prices file's entry wins over the table's, whatever their dates
        found = price_for(list(price_table()), gpu.name, kind, canonical)
    if found is None:
        return None
    return PriceSection(usd_per_gpu_hour=found.usd_per_gpu_hour, kind=found.kind, provider=found.provider,
                        date=found.date, source=found.source)


def energy_section(gpu: Any, gpu_hours: float, tokens: float, active_share: float, *, pue: float | None,
                   node_overhead: float | None, grid: float | None) -> EnergySection | None:
    """Energy and CO2eq of `gpu_hours` GPU-hours that produce `tokens` tokens (None: the GPU has no
    board power in the hardware table)."""
    from transformer_calc.estimators import cost

    if gpu.board_power_w is None:
        return None
    pue = cost.PUE if pue is None else pue
    node = cost.NODE_OVERHEAD if node_overhead is None else node_overhead
    grid = cost.GRID_G_CO2_PER_KWH if grid is None else grid
    watts = cost.gpu_power_w(gpu.board_power_w, active_share)
    kwh = cost.energy_kwh(gpu_hours, watts, node, pue)
    return EnergySection(board_power_w=gpu.board_power_w, board_power_source=gpu.board_power_source or "",
                         active_share=active_share, power_w_per_gpu=watts, node_overhead=node, pue=pue, kwh=kwh,
                         kwh_per_million_tokens=kwh / tokens * 1e6, grid_intensity_g_per_kwh=grid,
                         co2_tonnes=cost.co2_tonnes(kwh, grid))


def active_share(breakdown: dict[str, float], step_time_s: float) -> float:
    """The share of a training step the GPU computes: compute, HBM-bound work, the optimizer and the
    MoE blocks' own work; communication left exposed and the pipeline bubble wait."""
    busy = sum(breakdown.get(k, 0.0) for k in ("compute_s", "memory_bound_s", "optimizer_s", "moe_overhead_s"))
    return min(1.0, busy / step_time_s) if step_time_s > 0 else 1.0


def checkpoint_bytes(m: Any, tr: Any) -> int:
    """The training state tcalc prices (optimizers.model_groups, master_bytes): one copy."""
    from transformer_calc.estimators.goodput import checkpoint_bytes as size
    from transformer_calc.estimators.params import total_params
    from transformer_calc.estimators.training.optimizers import master_bytes, model_groups

    groups = model_groups(m, tr)
    trainable = sum(g.params for g in groups)
    states = sum(g.state_bytes for g in groups)
    weights = trainable if tr.adapters else total_params(m)
    return size(trainable, weights, tr.p, master_bytes(tr), states)


def goodput_section(m: Any, tr: Any, gpu: Any, gpus: int, train_s: float, price: PriceSection | None, *,
                    rate: float | None, storage_gb_s: float | None, mode: str | None, interval_s: float | None,
                    restart_s: float | None) -> GoodputSection:
    """Failures, checkpoints and goodput of `train_s` failure-free seconds on `gpus` GPUs."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators import goodput as g
    from transformer_calc.devices.hardware import host_bandwidth

    mode = (mode or "sync").strip().lower()
    if mode not in ("sync", "async"):
        raise TcalcError(f"--checkpoint-mode ({mode[:40]!r}) must be sync or async")
    rate = g.INTERRUPTIONS_PER_GPU_DAY if rate is None else rate
    per_gpu = g.STORAGE_BYTES_S_PER_GPU if storage_gb_s is None else storage_gb_s * 1e9
    storage = per_gpu * gpus
    size = checkpoint_bytes(m, tr)
    write_s = size / storage
    if mode == "async":  # training waits only for each GPU's share to reach host memory
        _, host = host_bandwidth(gpu)
        if host is None:
            raise TcalcError(f"--checkpoint-mode async copies to host memory; {gpu.name} has no host-link bandwidth "
                             "in the hardware table: use sync")
        save = size / gpus / (host / 2)
    else:
        save = write_s
    mtti = g.mean_time_to_interruption_s(gpus, rate)
    if interval_s is None and mode == "async":  # a save cannot start before the last write has ended
        interval_s = max(g.daly_interval_s(save, mtti), write_s)
    try:
        out = g.goodput(train_s, mtti, save, write_s, g.RESTART_S if restart_s is None else restart_s, interval_s)
    except ValueError as exc:
        raise TcalcError(str(exc)) from None
    held = out.wall_s * gpus / 3600
    return GoodputSection(
        interruptions_per_gpu_day=rate, mtti_s=mtti, checkpoint_bytes=size, checkpoint_mode=mode,
        storage_bytes_s=storage, save_s=out.save_s, restore_s=out.restore_s, restart_s=out.restart_s,
        interval_s=out.interval_s, goodput=out.goodput, interruptions=out.interruptions, time_s=out.wall_s,
        days=out.wall_s / g.SECONDS_PER_DAY, gpu_hours=held,
        **({"cost": held * price.usd_per_gpu_hour} if price is not None else {}))


def serve_cost(gpu: Any, best: Any, prompt_len: int, request_rate: float | None, price: PriceSection | None, *,
               pue: float | None, node_overhead: float | None, grid: float | None) -> ServeCost | None:
    """Cost per hour and per million input/output tokens of the best layout; the GPUs (whole
    replicas) and $ per hour a --request-rate needs. Energy: the GPUs at board power for an hour."""
    if best is None or not best.requests_per_s or not best.tokens_per_s:
        return None
    rps = best.requests_per_s
    in_tps, out_tps = rps * prompt_len, best.tokens_per_s
    share = best.prefill_share or 0.0
    per_hour = best.gpus * price.usd_per_gpu_hour if price is not None else None
    need = cost_need = None
    if request_rate is not None:
        per_replica = rps / best.replicas
        need = math.ceil(request_rate / per_replica - 1e-9) * (best.gpus // best.replicas)
        cost_need = need * price.usd_per_gpu_hour if price is not None else None
    energy = energy_section(gpu, float(best.gpus), out_tps * 3600, 1.0, pue=pue, node_overhead=node_overhead, grid=grid)
    return ServeCost(
        price=price, gpus=best.gpus, cost_per_hour=per_hour, input_tokens_per_s=in_tps, output_tokens_per_s=out_tps,
        prefill_share=share,
        cost_per_million_input_tokens=per_hour * share / (in_tps * 3600) * 1e6 if per_hour is not None else None,
        cost_per_million_output_tokens=per_hour * (1 - share) / (out_tps * 3600) * 1e6 if per_hour is not None else None,
        request_rate=request_rate, gpus_for_request_rate=need, cost_per_hour_for_request_rate=cost_need,
        **({"energy": energy} if energy is not None else {}))
