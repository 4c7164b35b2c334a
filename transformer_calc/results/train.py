"""`tcalc train` and `tcalc plan`: the step time of a layout, and the fastest layouts that fit.

The typed results (`TrainResult`, `PlanResult`) are the commands' JSON (`model_dump(mode="json")`),
the Python API's return values and what render reads; docs/cli.md documents their keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import create_model

from transformer_calc.model.config import ModelConfig, Training
from transformer_calc.results.calibrate import Calibration, ValidationError, profile_of as _profile
from transformer_calc.results.base import Result, Section
from transformer_calc.results.run_cost import EnergySection, GoodputSection, PriceSection
from transformer_calc.results.common import (AssumedDefault, Assumptions, ModelSection, TowersSection, assumed_defaults,
                                            assumptions_section, model_section, network_for, towers_section)

if TYPE_CHECKING:
    from transformer_calc.requests.train import PlanRequest, TrainRequest


# ============================================================================ sections
class Layout(Section):
    """A parallel layout (Megatron-LM / ZeRO conventions)."""

    tensor: int  # T, tensor-parallel ranks
    pipeline: int  # P, pipeline stages
    virtual_stages: int  # interleaved model chunks per stage
    context: int  # CP, context-parallel ranks
    expert: int  # EP, expert-parallel ranks
    data: int  # dp = gpus / (T·P·CP)
    sequence_parallel: bool
    zero: int  # ZeRO stage 0-3
    gpus: int  # T·P·CP·dp
    first_stage_layers: int | None = None  # blocks on the first stage (uneven pipeline); null: even split
    last_stage_layers: int | None = None  # blocks on the last stage (uneven pipeline); null: even split
    embedding_in_split: bool = False  # the embedding counts as one layer of the split
    loss_in_split: bool = False  # the head and loss count as one layer of the split
    pipeline_schedule: str = "1f1b"  # the schedule in effect: 1f1b | interleaved | zb-h1 | zb-v | dualpipe
    microbatch_group: int | None = None  # N, contiguous micro-batches per chunk (interleaved); given only


class StepBreakdown(Section):
    """Seconds of one step per GPU (the slowest stage), by term; they sum to the step time."""

    compute_s: float
    memory_bound_s: float  # norms, residuals, activations, eager softmax: HBM-bound work
    tp_comm_s: float  # tensor-parallel all-reduces
    pp_bubble_s: float  # 1F1B pipeline bubble
    pp_comm_s: float  # pipeline point-to-point
    dp_comm_exposed_s: float  # what the backward does not hide of the data-parallel traffic
    optimizer_s: float
    moe_all_to_all_s: float
    cp_comm_s: float  # exposed context-parallel ring traffic
    offload_pcie_s: float  # ZeRO-Offload host <-> GPU transfers
    moe_overhead_s: float = 0.0  # MoE: permutation, router, expert weight traffic, load imbalance, fixed cost per block


class MicroBatchTrial(Section):
    micro_batch: int
    fits: bool
    step_time_s: float


class Batch(Section):
    global_batch: int  # sequences per optimizer step, all GPUs
    global_batch_tokens: int
    micro_batch: int  # b, sequences per micro-batch
    micro_batch_chosen: bool  # true: the fastest that fits (not given)
    micro_batches: int  # per replica and step, G / (dp·b)
    seq_len: int
    tried: list[MicroBatchTrial]  # the micro-batches tried when choosing (empty when given)


def _training_fields() -> dict[str, Any]:
    return {name: (f.annotation, ...) for name, f in Training.model_fields.items() if not f.exclude}


# The `training` section: each Training field as resolved (defaults filled in), in Training's order,
# the fields excluded from its dump (frozen_weights) left out. Built from Training's own fields, so a
# new training setting is in the result without a second declaration.
TrainingSection = create_model("TrainingSection", __base__=Section, **_training_fields())


class TrainMemory(Section):
    peak_bytes: int  # per GPU, the peak phase of the most loaded stage
    peak_phase: str
    usable_bytes: int  # the GPU's memory less the CUDA context
    fits: bool
    offloaded_bytes_per_gpu: int | None = None  # with --offload
    offload_device: str | None = None  # cpu | nvme; with --offload


class StepAssumptions(Section):
    matmul_efficiency: float  # achieved fraction of the dense peak
    memory_efficiency: float  # achieved fraction of the HBM bandwidth
    node_size: int  # GPUs per NVLink domain
    intra_node_bytes_s: float  # one way, per GPU
    inter_node_bytes_s: float  # one way, per GPU
    overlap_dp: bool  # data-parallel traffic overlapped with the backward
    tp_comm_overlap: bool = False  # tensor-parallel collectives overlapped with the GEMMs (TE userbuffers)
    cp_comm_type: str | None = None  # with CP > 1: p2p (ring, overlapped) or all_gather (exposed; Llama 3)
    moe_load_imbalance: float | None = None  # MoE: the busiest expert rank's tokens over the mean (1: balanced)
    moe_a2a_overlap: bool | None = None  # MoE: the all-to-all runs under another micro-batch's compute
    dispatch_dtype: str | None = None  # MoE: the dispatch's hidden-state dtype; only when given
    moe_max_nodes: int | None = None  # MoE: node-limited routing, nodes a token reaches at most; only when given
    offload_host_link: str | None = None  # with --offload: PCIe x16 or NVLink-C2C
    offload_host_bytes_s: float | None = None  # one way
    offload_overlapped: bool | None = None
    cpu_optimizer_priced: bool | None = None
    nvme_drive_bandwidth_priced: bool | None = None
    defaults: list[AssumedDefault] = []  # the options' defaults assumed (requests/defaults.py), with their sources


class Budget(Section):
    tokens: int
    steps: int  # optimizer steps, rounded up
    time_s: float
    days: float
    gpu_hours: float
    cost: float | None = None  # gpu_hours x the price per GPU-hour (given, else the price table's); failure-free
    price: PriceSection | None = None  # the price used and its source (absent: none for the GPU)
    cost_per_day: float | None = None  # all GPUs, one day
    cost_per_billion_tokens: float | None = None
    energy: EnergySection | None = None  # absent: the GPU has no board power in the hardware table
    goodput: GoodputSection | None = None  # failures, checkpoints: the wall-clock days and GPU-hours held


class TrainResult(Result):
    model: ModelSection
    gpu: str
    layout: Layout
    batch: Batch
    training: TrainingSection
    fits: bool  # the step's peak fits the GPU; false: no step time is given (a layout that cannot run has none)
    step_time_s: float | None  # null when the layout does not fit
    breakdown: StepBreakdown | None
    dp_comm_total_s: float | None  # the whole data-parallel communication, hidden or not
    tokens_per_s: float | None  # all GPUs
    tokens_per_s_per_gpu: float | None
    mfu: float | None
    hfu: float | None
    tflops_per_gpu: float | None  # model FLOPs, 10^12 per second
    model_flops: int  # one step, all GPUs, no recompute
    hardware_flops: int  # with recomputation
    memory: TrainMemory
    needs: list[str]  # when it does not fit: changes that make it fit, each with its peak (empty when it fits)
    assumptions: StepAssumptions
    budget: Budget | None = None  # with --tokens
    towers: TowersSection | None = None  # a multimodal model: its towers are not in the step
    calibration: Calibration | None = None  # with --profile (issue 37)
    validation_error: ValidationError | None = None  # without --profile: the built-in profile's error (issue 37)


class PlanRow(Section):
    layout: Layout
    micro_batch: int
    recompute: str  # none | selective | full | op
    step_time_s: float
    mfu: float
    tokens_per_s: float
    peak_bytes: int  # per GPU
    breakdown: StepBreakdown


class PlanResult(Result):
    model: ModelSection
    gpu: str
    gpus: int
    seq_len: int
    global_batch: int  # sequences
    evaluated: int  # layouts priced
    feasible: int  # of those, the ones that fit
    plans: list[PlanRow]  # the fastest first, at most --top
    rejected: dict[str, int]  # layouts rejected, counted by reason
    best_command: str | None  # `tcalc train` of the best plan; null when none fits
    assumptions: Assumptions  # the defaults assumed (requests/defaults.py), the layout's excepted
    towers: TowersSection | None = None  # a multimodal model: its towers are not in the plans
    calibration: Calibration | None = None  # with --profile: the plans ranked by the calibrated step (issue 37)


# ============================================================================ train, plan
def _layout(par: Any) -> Layout:
    return Layout(tensor=par.tensor, pipeline=par.pipeline, virtual_stages=par.virtual_stages,
                  context=par.context, expert=par.expert, data=par.data,
                  sequence_parallel=par.sequence_parallel, zero=par.zero, gpus=par.gpus,
                  first_stage_layers=par.first_stage_layers, last_stage_layers=par.last_stage_layers,
                  embedding_in_split=par.embedding_in_split, loss_in_split=par.loss_in_split,
                  pipeline_schedule=par.schedule.value,
                  **({"microbatch_group": par.microbatch_group} if par.microbatch_group is not None else {}))


def train_report(
    m: ModelConfig, w: Any, tr: Any, par: Any, gpu: Any, *, global_batch: int, micro_batch_given: bool,
    network: Any = None, matmul_efficiency: float | None = None, tokens: int | None = None,
    price_per_gpu_hour: float | None = None, tp_comm_overlap: bool | None = None,
    moe_load_imbalance: float | None = None, moe_a2a_overlap: bool = False, assumed: Any = (),
    costing: dict[str, Any] | None = None, moe_dispatch: Any = None, profile: Any = None,
) -> TrainResult:
    """`tcalc train`: the step time of one layout, its breakdown, MFU, memory, and a budget. A
    layout whose peak does not fit the GPU gets no step time, throughput, MFU or budget: `needs`
    says what would make it fit instead."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory
    from transformer_calc.estimators.training.train import estimate_step, micro_batch_count

    if price_per_gpu_hour is not None and not (0 < price_per_gpu_hour < float("inf")):
        raise TcalcError(f"--price-per-gpu-hour ({price_per_gpu_hour}) must be a positive number")
    step_options = dict(network=network, matmul_efficiency=matmul_efficiency, tp_comm_overlap=tp_comm_overlap,
                        moe_load_imbalance=moe_load_imbalance, moe_a2a_overlap=moe_a2a_overlap, moe_dispatch=moe_dispatch)
    chosen, micro_batch_given, tried = _micro_batch(m, w, tr, par, gpu, global_batch, micro_batch_given, step_options)
    w = w.model_copy(update={"batch_size": chosen})
    m_micro = micro_batch_count(global_batch, par, chosen)
    tr = tr.model_copy(update={"micro_batches": m_micro})
    est = estimate_step(m, w, tr, par, gpu, global_batch=global_batch, **step_options)
    calibration = None
    if profile is not None:  # a calibrated profile (tcalc calibrate): the step's terms rescaled
        from transformer_calc.results.calibrate import calibrated_step

        est, calibration = calibrated_step(est, tr, gpu.name, profile)
    tl = peak_memory(m, w, tr, par)
    usable = fit_capacity(gpu.memory_bytes)
    fits = tl.peak_bytes <= usable
    offload: dict[str, Any] = {}  # the memory section's offload keys: with --offload only
    if tr.offload.value != "none":
        offload = {"offloaded_bytes_per_gpu": tl.stage.offloaded, "offload_device": tr.offload_device.value}
    extra = _train_extras(m, tr, gpu, est, fits=fits, tokens=tokens, global_batch_tokens=global_batch * w.seq_len,
                          price_per_gpu_hour=price_per_gpu_hour, costing=costing or {}, calibration=calibration)
    return TrainResult(
        model=model_section(m),
        gpu=gpu.name,
        layout=_layout(par),
        batch=Batch(global_batch=global_batch, global_batch_tokens=global_batch * w.seq_len, micro_batch=chosen,
                    micro_batch_chosen=not micro_batch_given, micro_batches=m_micro, seq_len=w.seq_len, tried=tried),
        training=TrainingSection(**{name: getattr(tr, name) for name in TrainingSection.model_fields}),
        fits=fits,
        **_timing(est, fits),
        model_flops=est.model_flops,
        hardware_flops=est.hardware_flops,
        memory=TrainMemory(peak_bytes=tl.peak_bytes, peak_phase=tl.peak.name, usable_bytes=usable,
                           fits=fits, **offload),
        needs=[] if fits else fit_needs(m, w, tr, par, usable),
        assumptions=StepAssumptions(**est.assumptions, defaults=assumed_defaults(assumed),
                                    **({k: v for k, v in (("dispatch_dtype", moe_dispatch.dtype),
                                                          ("moe_max_nodes", moe_dispatch.max_nodes)) if v is not None}
                                       if moe_dispatch is not None and m.is_moe else {})),
        **extra,
    )


