"""`tcalc rl`: one RL post-training step (GRPO, PPO), its phases' time and memory per GPU.

The typed result (`RlResult`) is the command's JSON (`model_dump(mode="json")`), the Python API's
return value and what render reads; docs/cli.md documents its keys. The step is composed by
`estimators.rl.rl_step` from the serve model (generation), the train model (passes, updates) and
the training memory timeline; the engine's settings are serve's (`EngineSettings`), the trainer's
layout is train's (`Layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from transformer_calc.results.base import Result, Section
from transformer_calc.results.common import Assumptions, ModelSection, assumptions_section, model_section, network_for
from transformer_calc.results.serve import EngineSettings, engine_section
from transformer_calc.results.train import Layout

if TYPE_CHECKING:
    from transformer_calc.requests.rl import RlRequest


class RlSettings(Section):
    """What one step does, and where."""

    algorithm: str  # grpo | ppo
    group_size: int  # G, samples per prompt
    prompts_per_step: int
    samples_per_step: int  # prompts · G
    prompt_len: int  # P
    max_response_len: int  # L
    response_len_mean: float  # μ
    response_len_dist: str  # exponential | uniform | fixed
    clipped_fraction: float  # responses cut at L (verl's response_length/clip_ratio)
    kl_reference: bool
    critic: bool  # PPO's value model
    mini_batches: int  # optimizer steps per epoch
    epochs: int
    partial_rollouts: bool
    off_policy_steps: int  # 0 on-policy; 1 the next generation overlaps this step's trainer work
    gpu: str
    gpus: int
    placement: str  # colocated | split
    trainer_gpus: int
    rollout_gpus: int
    sleep: bool | None  # colocated: the engine freed while the trainer works (None: split pools)
    offload_idle: bool | None  # colocated: the trainer's states on the host during generation (None: split)
    generation_efficiency: float  # the fraction of serve's rates the generation achieves (fitted default)
    trainer_efficiency: float  # the fraction of train's rates the passes and updates achieve (fitted default)


class RolloutSection(Section):
    """The generation: R replicas of T_e GPUs, each with its share of the samples."""

    tensor: int  # T_e, the engine's tensor-parallel GPUs per replica
    replicas: int
    weight_dtype: str
    kv_dtype: str
    engine: EngineSettings
    samples_per_replica: int
    concurrency: int  # sequences in flight per replica (the KV pool at P + μ, max_num_seqs, the samples)
    max_concurrent_sequences: int  # whose cache at P + μ fits
    kv_budget_bytes_per_gpu: int
    steady_tokens_per_s_per_replica: float  # at the concurrency (serve's steady state)
    queue_s: float  # while samples wait for a slot
    prefill_s: float  # the first wave's prompts
    tail_s: float  # the last wave drained down to the longest sample
    longest_response_len: float
    generation_s: float
    drain_s: float  # the step's samples alone, to the longest (queue + prefill + tail without partial rollouts)
    tokens_per_s: float  # generated tokens per second, all replicas: samples · μ / generation_s


class TrainerSection(Section):
    """The policy's updates and forwards on the trainer's GPUs (`tcalc train`'s step model)."""

    layout: Layout
    framework: str
    recompute: str
    micro_batch: int
    seq_len: int  # S priced for time: P + μ (packed sequences)
    memory_seq_len: int  # S of the memory timeline: P + L (the longest sample)
    global_batch: int  # sequences per optimizer step
    update_step_s: float  # one optimizer step
    policy_update_s: float  # update_step_s · mini_batches · epochs
    forward_s: float  # one log-prob (or value) pass over every sample
    mfu: float  # the update's


class SyncSection(Section):
    """The weight sync from the trainer to the engine."""

    dtype: str  # bf16 | fp8
    bytes: int  # the whole model
    bytes_per_engine_gpu: int
    link: str  # nvlink | network
    link_bytes_s: float  # one direction
    buffer_bytes: int  # the bucket in flight (verl's 2048 MB), or the whole model when smaller
    time_s: float


class PhaseTime(Section):
    phase: str
    time_s: float
    share: float  # of the sum of the phases (the step's work, overlapped or not)


class MemoryRow(Section):
    """One GPU in one phase (bytes)."""

    phase: str  # generation | log-prob | training | weight sync
    pool: str  # all (colocated) | trainer | engine (split)
    trainer_bytes: int
    trainer_work_bytes: int
    reference_bytes: int
    critic_bytes: int
    engine_weights_bytes: int
    kv_cache_bytes: int
    engine_reserve_bytes: int
    sync_buffer_bytes: int
    cuda_context_bytes: int
    total_bytes: int
    fits: bool


class RlMemory(Section):
    phases: list[MemoryRow]
    peak_bytes: int  # the largest phase on any GPU
    peak_phase: str
    peak_pool: str
    capacity_bytes: int  # the GPU's memory
    fits: bool


class SplitRow(Section):
    """One split of the GPUs between the trainer and the engine (`--rollout-gpus auto`)."""

    rollout_gpus: int
    trainer_gpus: int
    step_time_s: float | None  # None: the split was refused (reason)
    generation_s: float | None
    trainer_s: float | None  # the passes and updates
    fits: bool | None  # every phase's memory fits the GPU
    reason: str | None = None  # why the split was refused


class RlResult(Result):
    model: ModelSection
    rl: RlSettings
    rollout: RolloutSection
    trainer: TrainerSection
    sync: SyncSection
    phases: list[PhaseTime]  # the step's work, in order
    step_time_s: float  # the sum of the phases; one-step off-policy: max(generation, trainer work) + sync + offload
    samples_per_s: float
    tokens_per_s: float  # samples · (P + μ) / step_time_s
    tokens_per_s_per_gpu: float
    generation_share: float  # of the step time (on-policy: the generation phase's share)
    memory: RlMemory
    split_plan: list[SplitRow] | None = None  # with --rollout-gpus auto: every split tried, the chosen one priced above
    assumptions: Assumptions = Assumptions(defaults=[])


def _layout(par: Any) -> Layout:
    return Layout(tensor=par.tensor, pipeline=par.pipeline, virtual_stages=par.virtual_stages, context=par.context,
                  expert=par.expert, data=par.data, sequence_parallel=par.sequence_parallel, zero=par.zero,
                  gpus=par.gpus, pipeline_schedule=par.schedule.value)


MAX_SPLITS = 64  # splits --rollout-gpus auto prices at most (evenly spaced when more are possible)


def split_plan(v: dict[str, Any], priced: Any, capacity: int) -> tuple[list[SplitRow], Any]:
    """`--rollout-gpus auto`: every split of v["gpus"] whose engine pool is a multiple of T_e and whose
    trainer pool a multiple of T·P·CP (at most MAX_SPLITS, evenly spaced), each priced by `priced`;
    the fastest whose memory fits is chosen (the fastest of all when none fits)."""
    from transformer_calc.errors import TcalcError

    gpus, te = v["gpus"], v["rollout_tensor"]
    group = (v.get("tensor") or 1) * (v.get("pipeline") or 1) * (v.get("context") or 1)
    candidates = [r for r in range(te, gpus, te) if (gpus - r) % group == 0]
    if not candidates:
        raise TcalcError(f"--rollout-gpus auto: no split of {gpus} GPUs gives the engine a multiple of T_e ({te}) "
                         f"and the trainer a multiple of T·P·CP ({group}); give more --gpus")
    if len(candidates) > MAX_SPLITS:
        candidates = [candidates[round(i * (len(candidates) - 1) / (MAX_SPLITS - 1))] for i in range(MAX_SPLITS)]
    rows: list[SplitRow] = []
    priced_at: dict[int, Any] = {}
    for r in candidates:
        try:
            out = priced(r)
        except TcalcError as exc:
            rows.append(SplitRow(rollout_gpus=r, trainer_gpus=gpus - r, step_time_s=None, generation_s=None,
                                 trainer_s=None, fits=None, reason=str(exc)))
            continue
        step = out[-1]
        phases = step.phases
        trainer = sum(phases.values()) - phases["generation"] - phases["weight_sync"] - phases["offload"]
        fits = all(x.total <= capacity for x in step.memory)
        priced_at[r] = out
        rows.append(SplitRow(rollout_gpus=r, trainer_gpus=gpus - r, step_time_s=step.step_time_s,
                             generation_s=phases["generation"], trainer_s=trainer, fits=fits))
    ok = [x for x in rows if x.step_time_s is not None]
    if not ok:
        raise TcalcError(f"--rollout-gpus auto: no split of {gpus} GPUs can be priced; the first: {rows[0].reason}")
    best = min((x for x in ok if x.fits) or ok, key=lambda x: x.step_time_s)
    return rows, priced_at[best.rollout_gpus]


TRAINING_KEYS = ("framework", "zero", "tensor", "pipeline", "context", "expert", "expert_tensor", "sequence_parallel",
                 "recompute", "flash", "optimizer", "grad_bytes", "offload", "offload_device", "batch_size", "gpu")
ENGINE_KEYS = ("engine", "memory_utilization", "max_num_seqs", "max_num_batched_tokens")


@dataclass(frozen=True)
class _Setup:
    """What rl_report resolves before pricing: the model, the settings, the GPU, the network, the
    algorithm, the engine (spec, efficiency, serving) and the trainer's flags."""

    m: Any
    v: dict[str, Any]
    assumed: list[Any]
    device: Any
    network: Any
    alg: Any
    spec: Any
    eff: Any
    serving: Any
    train_flags: dict[str, Any]


def _setup(req: RlRequest) -> _Setup:
    """The request's settings with the defaults filled (requests.defaults.rl_defaults), the
    algorithm, and the engine built as serve builds it."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.rl import Algorithm, LengthDistribution
    from transformer_calc.requests.defaults import rl_defaults
    from transformer_calc.requests.inference import inference_efficiency, inference_spec, serving_spec
    from transformer_calc.sources.presets import gpu as find_gpu

    m = req.source().model
    given = req.settings()
    defaults, assumed = rl_defaults(given)
    v = {**given, **{k: x for k, x in defaults.items() if given.get(k) is None}}
    device = find_gpu(v["gpu"])
    network = network_for(device, v.get("node_size"), v.get("inter_node_gb_s"))
    try:
        lengths = LengthDistribution(v["response_len_dist"], float(v["response_len_mean"]), v["max_response_len"])
        alg = Algorithm(v["algorithm"], v["group_size"], v["prompts_per_step"], v["seq_len"], lengths,
                        bool(v["kl_reference"]), v["mini_batches"], v["epochs"], bool(v["partial_rollouts"]),
                        v["off_policy_steps"])
    except ValueError as exc:
        raise TcalcError(f"rl: {exc}") from None
    engine_flags = {"tensor": v["rollout_tensor"], "seq_len": v["seq_len"], "new_tokens": v["max_response_len"],
                    "weight_dtype": v["weight_dtype"], "kv_dtype": v.get("kv_dtype"), "gpu": v["gpu"],
                    "matmul_efficiency": v.get("matmul_efficiency"),
                    **{k: v.get(k) for k in ENGINE_KEYS}}
    engine_flags = {k: x for k, x in engine_flags.items() if x is not None}
    spec, _ = inference_spec(m, {}, engine_flags)
    eff = inference_efficiency(device, {}, engine_flags, network)
    serving = serving_spec({}, engine_flags, device, v["rollout_tensor"])
    train_flags = {k: v.get(k) for k in TRAINING_KEYS}
    train_flags["seq_len"] = v["seq_len"] + v["max_response_len"]
    return _Setup(m, v, assumed, device, network, alg, spec, eff, serving, train_flags)


def _priced(su: _Setup, rollout_gpus: int) -> tuple[Any, Any, Any, Any, Any, Any]:
    """(pools, w, tr, par, the trainer's assumed defaults, the step) with `rollout_gpus` engine GPUs."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.rl import Pools, rl_step
    from transformer_calc.requests.defaults import Assumption
    from transformer_calc.requests.training import train_configs

    m, v, alg, device, network = su.m, su.v, su.alg, su.device, su.network
    try:
        pools = Pools(v["placement"], v["gpus"], rollout_gpus, v["rollout_tensor"], bool(v.get("sleep", False)),
                      bool(v.get("offload_idle", False)), v["weight_dtype"])
    except ValueError as exc:
        raise TcalcError(f"rl: {exc}") from None
    w, tr, par, _, _, train_assumed = train_configs(m, {}, su.train_flags, pools.trainer_gpus)
    if v.get("batch_size") is None:  # tcalc train's rule: the fastest micro-batch that fits (at P + L)
        from transformer_calc.estimators.training.train import fastest_micro_batch

        G = max(1, -(-alg.samples // alg.mini_batches // par.data)) * par.data
        b, _ = fastest_micro_batch(m, w, tr, par, device, global_batch=G, network=network,
                                   matmul_efficiency=v.get("matmul_efficiency"))
        w = w.model_copy(update={"batch_size": b})
        train_assumed = [*train_assumed, Assumption("batch_size", b, "the fastest micro-batch that fits at P + L "
                                                                     "(tcalc train's rule)")]
    try:
        step = rl_step(m, device, su.spec, su.eff, su.serving, w, tr, par, alg, pools, network=network,
                       matmul_efficiency=v.get("matmul_efficiency"),
                       generation_efficiency=v["generation_efficiency"], trainer_efficiency=v["trainer_efficiency"])
    except TcalcError:
        raise
    except ValueError as exc:
        raise TcalcError(f"rl: {' '.join(str(exc).split())}") from None
    return pools, w, tr, par, train_assumed, step


def _settings_section(su: _Setup, pools: Any) -> RlSettings:
    alg, lengths, v = su.alg, su.alg.lengths, su.v
    colocated = pools.placement == "colocated"
    return RlSettings(
        algorithm=alg.name, group_size=alg.group_size, prompts_per_step=alg.prompts_per_step,
        samples_per_step=alg.samples, prompt_len=alg.prompt_len, max_response_len=lengths.cap,
        response_len_mean=lengths.mean, response_len_dist=lengths.kind, clipped_fraction=lengths.clipped,
        kl_reference=alg.kl_reference, critic=alg.critic, mini_batches=alg.mini_batches, epochs=alg.epochs,
        partial_rollouts=alg.partial_rollouts, off_policy_steps=alg.off_policy_steps, gpu=su.device.name,
        gpus=pools.gpus, placement=pools.placement, trainer_gpus=pools.trainer_gpus,
        rollout_gpus=pools.rollout_gpus, sleep=pools.sleep if colocated else None,
        offload_idle=pools.offload_idle if colocated else None,
        generation_efficiency=v["generation_efficiency"], trainer_efficiency=v["trainer_efficiency"])


def _rollout_section(su: _Setup, pools: Any, ro: Any) -> RolloutSection:
    generated = su.alg.samples * su.alg.lengths.mean
    return RolloutSection(
        tensor=pools.rollout_tensor, replicas=pools.replicas, weight_dtype=su.spec.weight_dtype,
        kv_dtype=su.spec.resolved_kv_dtype, engine=engine_section(su.serving), samples_per_replica=ro.samples_per_replica,
        concurrency=ro.concurrency, max_concurrent_sequences=ro.max_concurrent_sequences,
        kv_budget_bytes_per_gpu=ro.kv_budget_bytes, steady_tokens_per_s_per_replica=ro.steady_tokens_per_s,
        queue_s=ro.queue_s, prefill_s=ro.prefill_s, tail_s=ro.tail_s, longest_response_len=ro.longest_response_len,
        generation_s=ro.time_s, drain_s=ro.drain_s, tokens_per_s=generated / ro.time_s)


def _memory_section(step: Any, device: Any) -> RlMemory:
    rows = [MemoryRow(**{f: getattr(x, f) for f in (
        "phase", "pool", "trainer_bytes", "trainer_work_bytes", "reference_bytes", "critic_bytes",
        "engine_weights_bytes", "kv_cache_bytes", "engine_reserve_bytes", "sync_buffer_bytes", "cuda_context_bytes")},
        total_bytes=x.total, fits=x.total <= device.memory_bytes) for x in step.memory]
    peak = max(rows, key=lambda r: r.total_bytes)
    return RlMemory(phases=rows, peak_bytes=peak.total_bytes, peak_phase=peak.phase, peak_pool=peak.pool,
                    capacity_bytes=device.memory_bytes, fits=all(r.fits for r in rows))


def rl_report(req: RlRequest) -> RlResult:
    """The step from the request: the defaults filled (requests.defaults.rl_defaults), the engine
    built as serve builds it, the trainer as train does, then estimators.rl.rl_step."""
    su = _setup(req)
    v = su.v
    plan: list[SplitRow] = []
    if v["placement"] == "colocated":
        pools, w, tr, par, train_assumed, step = _priced(su, v["gpus"])
    elif v["rollout_gpus"] != "auto":
        pools, w, tr, par, train_assumed, step = _priced(su, v["rollout_gpus"])
    else:
        plan, best = split_plan(v, lambda n: _priced(su, n), su.device.memory_bytes)
        pools, w, tr, par, train_assumed, step = best
    up, sync = step.updates, step.sync
    total_work = sum(step.phases.values())
    phases = [PhaseTime(phase=name, time_s=t, share=t / total_work) for name, t in step.phases.items()]
    extra = [a for a in train_assumed if a.option not in {x.option for x in su.assumed} and a.option != "seq_len"]
    return RlResult(
        model=model_section(su.m),
        rl=_settings_section(su, pools),
        rollout=_rollout_section(su, pools, step.rollout),
        trainer=TrainerSection(
            layout=_layout(par), framework=tr.framework.value, recompute=tr.recompute.value, micro_batch=w.batch_size,
            seq_len=up.seq_len, memory_seq_len=w.seq_len, global_batch=up.global_batch,
            update_step_s=up.update_step_s, policy_update_s=up.policy_update_s, forward_s=up.forward_s, mfu=up.mfu),
        sync=SyncSection(dtype=pools.sync_dtype, bytes=sync.bytes, bytes_per_engine_gpu=sync.bytes_per_engine_gpu,
                         link=sync.link, link_bytes_s=sync.link_bytes_s, buffer_bytes=sync.buffer_bytes,
                         time_s=sync.time_s),
        phases=phases,
        step_time_s=step.step_time_s,
        samples_per_s=su.alg.samples / step.step_time_s,
        tokens_per_s=step.tokens_per_step / step.step_time_s,
        tokens_per_s_per_gpu=step.tokens_per_step / step.step_time_s / pools.gpus,
        generation_share=min(1.0, step.phases["generation"] / step.step_time_s),
        memory=_memory_section(step, su.device),
        **({"split_plan": plan} if plan else {}),
        assumptions=assumptions_section([*su.assumed, *extra]),
    )


# ---------------------------------------------------------------------------- the command
def run_rl(req: RlRequest) -> RlResult:
    return rl_report(req)
