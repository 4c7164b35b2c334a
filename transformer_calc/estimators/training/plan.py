"""The planner of `tcalc plan`: every parallel layout of a GPU count (tensor, context, pipeline,
expert, data; schedules, virtual stages, ZeRO) that fits in memory, each priced by one training
step (train.py `estimate_step`), fastest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformer_calc.devices.hardware import GPU
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.training.step import Network, StepEstimate, default_network, estimate_step
from transformer_calc.model.config import ModelConfig, Parallelism, Recompute, Training, Workload


# ============================================================================ the planner
@dataclass(frozen=True)
class Plan:
    """One feasible layout with its step time and memory."""

    parallelism: Parallelism
    micro_batch: int
    recompute: Recompute
    estimate: StepEstimate
    peak_bytes: int


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


PLAN_VIRTUAL_STAGES = (1, 2, 4, 8)  # interleaving depths plan tries (Llama 3 405B ran 8: one block per chunk)


def pipeline_splits(L: int, P: int) -> list[tuple[dict[str, Any], int]]:
    """The ways plan splits L blocks over P stages, each with a virtual-stage count v:
    even (P | L; one stage: no split), the embedding and the loss counted as one layer each
    ((L + 2) | P·v: the Llama 3 405B layout, 126 + 2 = 16 x 8), and Megatron's uneven form
    with lighter first and last stages (the middle stages take ⌈L/P⌉ rounded up to v, the first
    and last share the rest, the last the smaller part: it also runs the head and loss)."""
    if P == 1:
        return [({}, 1)]
    out: list[tuple[dict[str, Any], int]] = []
    for v in PLAN_VIRTUAL_STAGES:
        if L % (P * v) == 0:
            out.append(({}, v))
        if (L + 2) % (P * v) == 0 and L % (P * v):  # when even splits exist, they are as good
            out.append(({"embedding_in_split": True, "loss_in_split": True}, v))
        if P >= 3 and L % P:
            mid = -(-L // P)
            mid += -mid % v
            rest = L - (P - 2) * mid
            first, last = -(-rest // 2), rest // 2
            if 0 < last <= first <= mid and first % v == 0 and last % v == 0:
                out.append(({"first_stage_layers": first, "last_stage_layers": last}, v))
    return out


def virtual_stage_choices(L: int, par: Parallelism) -> list[int]:
    """The v (of PLAN_VIRTUAL_STAGES) the layout's split and schedule allow: the schedule given
    (zb-v and dualpipe: 2; 1f1b, zb-h1: 1; interleaved: 2 or more), the blocks of each stage a
    multiple of v (memory.pipeline_units)."""
    from transformer_calc.estimators.training.memory import pipeline_units
    from transformer_calc.model.config import PipelineSchedule

    if par.pipeline <= 1:
        return [1]
    allowed = {None: PLAN_VIRTUAL_STAGES, PipelineSchedule.one_f_one_b: (1,), PipelineSchedule.zb_h1: (1,),
               PipelineSchedule.interleaved: PLAN_VIRTUAL_STAGES[1:], PipelineSchedule.zb_v: (2,),
               PipelineSchedule.dualpipe: (2,)}[par.pipeline_schedule]
    out = []
    for v in allowed:
        try:
            pipeline_units(L, par.model_copy(update={"virtual_stages": v}))
        except ValueError:
            continue
        out.append(v)
    return out


def auto_virtual_stages(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, gpu: GPU, *, global_batch: int,
    network: Any = None, matmul_efficiency: float | None = None, tp_comm_overlap: bool | None = None,
) -> Parallelism:
    """`--virtual-stages auto`: the layout with the fastest v of `virtual_stage_choices` whose step
    fits the GPU (the fastest overall when none fits), priced at the micro-batch given (1 when
    `tcalc train` is to choose it: the fit of the smallest micro-batch)."""
    from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory

    choices = virtual_stage_choices(m.n_layers, par)
    if not choices:
        raise ValueError(f"no virtual-stage count of {', '.join(map(str, PLAN_VIRTUAL_STAGES))} splits the "
                         f"{m.n_layers} blocks over P = {par.pipeline} with this schedule; give --virtual-stages N")
    per_replica = global_batch // par.data
    best: tuple[bool, float, Parallelism] | None = None
    for v in choices:
        lay = par.model_copy(update={"virtual_stages": v})
        trial = tr.model_copy(update={"micro_batches": max(per_replica // w.batch_size, 1)})
        fits = peak_memory(m, w, trial, lay).peak_bytes <= fit_capacity(gpu.memory_bytes)
        t = estimate_step(m, w, trial, lay, gpu, global_batch=global_batch, network=network,
                          matmul_efficiency=matmul_efficiency, tp_comm_overlap=tp_comm_overlap).step_time_s
        if best is None or (fits, -t) > (best[0], -best[1]):
            best = (fits, t, lay)
    assert best is not None
    return best[2]


# The schedules plan tries beyond 1F1B / interleaved, by framework: the ones the framework runs.
# torchtitan: torch.distributed.pipelining's ScheduleZBVZeroBubble and ScheduleDualPipeV
# (torchtitan `parallelism.pipeline_parallel_schedule` ZBVZeroBubble, DualPipeV); Megatron-core's
# mainline runs 1F1B and interleaved 1F1B (zero-bubble H1 lives in sail-sg's fork), DeepSpeed its
# PipelineEngine's 1F1B. `tcalc train --pipeline-schedule` prices any of them.
PLAN_SCHEDULES: dict[str, tuple[str, ...]] = {"torchtitan": ("zb-v", "dualpipe")}
# The data-parallel sharding plan tries, in order of traffic (ZeRO-1 and -2 price alike; ZeRO-3 /
# FSDP adds the weight all-gathers): torchtitan runs FSDP2 (its data_parallel_shard_degree).
PLAN_ZERO: dict[str, tuple[int, ...]] = {"torchtitan": (3,)}


def _plan_fit(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, tries: list[tuple[Recompute, int]], cap: int,
    micro_batches: int,
) -> tuple[list[tuple[Recompute, Parallelism, int]], list[str]]:
    """The (recompute, layout, peak) worth pricing for one layout and micro-batch, and the reasons
    the tries before them were rejected. `tries` go from the least recompute and the least
    traffic up: the first that fits has the least recompute possible; when it needs ZeRO-3 (more
    traffic), the first fit of more recompute with less sharding is priced too (either may win)."""
    from transformer_calc.estimators.training.timeline import peak_memory

    cache: dict[tuple[Recompute, int], tuple[Parallelism, int]] = {}

    def peak_of(rc: Recompute, z: int) -> tuple[Parallelism, int]:
        if (rc, z) not in cache:
            trial = tr.model_copy(update={"recompute": rc, "micro_batches": micro_batches})
            lay = par if z == par.zero else par.model_copy(update={"zero": z})
            cache[rc, z] = lay, peak_memory(m, w, trial, lay, all_stages=False).peak_bytes
        return cache[rc, z]

    def fits(rc: Recompute, z: int) -> bool:
        return peak_of(rc, z)[1] <= cap

    # Memory falls with more recompute (not always with more sharding: ZeRO-3's gathered units can
    # outweigh what it shards at small dp). When the most recompute fits at no sharding, nothing
    # fits: every try counted as rejected, as if each had been priced.
    found: list[tuple[Recompute, Parallelism, int]] = []
    reasons: list[str] = []
    try:
        leanest = tries[-1][0]
        if not any(fits(leanest, z) for z in dict.fromkeys(z for _, z in tries)):
            return [], [f"does not fit ({rc.value} recompute, ZeRO-{z})" for rc, z in tries]
        for rc, z in tries:
            if found and (z >= 3 or rc is found[0][0]):
                continue  # only a fit with less sharding than the ZeRO-3 one found can be faster
            if not fits(rc, z):
                if not found:
                    reasons.append(f"does not fit ({rc.value} recompute, ZeRO-{z})")
                continue
            found.append((rc, *peak_of(rc, z)))
            if z < 3:
                break
    except TcalcError:
        raise
    except ValueError:
        return [], [*reasons, "the model cannot take this layout"]
    return found, reasons


MICRO_BATCHES = (1, 2, 4, 8, 16, 32)  # the micro-batches `tcalc train` tries when none is given


@dataclass(frozen=True)
class MicroBatchTrial:
    micro_batch: int
    fits: bool  # the step's peak fits the GPU (less the CUDA context)
    step_time_s: float


def fastest_micro_batch(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, gpu: GPU, *, global_batch: int,
    network: Any = None, matmul_efficiency: float | None = None, tp_comm_overlap: bool | None = None,
    moe_load_imbalance: float | None = None, moe_a2a_overlap: bool = False, moe_dispatch: Any = None,
) -> tuple[int, list[MicroBatchTrial]]:
    """The fastest micro-batch b (of MICRO_BATCHES) that fits and divides the per-replica batch
    G/dp, with every trial; 1 when none fits. The fit is the step timeline's peak (one fit finder:
    timeline.peak_memory), the time estimate_step's."""
    from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory

    trials: list[MicroBatchTrial] = []
    best: tuple[int, float] | None = None
    per_replica = global_batch // par.data if par.data and global_batch % par.data == 0 else 0
    for b in MICRO_BATCHES:
        if not per_replica or per_replica % b:
            continue
        trial_w = w.model_copy(update={"batch_size": b})
        trial_tr = tr.model_copy(update={"micro_batches": per_replica // b})
        fits = peak_memory(m, trial_w, trial_tr, par).peak_bytes <= fit_capacity(gpu.memory_bytes)
        est = estimate_step(m, trial_w, trial_tr, par, gpu, global_batch=global_batch, network=network,
                            matmul_efficiency=matmul_efficiency, tp_comm_overlap=tp_comm_overlap,
                            moe_load_imbalance=moe_load_imbalance, moe_a2a_overlap=moe_a2a_overlap,
                            moe_dispatch=moe_dispatch)
        trials.append(MicroBatchTrial(micro_batch=b, fits=fits, step_time_s=est.step_time_s))
        if fits and (best is None or est.step_time_s < best[1]):
            best = (b, est.step_time_s)
    return (best[0] if best else 1), trials


def plan_layouts(
    m: ModelConfig,
    seq_len: int,
    tr: Training,
    gpu,
    *,
    gpus: int,
    global_batch: int,
    network: Network | None = None,
    capacity: int | None = None,
    max_pipeline: int = 64,
    micro_batches: tuple[int, ...] = (1, 2, 4, 8),
    expert_tensor: int | None = None,
) -> tuple[list[Plan], dict[str, int]]:
    """Every layout of `gpus` GPUs the model can take, the ones that fit ranked by step time.

    Enumerated: T dividing the heads (and the MLP widths) within one NVLink domain; P with the
    splits of `pipeline_splits` (at most max_pipeline) and their v; the two-chunk schedules the
    framework runs (PLAN_SCHEDULES) where v = 2; CP in {1, 2, 4, 8} for S >= 16384; EP dividing the
    experts (up to 64 or the NVLink domain); dp what is left (T·CP·P must divide the GPUs); the
    micro-batch among `micro_batches` dividing the per-replica batch; recompute none, selective,
    full; SP with T > 1; ZeRO-1, -2, -3 (PLAN_ZERO: torchtitan FSDP2 only), the least recompute and
    then the least sharding that fits (`_plan_fit`); `expert_tensor` (etp, default T) is kept in
    every layout. Pruned without loss: a layout whose full recompute fits at no sharding is counted
    rejected for every try without pricing them, and so are its larger micro-batches (memory grows
    with b); the peak is computed on the stages that bound it (`all_stages=False`). Returns the
    plans that fit (fastest first) and the rejected counted by reason. Bounded: at most a few
    thousand layouts, each O(1).

    Longer than 60 lines on purpose: the search is one nest (T, CP, P, the pipeline layouts, EP),
    each level's rejections counted where they happen; a layout's micro-batches are
    `_micro_batch_plans`.
    """
    from transformer_calc.estimators.training.memory import valid_tensor_parallel
    from transformer_calc.estimators.training.timeline import fit_capacity

    net = network or default_network(gpu)
    cap = capacity if capacity is not None else fit_capacity(gpu.memory_bytes)
    rejected: dict[str, int] = {}

    def reject(reason: str) -> None:
        rejected[reason] = rejected.get(reason, 0) + 1

    plans: list[Plan] = []
    Ts = [T for T in valid_tensor_parallel(m, limit=net.node_size) if T <= net.node_size]
    Ps = [P for P in range(1, max_pipeline + 1) if pipeline_splits(m.n_layers, P)]
    CPs = [c for c in (1, 2, 4, 8) if seq_len >= 16384 or c == 1]
    EPs = _divisors(m.n_experts, max(64, net.node_size)) if m.is_moe else [1]  # EP up to an NVL72 domain
    schedules = PLAN_SCHEDULES.get(tr.framework.value, ())
    zeros = PLAN_ZERO.get(tr.framework.value, (1, 2, 3))
    recomputes = (Recompute.none, Recompute.selective, Recompute.full)
    for T in Ts:
        for cp in CPs:
            if seq_len % cp:
                continue
            for P in Ps:
                if gpus % (T * cp * P):
                    reject("T·CP·P does not divide the GPUs")
                    continue
                dp = gpus // (T * cp * P)
                if global_batch % dp:
                    reject("the global batch is not a multiple of dp")
                    continue
                per_replica = global_batch // dp
                bs = [b for b in micro_batches if per_replica % b == 0]
                for split, v, sched in _pipeline_layouts(m.n_layers, P, schedules):
                    for ep in EPs:
                        if (T * dp) % ep:
                            reject("ep does not divide T·dp")
                            continue
                        par = Parallelism(tensor=T, pipeline=P, data=dp, context=cp, virtual_stages=v, expert=ep,
                                          expert_tensor=expert_tensor, sequence_parallel=T > 1,
                                          zero=zeros[0] if dp > 1 else 0, pipeline_schedule=sched, **split)
                        tries = [(rc, z) for rc in recomputes for z in (zeros if dp > 1 else (0,))]
                        plans += _micro_batch_plans(m, seq_len, tr, par, tries, cap, per_replica, bs, gpu,
                                                    global_batch, net, reject)
    plans.sort(key=lambda pl: pl.estimate.step_time_s)
    return plans, rejected


def _pipeline_layouts(L: int, P: int, schedules: tuple[str, ...]) -> list[tuple[dict[str, Any], int, Any]]:
    """The split's default schedule (1F1B, interleaved with v > 1), and with two chunks per stage the
    framework's two-chunk schedules (PLAN_SCHEDULES)."""
    from transformer_calc.model.config import PipelineSchedule

    layouts: list[tuple[dict[str, Any], int, PipelineSchedule | None]]
    layouts = [(split, v, None) for split, v in pipeline_splits(L, P)]
    layouts += [(split, v, PipelineSchedule(sched)) for split, v in pipeline_splits(L, P) if v == 2
                for sched in schedules if sched != "dualpipe" or P % 2 == 0]
    return layouts


def _micro_batch_plans(m: ModelConfig, seq_len: int, tr: Training, par: Parallelism, tries: list[Any], cap: int,
                       per_replica: int, bs: list[int], gpu: Any, global_batch: int, net: Network,
                       reject: Any) -> list[Plan]:
    """The fastest fitting try of each micro-batch `bs` of one layout; a micro-batch that does not fit
    at any try ends the search (memory grows with b: no larger one fits either, counted alike)."""
    out = []
    for i, b in enumerate(bs):
        w = Workload(seq_len=seq_len, batch_size=b)  # the whole sequence: each CP rank S/CP
        found, reasons = _plan_fit(m, w, tr, par, tries, cap, per_replica // b)
        for reason in reasons:
            reject(reason)
        if not found:
            if reasons and all(r.startswith("does not fit") for r in reasons):
                for _ in bs[i + 1:]:
                    for reason in reasons:
                        reject(reason)
                break
            continue
        best: Plan | None = None
        for rc, lay, peak in found:
            trial = tr.model_copy(update={"recompute": rc, "micro_batches": per_replica // b})
            est = estimate_step(m, w, trial, lay, gpu, global_batch=global_batch, network=net)
            if best is None or est.step_time_s < best.estimate.step_time_s:
                best = Plan(lay, b, rc, est, peak)
        assert best is not None
        out.append(best)
    return out