def fit_needs(m: ModelConfig, w: Any, tr: Any, par: Any, capacity: int) -> list[str]:
    """What makes a layout that does not fit fit, each change alone with its peak: a smaller
    micro-batch, more recomputation, more ZeRO sharding, the smallest T (same P) and T·P."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.training.timeline import max_micro_batch, min_parallelism, peak_memory
    from transformer_calc.model.config import Recompute
    from transformer_calc.model.units import GIB

    out: list[str] = []

    def tried(text: str, w2: Any, tr2: Any, par2: Any) -> None:
        try:
            peak = peak_memory(m, w2, tr2, par2).peak_bytes
        except TcalcError:
            raise
        except ValueError:
            return
        if peak <= capacity:
            out.append(f"{text} (peak {peak / GIB:.1f} GiB)")

    if w.batch_size > 1 and (b := max_micro_batch(m, w, tr, par, capacity)):
        tried(f"--micro-batch {b}", w.model_copy(update={"batch_size": b}), tr, par)
    for rc in ("selective", "full"):
        if tr.recompute.value in ("none", "op") or (rc == "full" and tr.recompute.value == "selective"):
            tried(f"--recompute {rc}", w, tr.model_copy(update={"recompute": Recompute(rc)}), par)
    if par.data > 1:
        for z in range(par.zero + 1, 4):
            tried(f"--zero {z}", w, tr, par.model_copy(update={"zero": z}))
    fit_T = min_parallelism(m, w, tr, par, capacity)
    if fit_T is not None and fit_T[0] != par.tensor:
        out.append(f"--T {fit_T[0]} (the smallest T that fits at P = {par.pipeline}; --gpus a multiple of T·P·CP)")
    fit_TP = min_parallelism(m, w, tr, par, capacity, vary_pipeline=True)
    if fit_TP is not None and fit_TP != fit_T and fit_TP != (par.tensor, par.pipeline):
        out.append(f"--T {fit_TP[0]} --P {fit_TP[1]} (the smallest T·P that fits)")
    if not out:
        out.append("none of a smaller micro-batch, more recomputation, ZeRO or T up to 64 alone: more GPUs per "
                   "replica (--P, --cp, --ep) or a GPU with more memory")
    return out


def _budget(tokens: int, tokens_per_step: int, est: Any, price_per_gpu_hour: float | None, *, m: Any, tr: Any,
            gpu: Any, costing: dict[str, Any]) -> Budget:
    """Days, GPU-hours, their cost, energy and CO2eq to train on `tokens` tokens at the step's
    throughput, and the wall-clock days with failures and checkpoints (results/run_cost.py)."""
    from transformer_calc.model.units import SECONDS_PER_DAY, SECONDS_PER_HOUR
    from transformer_calc.results.run_cost import active_share, energy_section, goodput_section, price_section

    seconds = tokens / est.tokens_per_s
    gpu_hours = seconds * est.gpus / SECONDS_PER_HOUR
    price = price_section(gpu, price_per_gpu_hour, costing.get("price_kind"), costing.get("prices"))
    cost: dict[str, Any] = {}
    if price is not None:
        usd = price.usd_per_gpu_hour
        cost = {"cost": gpu_hours * usd, "price": price, "cost_per_day": usd * est.gpus * 24,
                "cost_per_billion_tokens": gpu_hours * usd / tokens * 1e9}
    energy = energy_section(gpu, gpu_hours, tokens, active_share(est.breakdown, est.step_time_s),
                            pue=costing.get("pue"), node_overhead=costing.get("node_overhead"),
                            grid=costing.get("grid_intensity_g_per_kwh"))
    good = goodput_section(m, tr, gpu, est.gpus, seconds, price, rate=costing.get("interruptions_per_gpu_day"),
                           storage_gb_s=costing.get("storage_gb_s"), mode=costing.get("checkpoint_mode"),
                           interval_s=costing.get("checkpoint_interval_s"), restart_s=costing.get("restart_s"))
    if energy is not None:  # absent: the GPU has no board power in the hardware table
        cost["energy"] = energy
    return Budget(tokens=tokens, steps=-(-tokens // tokens_per_step), time_s=seconds, days=seconds / SECONDS_PER_DAY,
                  gpu_hours=gpu_hours, **cost, goodput=good)


def _timing(est: Any, fits: bool) -> dict[str, Any]:
    """The step's time, breakdown, throughput and utilization; all None for a layout that does not fit."""
    if not fits:
        return dict.fromkeys(("step_time_s", "breakdown", "dp_comm_total_s", "tokens_per_s", "tokens_per_s_per_gpu",
                              "mfu", "hfu", "tflops_per_gpu"))
    return dict(
        step_time_s=est.step_time_s, breakdown=StepBreakdown(**est.breakdown), dp_comm_total_s=est.dp_comm_s,
        tokens_per_s=est.tokens_per_s, tokens_per_s_per_gpu=est.tokens_per_s / est.gpus, mfu=est.mfu, hfu=est.hfu,
        tflops_per_gpu=est.tflops_per_gpu,
    )


def _micro_batch(m: ModelConfig, w: Any, tr: Any, par: Any, gpu: Any, global_batch: int, micro_batch_given: bool,
                 step_options: dict[str, Any]) -> tuple[int, bool, list[MicroBatchTrial]]:
    """(micro-batch, whether it was given, the trials): the job file's micro-batches per step (b = G / (dp·m)),
    the given micro-batch, else the fastest that fits and divides the replica batch."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.training.train import fastest_micro_batch

    chosen = w.batch_size
    if tr.micro_batches is not None:  # micro-batches per step (a job file's): b = G / (dp·m)
        per_replica = global_batch // par.data
        if micro_batch_given:
            if per_replica * par.data != global_batch or per_replica != chosen * tr.micro_batches:
                raise TcalcError(f"training: micro_batches ({tr.micro_batches}) and the micro-batch ({chosen}) do not "
                                 f"make the global batch ({global_batch}) over dp = {par.data}; give one of them")
        else:
            if per_replica * par.data != global_batch or per_replica % tr.micro_batches:
                raise TcalcError(f"training: micro_batches ({tr.micro_batches}) does not divide the per-replica batch "
                                 f"(global batch {global_batch} / dp {par.data}); choose a divisor")
            chosen, micro_batch_given = per_replica // tr.micro_batches, True
    if micro_batch_given:
        return chosen, True, []
    chosen, trials = fastest_micro_batch(m, w, tr, par, gpu, global_batch=global_batch, **step_options)
    return chosen, False, [MicroBatchTrial(micro_batch=t.micro_batch, fits=t.fits, step_time_s=t.step_time_s)
                           for t in trials]


def _train_extras(m: ModelConfig, tr: Any, gpu: Any, est: Any, *, fits: bool, tokens: int | None,
                  global_batch_tokens: int, price_per_gpu_hour: float | None, costing: dict[str, Any],
                  calibration: Any) -> dict[str, Any]:
    """The optional sections: the budget (with --tokens, for a layout that runs), towers, and the calibration
    or else the validation error of the default profile."""
    from transformer_calc.estimators.training.validation_errors import validation_error

    # the budget section only with --tokens (unset, it is absent from the JSON), and only for a layout that runs
    extra: dict[str, Any] = ({"budget": _budget(tokens, global_batch_tokens, est, price_per_gpu_hour,
                                                m=m, tr=tr, gpu=gpu, costing=costing)}
                             if tokens is not None and fits else {})
    if (towers := towers_section(m, "training")) is not None:
        extra["towers"] = towers
    if calibration is not None:
        extra["calibration"] = calibration
    elif fits and (known := validation_error(tr.framework.value, gpu.name, m.is_moe)) is not None:
        framework, generation, kind, runs, median, within = known
        extra["validation_error"] = ValidationError(framework=framework, generation=generation, kind=kind, runs=runs,
                                                    median_abs_error=median, within_25pct=within)
    return extra


def plan_report(
    m: ModelConfig, seq_len: int, tr: Any, gpu: Any, *, gpus: int, global_batch: int, top: int = 10,
    node_size: int | None = None, inter_node_gb_s: float | None = None, source: str | None = None,
    expert_tensor: int | None = None, assumed: Any = (), profile: Any = None,
) -> PlanResult:
    """`tcalc plan`: the feasible layouts ranked by step time, and why the others were rejected.

    `source` is the model as typed on a command line (`--preset NAME`, a MODEL, `--config FILE`,
    with its overrides): best_command repeats it, and every setting that is not `tcalc train`'s
    default, so that running it prices exactly the best plan."""
    from transformer_calc.estimators.training.train import plan_layouts

    plans, rejected = plan_layouts(m, seq_len, tr, gpu, gpus=gpus, global_batch=global_batch,
                                   network=network_for(gpu, node_size, inter_node_gb_s), expert_tensor=expert_tensor)
    calibration = None
    if profile is not None:  # each plan's step calibrated, then ranked again (results/calibrate.py)
        import dataclasses

        from transformer_calc.results.calibrate import calibrated_step

        calibrated = []
        for pl in plans:
            est, section = calibrated_step(pl.estimate, tr, gpu.name, profile)
            calibration = calibration or section
            calibrated.append(dataclasses.replace(pl, estimate=est))
        plans = sorted(calibrated, key=lambda pl: pl.estimate.step_time_s)
    rows = [
        PlanRow(layout=_layout(pl.parallelism), micro_batch=pl.micro_batch, recompute=pl.recompute.value,
                step_time_s=pl.estimate.step_time_s, mfu=pl.estimate.mfu, tokens_per_s=pl.estimate.tokens_per_s,
                peak_bytes=pl.peak_bytes, breakdown=StepBreakdown(**pl.estimate.breakdown))
        for pl in plans[:top]
    ]
    command = _best_command(plans[0], tr, gpu, source=source, gpus=gpus, seq_len=seq_len,
                            global_batch=global_batch, node_size=node_size, inter_node_gb_s=inter_node_gb_s,
                            calibration=calibration) if plans else None
    return PlanResult(
        model=model_section(m), gpu=gpu.name, gpus=gpus, seq_len=seq_len, global_batch=global_batch,
        evaluated=len(plans) + sum(rejected.values()), feasible=len(plans),
        plans=rows, rejected=rejected, best_command=command, assumptions=assumptions_section(assumed),
        **_plan_extras(towers_section(m, "training"), calibration),
    )


def _best_command(best: Any, tr: Any, gpu: Any, *, source: str | None, gpus: int, seq_len: int, global_batch: int,
                  node_size: int | None, inter_node_gb_s: float | None, calibration: Any) -> str:
    """The `tcalc train` command that prices the best plan: every setting that is not train's default."""
    par = best.parallelism
    return (
        f"tcalc train {source or '<model>'} --gpus {gpus} --gpu {gpu.name} --S {seq_len} --global-batch {global_batch} "
        f"--T {par.tensor} --P {par.pipeline} --virtual-stages {par.virtual_stages} --cp {par.context} "
        f"--ep {par.expert} --zero {par.zero}{' --sp' if par.sequence_parallel else ''} "
        f"--micro-batch {best.micro_batch} --recompute {best.recompute.value}{' --flash' if tr.flash else ' --no-flash'}"
        + (f" --first-stage-layers {par.first_stage_layers}" if par.first_stage_layers is not None else "")
        + (f" --last-stage-layers {par.last_stage_layers}" if par.last_stage_layers is not None else "")
        + (" --embedding-in-split" if par.embedding_in_split else "")
        + (" --loss-in-split" if par.loss_in_split else "")
        + (f" --pipeline-schedule {par.schedule.value}" if par.pipeline_schedule is not None else "")
        # what tcalc train would otherwise default differently
        + (f" --framework {tr.framework.value}" if tr.framework.value != "megatron" else "")
        + (" --compile" if tr.compile else "")
        + (f" --finetune {tr.finetune.value} --lora-rank {tr.lora_rank} --lora-targets "
           f"{','.join(t.value for t in tr.lora_targets)}" if tr.adapters else "")
        + (f" --node-size {node_size}" if node_size is not None else "")
        + (f" --inter-node-gb-s {repr(float(inter_node_gb_s)).removesuffix('.0')}"
           if inter_node_gb_s is not None else "")
        + (f" --profile {calibration.profile_file}" if calibration is not None else "")
    )


def _plan_extras(towers: TowersSection | None, calibration: Calibration | None) -> dict[str, Any]:
    """The optional sections of a plan: set only when present (absent from the JSON otherwise)."""
    out: dict[str, Any] = {}
    if towers is not None:
        out["towers"] = towers
    if calibration is not None:
        out["calibration"] = calibration
    return out


def train_command(
    src: Any, flags: dict[str, Any], *, gpus: int | None, global_batch_of: Any, node_size: int | None = None,
    inter_node_gb_s: float | None = None, matmul_efficiency: float | None = None, tokens: int | None = None,
    price_per_gpu_hour: float | None = None, tp_comm_overlap: bool | None = None,
    moe_load_imbalance: float | None = None, moe_a2a_overlap: bool = False, costing: dict[str, Any] | None = None,
    moe_dispatch: Any = None, profile: Any = None,
) -> TrainResult:
    """`tcalc train` and `tc.train` from a resolved model source and the options given (job-file key
    names; None: not given; `dtype` the compute dtype, `p` its bytes): the settings resolved by
    `requests.training.train_configs`; `global_batch_of(S)` gives the global batch in sequences
    once S is known (the CLI reads token counts such as 4M and says how it read them)."""
    from transformer_calc.devices.hardware import COMPUTE_DTYPE_BYTES, check_fp8_recipe, compute_dtype
    from transformer_calc.requests.training import train_configs
    from transformer_calc.sources.presets import gpu as find_gpu

    flags = dict(flags)
    name = compute_dtype(flags.pop("dtype", None), flags.get("p"))  # --dtype / --p: one concept
    if name is not None:
        flags["p"] = COMPUTE_DTYPE_BYTES[name]
    m, job = src.model, src.job
    auto_v = flags.get("virtual_stages") == "auto"
    if auto_v:
        flags["virtual_stages"] = None  # chosen below, once the layout is known
    w, tr, par, gpu_name, micro_batch_given, assumed = train_configs(m, job.training if job else {}, flags, gpus)
    device = find_gpu(gpu_name)
    check_fp8_recipe(tr.fp8_recipe.value, device)
    if auto_v:
        from transformer_calc.errors import TcalcError
        from transformer_calc.estimators.training.train import auto_virtual_stages

        try:
            par = auto_virtual_stages(m, w, tr, par, device, global_batch=global_batch_of(w.seq_len),
                                      network=network_for(device, node_size, inter_node_gb_s),
                                      matmul_efficiency=matmul_efficiency, tp_comm_overlap=tp_comm_overlap)
        except ValueError as exc:
            raise TcalcError(f"--virtual-stages auto: {exc}") from None
    return train_report(m, w, tr, par, device, global_batch=global_batch_of(w.seq_len),
                        micro_batch_given=micro_batch_given, network=network_for(device, node_size, inter_node_gb_s),
                        matmul_efficiency=matmul_efficiency, tokens=tokens, price_per_gpu_hour=price_per_gpu_hour,
                        tp_comm_overlap=tp_comm_overlap, moe_load_imbalance=moe_load_imbalance,
                        moe_a2a_overlap=moe_a2a_overlap, assumed=assumed, costing=costing, moe_dispatch=moe_dispatch,
                        profile=profile)


def plan_command(
    src: Any, flags: dict[str, Any], *, gpus: int, global_batch_of: Any, top: int = 10, node_size: int | None = None,
    inter_node_gb_s: float | None = None, source_text: str | None = None, profile: Any = None,
) -> PlanResult:
    """`tcalc plan` and `tc.plan` from a resolved model source and the options given (job-file key
    names): the settings resolved as train's (`requests.training.plan_configs`; the layout is
    plan's to choose); `source_text` is the model as a command line names it (best_command)."""
    from transformer_calc.requests.training import plan_configs
    from transformer_calc.sources.presets import gpu as find_gpu

    m, job = src.model, src.job
    seq, tr, gpu_name, etp, assumed = plan_configs(m, job.training if job else {}, flags)
    return plan_report(m, seq, tr, find_gpu(gpu_name), gpus=gpus, global_batch=global_batch_of(seq), top=top,
                       node_size=node_size, inter_node_gb_s=inter_node_gb_s, source=source_text, expert_tensor=etp,
                       assumed=assumed, profile=profile)


# ---------------------------------------------------------------------------- the command
def run_train(req: TrainRequest, note: Any = None) -> TrainResult:
    from transformer_calc.requests.training import global_batch
    from transformer_calc.results.run_cost import cost_options

    src = req.source()
    costing = cost_options(req, src.job, ("price_per_gpu_hour", *COSTING_FIELDS))  # flags, else the job's cost:
    return train_command(src, req.given() | {"dtype": req.dtype}, gpus=req.gpus,
                         global_batch_of=lambda seq: global_batch(req.global_batch, req.global_batch_tokens, seq, note),
                         node_size=req.node_size, inter_node_gb_s=req.inter_node_gb_s,
                         matmul_efficiency=req.matmul_efficiency, tokens=req.tokens,
                         price_per_gpu_hour=costing.pop("price_per_gpu_hour"), tp_comm_overlap=req.tp_comm_overlap,
                         moe_load_imbalance=req.moe_load_imbalance, moe_a2a_overlap=bool(req.moe_a2a_overlap),
                         costing=costing, moe_dispatch=_dispatch(req, src.model), profile=_profile(req))


def _dispatch(req: TrainRequest, m: Any) -> Any:
    """--dispatch-dtype and --moe-max-nodes as a moe_time.Dispatch (None: neither given); these and the other
    MoE step options (--moe-load-imbalance, --moe-a2a-overlap) are refused on a dense model, whose step has
    no experts nor all-to-all for them to change."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.inference.expected import DISPATCH_DTYPES
    from transformer_calc.estimators.training.moe_time import Dispatch

    if not m.is_moe:  # a dense step has no experts nor all-to-all for these to change
        for flag, value in (("--dispatch-dtype", req.dispatch_dtype), ("--moe-max-nodes", req.moe_max_nodes),
                            ("--moe-load-imbalance", req.moe_load_imbalance),
                            ("--moe-a2a-overlap", req.moe_a2a_overlap)):
            if value is not None:
                raise TcalcError(f"{flag} prices a mixture-of-experts model's all-to-all; {m.name or 'this model'} "
                                 "is dense: drop it")
    if req.dispatch_dtype is None and req.moe_max_nodes is None:
        return None
    dtype = None if req.dispatch_dtype is None else str(req.dispatch_dtype).strip().lower()
    if dtype is not None and dtype not in DISPATCH_DTYPES:
        raise TcalcError(f"--dispatch-dtype ({dtype[:40]!r}) must be one of {', '.join(DISPATCH_DTYPES)}")
    return Dispatch(dtype=dtype, max_nodes=req.moe_max_nodes)


# The options of results/run_cost.py that `tcalc train` reads (requests/cost.py declares them).
COSTING_FIELDS = ("price_kind", "prices", "pue", "node_overhead", "grid_intensity_g_per_kwh", "interruptions_per_gpu_day",
                  "storage_gb_s", "checkpoint_mode", "checkpoint_interval_s", "restart_s")


# ---------------------------------------------------------------------------- the command
def run_plan(req: PlanRequest, note: Any = None) -> PlanResult:
    from transformer_calc.requests.training import PLAN_LAYOUT_KEYS, global_batch

    src = req.source()
    section = src.job.training if src.job else {}
    unused = [k for k in PLAN_LAYOUT_KEYS if k in section]
    if unused and note is not None:
        note(f"plan chooses the layout; the job file's {', '.join(unused)} are not used")
    return plan_command(src, req.given(), gpus=req.gpus,
                        global_batch_of=lambda seq: global_batch(req.global_batch, req.global_batch_tokens, seq, note),
                        top=req.top, node_size=req.node_size, inter_node_gb_s=req.inter_node_gb_s,
                        source_text=req.command_text(), profile=_profile(req))
