"""RL post-training (GRPO, PPO): one step's phases, their time and their memory per GPU.

A step of on-policy RL (Shao et al. 2024, DeepSeekMath, "GRPO"; Schulman et al. 2017, "PPO"; the
dataflow of Sheng et al. 2024, HybridFlow/verl, arXiv:2409.19256, and Hu et al. 2024, OpenRLHF,
arXiv:2405.11143) is

1. **generation**: an inference engine (vLLM, SGLang) samples G responses for each of the step's
   prompts (N = prompts · G samples), on R engine replicas of T_e GPUs each;
2. **log-prob passes**: the policy's forward over every sample (the "old" log-probs), the
   reference model's (with a KL term), the critic's values (PPO);
3. **updates**: the policy's (and the critic's) optimizer steps, `mini_batches` per step over
   `epochs` passes of the samples;
4. **weight sync**: the trainer's new weights resharded into the engine's layout (colocated) or
   sent to the engine's GPUs (split pools), in bf16 or fp8.

Nothing here is re-derived: the generation is the serve model's (`serving.load_point` at the
engine's concurrency, `serving.capacity` for its KV cache, the expected step model of `tcalc
inference` for the decode steps of the tail), the updates and forwards are `tcalc train`'s
(`train.estimate_step`), the trainer's memory is `tcalc memory`'s (`timeline.peak_memory`).

**The long tail.** Response lengths follow a distribution (`LengthDistribution`: fixed, uniform,
or exponential clipped at the maximum, the shape reasoning runs log), and a synchronous step waits
for its longest sample (Kimi Team 2025, k1.5, §2.6.2; Fu et al. 2025, AReaL): with n_r samples per
replica and a KV pool that keeps C in flight, the engine first runs C at a time while the queue
lasts (the serve model's steady state at concurrency C, (n_r − C)·μ tokens), then the last
min(n_r, C) drain: decode step t runs the n·S(t) sequences still generating (S the survival
function of the lengths) at context P + t, up to the longest sample, ln(2n)/λ for the exponential
(the length beyond which half a sample is expected), the cap L where the clipped mass reaches it.
With partial rollouts (k1.5's), or in-flight weight updates (NeMo-RL's async GRPO: the engine takes
the new weights mid-generation, docs/guides/async-grpo.md), the engine stays full: every token at
the steady rate, no tail.

**Overlaps.** Synchronous (on-policy) steps run the phases one after another. With
`off_policy_steps` = 1 on split pools (NeMo-RL's and verl's one-step off-policy, AReaL's bounded
staleness) the next step's generation runs during this step's passes and updates: step =
max(generation, passes + updates, (drain + passes + updates) / 2) + weight sync, the third term the
latency of a batch that cannot start before the previous refit (`off_policy_step_s`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from transformer_calc.model.config import ModelConfig

DISTRIBUTIONS = ("exponential", "uniform", "fixed")
ALGORITHMS = ("grpo", "ppo")
PLACEMENTS = ("colocated", "split")
SYNC_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}
TAIL_SEGMENTS = 32  # decode-step segments of the drain, each priced at its midpoint's batch and context
BISECTION_STEPS = 80  # halvings of the exponential's rate (its mean fixes it)
SYNC_BUCKET_BYTES = 2048 * 2**20  # the weight sync's bucket in flight: verl's rollout.update_weights_bucket_megabytes 2048
FORWARD_OF_STEP = 3  # a training step's model FLOPs are 3 forwards (forward + backward's two matmuls)
# The fraction of tcalc's serve and train rates an RL framework achieves in its generation and in its
# passes and updates (docs/formulas.md §9, "Calibration"): FITTED by tools/validation/rl_runs.py --fit
# on NeMo-RL v0.5's H100 runs of Llama-3.1-8B, Qwen3-30B-A3B and Qwen3-32B, on-policy and one-step
# off-policy (6 runs; the pairs separate the two: an off-policy step is bound by one side, an
# on-policy step sums both), with LOGPROB_SEQUENCE_S, the refit terms and off_policy_step_s in place; checked on the
# other 19 (DeepSeek-V3, Qwen3-235B, GB200, MI300X, NeMo-RL v0.3's H100 runs, marin's H100 run). At 1.0
# the phases are the serve and train models' own.
# Refitted (issue 41) when the one-step off-policy step gained its third term (`off_policy_step_s`: a
# batch cannot start before the previous refit), which binds on the fit run Llama-3.1-8B off-policy:
# 0.73 and 0.75 before (fitted on the old composition); the 6 fit runs 3.8 -> 2.2 %, the 19 checks
# 28.3 -> 29.9 %, all 25 24.6 -> 22.5 %, the generation share 7.0 -> 4.4 points. After issue 37's serving
# refit (expected experts, kernel cost 8.29 us): fit runs 2.2 %, checks 29.3 %, all 25 22.3 %, generation
# share 4.6 points; the grid's best fit is then 0.80 / 0.73, within its step of these (docs/validation.md).
GENERATION_EFFICIENCY = 0.79
TRAINER_EFFICIENCY = 0.73
# The rollout engine returns each sampled token's log-prob (the trainer's importance ratio needs it):
# host work per sequence per decode step, on the CPU whatever the GPU (slicing the step's logprob
# lists per request, the IPC to the output processor, building its Logprob objects). MEASURED, not
# fitted: vllm-project/vllm PR #57442, Qwen2.5-0.5B on one L20, concurrency 64: 18,645 output tokens/s
# without logprobs, 13,583 with logprobs=0, so 1/13,583 − 1/18,645 = 20.0 µs per returned token. It is
# the serve model's per-sequence term (`Efficiency.sequence_s`), added for the rollout only.
LOGPROB_SEQUENCE_S = 20.0e-6
# The weight sync beyond the bytes on the link (NeMo-RL's refit: gathering and packing each bucket,
# the IPC handles or NCCL groups, the engine's load_weights into its own layout, its KV cache and
# CUDA graphs re-armed): a fixed cost per refit and a per-byte cost on each engine GPU. FITTED on two
# refits of NeMo-RL's design doc (docs/design-docs/nccl-reshard-refit.md, "Expected Performance",
# midpoints): Qwen3-4B DP8 -> TP8 0.275 s (1.0 GB per engine GPU, 0.02 s on the link) and DeepSeek-V3
# PP16xEP16 -> TP32 2.61 s (41.9 GB, 0.84 s on the link): 0.255 = a + 1.0/b, 1.77 = a + 41.9/b; checked
# on its Qwen3-30B-A3B (H100) and DeepSeek-V3 (GB200) refits (docs/validation.md).
REFIT_FIXED_S = 0.218
REFIT_LOAD_BYTES_S = 27.0e9


# ============================================================================ response lengths
@dataclass(frozen=True)
class LengthDistribution:
    """Response lengths: `kind` with mean `mean` tokens, none longer than `cap` (max_response_len).

    exponential: rate λ with the mass beyond the cap clipped to it (a truncated response),
    mean = (1 − e^{−λL})/λ; uniform: on [a, b], b = L and a = 2μ − L when μ >= L/2, else [0, 2μ];
    fixed: every response μ tokens."""

    kind: str
    mean: float
    cap: int

    def __post_init__(self) -> None:
        if self.kind not in DISTRIBUTIONS:
            raise ValueError(f"response_len_dist ({str(self.kind)[:40]!r}) must be one of {', '.join(DISTRIBUTIONS)}")
        if not (isinstance(self.cap, int) and self.cap >= 1):
            raise ValueError(f"max_response_len ({self.cap!r}) must be a whole number >= 1")
        if not (math.isfinite(self.mean) and 1 <= self.mean <= self.cap):
            raise ValueError(f"response_len_mean ({self.mean!r}) must be between 1 and the maximum response "
                             f"length ({self.cap})")

    @property
    def rate(self) -> float:
        """λ of the exponential, solved from the mean by bisection on x = λL: (1 − e^{−x})/x = μ/L."""
        r = self.mean / self.cap
        if r >= 1.0:
            return 0.0
        lo, hi = 1e-12, 1e4
        for _ in range(BISECTION_STEPS):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if -math.expm1(-mid) / mid > r else (lo, mid)
        return hi / self.cap

    def _uniform(self) -> tuple[float, float]:
        L, mu = self.cap, self.mean
        return (2 * mu - L, float(L)) if mu >= L / 2 else (0.0, 2 * mu)

    def survival(self, t: float) -> float:
        """S(t): the fraction of responses longer than t tokens."""
        if self.kind == "fixed" or (self.kind == "exponential" and self.rate == 0.0):
            return 1.0 if t < self.mean else 0.0
        if t >= self.cap:
            return 0.0
        if self.kind == "exponential":
            return math.exp(-self.rate * t)
        a, b = self._uniform()
        return 1.0 if t <= a else max(0.0, (b - t) / (b - a))

    @property
    def clipped(self) -> float:
        """The fraction of responses cut at the cap (verl's response_length/clip_ratio)."""
        if self.kind == "fixed":
            return 1.0 if self.mean >= self.cap else 0.0
        if self.kind == "exponential":
            return 1.0 if self.rate == 0.0 else math.exp(-self.rate * self.cap)
        return 0.0

    def longest(self, n: int) -> float:
        """The longest of n responses: the length beyond which half a response is expected
        (n·S(t) = 1/2), at most the cap."""
        if self.kind == "fixed" or (self.kind == "exponential" and self.rate == 0.0):
            return float(self.mean)
        if self.kind == "exponential":
            if n * self.clipped >= 0.5:
                return float(self.cap)
            return min(float(self.cap), math.log(2 * n) / self.rate)
        a, b = self._uniform()
        return b - (b - a) / (2 * n)


# ============================================================================ the settings
@dataclass(frozen=True)
class Algorithm:
    """What one step computes (module docstring)."""

    name: str  # grpo | ppo (with a critic)
    group_size: int  # G: samples per prompt
    prompts_per_step: int
    prompt_len: int  # P
    lengths: LengthDistribution  # the responses
    kl_reference: bool  # a reference model's log-probs (a KL term)
    mini_batches: int = 1  # optimizer steps per epoch
    epochs: int = 1  # passes over the step's samples
    partial_rollouts: bool = False  # unfinished samples carried to the next step (no tail)
    off_policy_steps: int = 0  # 1: the next generation overlaps this step's passes and updates

    def __post_init__(self) -> None:
        if self.name not in ALGORITHMS:
            raise ValueError(f"algorithm ({str(self.name)[:40]!r}) must be one of {', '.join(ALGORITHMS)}")
        for name in ("group_size", "prompts_per_step", "prompt_len", "mini_batches", "epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} ({value!r}) must be a whole number >= 1")
        if self.off_policy_steps not in (0, 1):
            raise ValueError(f"off_policy_steps ({self.off_policy_steps!r}) must be 0 (on-policy) or 1")

    @property
    def samples(self) -> int:
        return self.prompts_per_step * self.group_size

    @property
    def critic(self) -> bool:
        return self.name == "ppo"


@dataclass(frozen=True)
class Pools:
    """Where the trainer and the engine run: the same GPUs (colocated, the engine asleep while the
    trainer works) or two pools (split)."""

    placement: str  # colocated | split
    gpus: int
    rollout_gpus: int  # the engine's GPUs (colocated: all of them)
    rollout_tensor: int  # T_e
    sleep: bool = True  # colocated: the engine frees its KV cache and offloads its weights between rollouts
    offload_idle: bool = False  # colocated: the trainer's (reference's, critic's) states on the host during generation
    sync_dtype: str = "bf16"  # weights sent to the engine

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement ({str(self.placement)[:40]!r}) must be one of {', '.join(PLACEMENTS)}")
        if self.sync_dtype not in SYNC_DTYPE_BYTES:
            raise ValueError(f"the engine's weights ({self.sync_dtype!r}) must be one of {', '.join(SYNC_DTYPE_BYTES)} "
                             "to be synced from the trainer")
        if self.rollout_gpus % self.rollout_tensor:
            raise ValueError(f"the engine's GPUs ({self.rollout_gpus}: --rollout-gpus, or --gpus when colocated) must be "
                             f"a multiple of its T (--rollout-tensor {self.rollout_tensor})")
        if self.placement == "split" and not 1 <= self.rollout_gpus < self.gpus:
            raise ValueError(f"split pools: the engine's GPUs (--rollout-gpus {self.rollout_gpus}) must leave the trainer "
                             f"some of the {self.gpus} (--gpus)")
        if self.placement == "colocated" and self.rollout_gpus != self.gpus:
            raise ValueError("colocated: the engine runs on every GPU")

    @property
    def trainer_gpus(self) -> int:
        return self.gpus if self.placement == "colocated" else self.gpus - self.rollout_gpus

    @property
    def replicas(self) -> int:
        return self.rollout_gpus // self.rollout_tensor


# ============================================================================ generation
@dataclass(frozen=True)
class Rollout:
    """One replica's share of the generation (seconds, tokens)."""

    samples_per_replica: int  # n_r = ceil(N / R)
    concurrency: int  # C: sequences the engine keeps in flight (its KV pool at P + μ, max_num_seqs)
    max_concurrent_sequences: int  # whose cache at P + μ tokens fits
    kv_budget_bytes: int  # per GPU, at the engine's memory utilization
    steady_tokens_per_s: float  # per replica at C in flight (serve's load_point)
    queue_s: float  # while more samples wait than run: (n_r − C)·μ / the steady rate
    prefill_s: float  # the first wave's prompts (a group shares its prompt: prefix caching)
    tail_s: float  # the last min(n_r, C) samples drained down to the longest
    longest_response_len: float
    time_s: float  # queue + prefill + tail (partial rollouts: every token at the steady rate)
    tail_steps: int  # decode steps of the drain
    drain_s: float  # queue + prefill + tail, partial rollouts or not: the step's samples alone, to the longest


def decode_time_s(m: ModelConfig, gpu: Any, spec: Any, eff: Any, batch: int, context: int) -> float:
    """One decode step of `batch` sequences at `context` tokens: `tcalc inference`'s expected step."""
    from transformer_calc.estimators.inference.expected import expected_step
    from transformer_calc.estimators.inference.roofline import decode_step

    s = dataclasses.replace(spec, batch_size=max(1, batch), new_tokens=2)
    return expected_step(m, gpu, s, eff, decode_step(m, gpu, s, max(2, context))).time_s


def rollout(m: ModelConfig, gpu: Any, spec: Any, eff: Any, serving: Any, alg: Algorithm, replicas: int,
            efficiency: float = 1.0) -> Rollout:
    """The generation of one step on one replica (module docstring, "The long tail"), at
    `efficiency` of the serve model's rates (GENERATION_EFFICIENCY)."""
    from transformer_calc.estimators.inference.expected import expected_step
    from transformer_calc.estimators.inference.roofline import prefill_step
    from transformer_calc.estimators.inference.serving import capacity, load_point, sequence_limit

    P, d = alg.prompt_len, alg.lengths
    mu = d.mean
    n_r = -(-alg.samples // replicas)
    mean_out = max(2, round(mu))
    run = dataclasses.replace(spec, batch_size=1, prompt_len=P, new_tokens=mean_out)
    cap = capacity(m, gpu, run, serving)
    if cap.kv_budget_bytes < 0:
        raise ValueError(f"the engine's weights and reserves exceed its memory ({serving.memory_utilization} of "
                         f"{gpu.name}'s) at T = {spec.tensor_parallel}: raise --memory-utilization or --rollout-tensor")
    fits = cap.max_concurrent_sequences
    if fits < 1:
        raise ValueError(f"no room in the engine's KV cache for one sample of {P} + {mean_out} tokens: raise "
                         "--memory-utilization or --rollout-tensor")
    C = max(1, min(fits, sequence_limit(serving, cap), n_r))
    steady = load_point(m, gpu, run, eff, serving, P, mean_out, C).output_tokens_per_s * efficiency
    queue_s = max(0, n_r - C) * mu / steady
    first = min(n_r, C)
    prompts = -(-first // alg.group_size)  # a group's samples share one prefill (prefix caching)
    pre = dataclasses.replace(spec, batch_size=prompts, prompt_len=P, new_tokens=1)
    prefill_s = expected_step(m, gpu, pre, eff, prefill_step(m, gpu, pre)).time_s / efficiency
    longest = d.longest(first)
    steps = max(1, math.ceil(longest))
    tail = 0.0
    edges = [round(steps * k / TAIL_SEGMENTS) for k in range(TAIL_SEGMENTS + 1)]
    for lo, hi in zip(edges, edges[1:]):
        if hi <= lo:
            continue
        mid = (lo + hi) / 2
        active = max(1, round(first * d.survival(mid)))  # the longest sample runs to the end
        tail += (hi - lo) * decode_time_s(m, gpu, spec, eff, active, P + round(mid)) / efficiency
    drain = queue_s + prefill_s + tail
    if alg.partial_rollouts:  # the engine kept full: every token at the steady rate
        t = n_r * mu / steady
        return Rollout(n_r, C, fits, cap.kv_budget_bytes, steady, t, 0.0, 0.0, float(mu), t, 0, drain)
    return Rollout(n_r, C, fits, cap.kv_budget_bytes, steady, queue_s, prefill_s, tail, longest, drain, steps, drain)


# ============================================================================ passes and updates
def packed_len(S: int, par: Any) -> int:
    """S rounded up to what the trainer's layout splits evenly: a multiple of 2·CP (Megatron's
    load-balanced context-parallel chunks) and of T under sequence parallelism (NeMo-RL's
    make_sequence_length_divisible_by, verl's padding to the Ulysses size)."""
    step = 2 * par.context if par.context > 1 else 1
    if par.sequence_parallel and par.tensor > 1:
        step = step * par.tensor // math.gcd(step, par.tensor)
    return -(-S // step) * step


@dataclass(frozen=True)
class Updates:
    """The trainer's work in one step (seconds, on the trainer's GPUs)."""

    update_step_s: float  # one optimizer step over samples / mini_batches sequences
    forward_s: float  # one no-grad forward over every sample (a log-prob or value pass)
    policy_update_s: float  # update_step_s · mini_batches · epochs
    mfu: float  # the update's
    global_batch: int  # sequences per optimizer step (rounded up to dp · micro-batch)
    seq_len: int  # S priced: P + μ (sequences packed, as verl's remove-padding and NeMo-RL's packing)


def updates(m: ModelConfig, w: Any, tr: Any, par: Any, gpu: Any, alg: Algorithm, *, network: Any = None,
            matmul_efficiency: float | None = None, efficiency: float = 1.0) -> Updates:
    """The update and forward times from `tcalc train`'s step model at S = P + μ (the mean
    sample; `w.batch_size` the micro-batch), at `efficiency` of its rates (TRAINER_EFFICIENCY).
    A forward is the step's compute (every term but the optimizer and the data-parallel gradient
    traffic) scaled to one forward of its hardware FLOPs."""
    from transformer_calc.estimators.training.train import estimate_step

    S = packed_len(alg.prompt_len + max(1, round(alg.lengths.mean)), par)
    per = par.data * w.batch_size
    G = -(-alg.samples // alg.mini_batches // per) * per  # the slowest rank's share, rounded up
    G = max(G, per)
    ww = w.model_copy(update={"seq_len": S})
    trr = tr.model_copy(update={"micro_batches": G // per})
    est = estimate_step(m, ww, trr, par, gpu, global_batch=G, network=network, matmul_efficiency=matmul_efficiency)
    passes = est.step_time_s - est.optimizer_s - est.dp_exposed_s - est.offload_pcie_s
    forward_one = passes * (est.model_flops / FORWARD_OF_STEP) / est.hardware_flops / efficiency
    step = est.step_time_s / efficiency
    return Updates(step, forward_one * alg.mini_batches, step * alg.mini_batches * alg.epochs, est.mfu * efficiency, G, S)


# ============================================================================ weight sync
@dataclass(frozen=True)
class WeightSync:
    bytes: int  # the whole model at the sync dtype
    bytes_per_engine_gpu: int  # what one engine GPU receives: its 1/T_e shard (colocated) or all of it (split)
    link: str  # nvlink | network
    link_bytes_s: float  # one direction
    time_s: float
    buffer_bytes: int  # one bucket in flight per GPU: SYNC_BUCKET_BYTES, or the whole model when smaller


def weight_sync(m: ModelConfig, pools: Pools, network: Any, par: Any) -> WeightSync:
    """Colocated (verl's 3D-HybridEngine, Sheng et al. 2024 §5): each GPU gathers its engine shard,
    W/T_e, from the trainer shards of its model replica (T·P·CP GPUs, all dp ranks under FSDP/ZeRO-3)
    over that group's link. Split (OpenRLHF's and NeMo-RL's NCCL broadcast): the trainer sends the
    weights over the link between the pools, each engine GPU receiving its W/T_e shard through its
    own link (the trainer's ranks send their shards in parallel, bucket by bucket: NeMo-RL's
    NCCL refit, docs/design-docs/nccl-reshard-refit.md), (W/T_e) / bandwidth. A transport that
    broadcasts every full tensor (NeMo-RL's default, OpenRLHF's) moves T_e times more. Beyond the
    link, each refit costs REFIT_FIXED_S and each engine GPU loads its W/T_e at REFIT_LOAD_BYTES_S
    (the engine's load_weights; both fitted on NeMo-RL's measured refits)."""
    from transformer_calc.estimators.params import total_params

    N = total_params(m)
    b = SYNC_DTYPE_BYTES[pools.sync_dtype]
    W = N * b
    buffer = min(W, SYNC_BUCKET_BYTES)
    if pools.placement == "colocated":
        group = par.tensor * par.pipeline * par.context * (par.data if par.zero >= 3 else 1)
        bw, lat = network.link(max(group, pools.rollout_tensor))
        per_gpu = -(-W // pools.rollout_tensor)
        t = per_gpu / bw + lat * max(1, m.n_layers) + refit_overhead_s(per_gpu)
        return WeightSync(W, per_gpu, "nvlink" if group <= network.node_size else "network", bw, t, buffer)
    bw, lat = network.link(pools.gpus)
    link = "nvlink" if pools.gpus <= network.node_size else "network"
    per_gpu = -(-W // pools.rollout_tensor)
    t = per_gpu / bw + lat * max(1, m.n_layers) + refit_overhead_s(per_gpu)
    return WeightSync(W, per_gpu, link, bw, t, buffer)


def refit_overhead_s(bytes_per_engine_gpu: int) -> float:
    """A refit's cost beyond the link: REFIT_FIXED_S + (W/T_e) / REFIT_LOAD_BYTES_S (both FITTED)."""
    return REFIT_FIXED_S + bytes_per_engine_gpu / REFIT_LOAD_BYTES_S


# ============================================================================ memory per phase
@dataclass(frozen=True)
class MemoryPhase:
    """What one GPU holds in one phase (bytes)."""

    phase: str  # generation | log-prob | training | weight sync
    pool: str  # all (colocated) | trainer | engine
    trainer_bytes: int  # the policy's states resident (weights, optimizer, Megatron's gradient buffer)
    trainer_work_bytes: int  # the phase's own: training's activations, gradients and temporaries; a forward's
    reference_bytes: int  # the reference model's weights (KL)
    critic_bytes: int  # the critic's states (PPO)
    engine_weights_bytes: int
    kv_cache_bytes: int  # the engine's KV pool, allocated whole at its memory utilization
    engine_reserve_bytes: int  # its activation peak and workspace (CUDA graphs, all-reduce buffers)
    sync_buffer_bytes: int
    cuda_context_bytes: int

    @property
    def total(self) -> int:
        return (self.trainer_bytes + self.trainer_work_bytes + self.reference_bytes + self.critic_bytes
                + self.engine_weights_bytes + self.kv_cache_bytes + self.engine_reserve_bytes + self.sync_buffer_bytes
                + self.cuda_context_bytes)


def trainer_memory(m: ModelConfig, w: Any, tr: Any, par: Any, S_max: int, S_mean: int = 0) -> tuple[int, int, int, int, int]:
    """(resident states, training's peak beyond them, a forward's working set, the reference's
    weights, the policy's weights alone) per trainer GPU, from `tcalc memory`'s timeline at the
    micro-batch's packed tokens: its b samples of P + μ (`w.batch_size`, S_mean) packed into one
    sequence, at least the longest sample P + L (NeMo-RL's train_mb_tokens and verl's
    ppo_max_token_len_per_gpu bound a packed micro-batch by tokens, not samples)."""
    from transformer_calc.estimators.training.timeline import peak_memory

    tokens = max(S_max, w.batch_size * S_mean)
    tl = peak_memory(m, w.model_copy(update={"seq_len": packed_len(tokens, par), "batch_size": 1}), tr, par)
    st = tl.stage
    megatron = tr.framework.value == "megatron"  # Megatron-core keeps its gradient buffer allocated
    resident = st.weights + st.optimizer + (st.gradients if megatron else 0)
    work = max(0, tl.peak_bytes - resident)
    forward = max(ph.transient + ph.gathered for ph in tl.phases)
    reference = st.params * 2 // (par.data if par.zero >= 3 else 1)  # bf16 weights, sharded as the policy's
    return resident, work, forward, reference, st.weights


def memory_phases(m: ModelConfig, w: Any, tr: Any, par: Any, alg: Algorithm, pools: Pools, cap: Any,
                  sync: WeightSync) -> list[MemoryPhase]:
    """The phases of a step on one GPU (each pool's under split pools)."""
    from transformer_calc.estimators.training.timeline import CUDA_CONTEXT_BYTES

    S_max = alg.prompt_len + alg.lengths.cap
    S_mean = alg.prompt_len + max(1, round(alg.lengths.mean))
    resident, work, forward, ref, weights = trainer_memory(m, w, tr, par, S_max, S_mean)
    ref = ref if alg.kl_reference else 0
    critic = resident if alg.critic else 0
    engine_w = cap.weights_bytes
    kv = max(cap.kv_budget_bytes, 0)
    reserve = cap.activation_peak_bytes + cap.engine_workspace_bytes
    ctx = CUDA_CONTEXT_BYTES

    def row(phase: str, pool: str, **kw: int) -> MemoryPhase:
        base = dict(trainer_bytes=0, trainer_work_bytes=0, reference_bytes=0, critic_bytes=0, engine_weights_bytes=0,
                    kv_cache_bytes=0, engine_reserve_bytes=0, sync_buffer_bytes=0, cuda_context_bytes=ctx)
        return MemoryPhase(phase, pool, **{**base, **kw})

    if pools.placement == "split":
        states = dict(trainer_bytes=resident, reference_bytes=ref, critic_bytes=critic)
        return [
            row("generation", "engine", engine_weights_bytes=engine_w, kv_cache_bytes=kv, engine_reserve_bytes=reserve),
            row("weight sync", "engine", engine_weights_bytes=engine_w, kv_cache_bytes=kv,
                engine_reserve_bytes=reserve, sync_buffer_bytes=sync.buffer_bytes),
            row("log-prob", "trainer", trainer_work_bytes=forward, **states),
            row("training", "trainer", trainer_work_bytes=work, **states),
            row("weight sync", "trainer", sync_buffer_bytes=sync.buffer_bytes, **states),
        ]
    idle = {} if pools.offload_idle else dict(trainer_bytes=resident, reference_bytes=ref, critic_bytes=critic)
    states = dict(trainer_bytes=resident, reference_bytes=ref, critic_bytes=critic)
    asleep = {} if pools.sleep else dict(engine_weights_bytes=engine_w, kv_cache_bytes=kv, engine_reserve_bytes=reserve)
    return [
        row("generation", "all", engine_weights_bytes=engine_w, kv_cache_bytes=kv, engine_reserve_bytes=reserve, **idle),
        row("log-prob", "all", trainer_work_bytes=forward, **states, **asleep),
        row("training", "all", trainer_work_bytes=work, **states, **asleep),
        # the engine's weights woken (its KV cache not yet: vLLM's sleep tags wake weights first); with
        # --offload-idle the optimizer states, gradient buffer, reference and critic have left, the
        # policy's weights stay until the sync has read them (NeMo-RL offloads before its refit)
        row("weight sync", "all", sync_buffer_bytes=sync.buffer_bytes,
            **(dict(trainer_bytes=weights) if pools.offload_idle else states),
            **(asleep or {"engine_weights_bytes": engine_w})),
    ]


# ============================================================================ the step
@dataclass(frozen=True)
class RlStep:
    rollout: Rollout
    updates: Updates
    sync: WeightSync
    phases: dict[str, float]  # phase -> seconds (each of the step's sequential work)
    step_time_s: float
    memory: list[MemoryPhase]
    capacity: Any  # the engine's serving.Capacity at the mean sample
    tokens_per_step: int  # samples · (P + μ)


def offload_s(gpu: Any, bytes_moved: int) -> float:
    """Host <-> GPU copies at the host link's one-way rate (devices.hardware.host_bandwidth)."""
    from transformer_calc.devices.hardware import host_bandwidth

    _, both = host_bandwidth(gpu)
    return 0.0 if not bytes_moved or not both else bytes_moved / (both / 2)


def off_policy_step_s(generation_s: float, drain_s: float, trainer_s: float, sync_s: float) -> float:
    """One step of a one-step off-policy pipeline in its steady state, as NeMo-RL v0.5 runs it
    (github NVIDIA-NeMo/RL at v0.5.0: nemo_rl/algorithms/grpo.py `async_grpo_train`,
    nemo_rl/algorithms/async_utils.py; docs/guides/async-grpo.md):

        step = max(generation, trainer, (drain + trainer) / 2) + sync

    - The trainer's loop is the step (grpo.py's `total_step_time` timer): wait for the step's batch in
      the replay buffer (`exposed_generation`), rewards, the policy's and the reference's log-probs,
      the update, then the refit (`weight_sync`). So step >= trainer + sync.
    - The engine generates continuously in a background collector, at most num_prompts_per_step ·
      max_trajectory_age_steps groups in flight (AsyncTrajectoryCollector's `_inflight_sema`): one
      step's samples. The refit stops new starts (`prepare_for_refit`) and the engine loads the
      weights between its steps (`update_weights_from_collective`, a vLLM collective_rpc); with
      in-flight weight updates the running samples are not waited for. So step >= generation +
      sync, `generation` the step's tokens at the engine's steady rate (the engine kept full).
    - The batch step k + 1 trains on is generated with the weights of refit k (`_calculate_target_weights`:
      weight version v generates for target v + 1), none of it before that refit, and the trainer
      needs all of it (ReplayBuffer.sample stalls until every group of its target is in). Its last
      sample ends at least `drain` after refit k (the batch alone, started at once, to its longest
      sample: the rollout without partial rollouts; a lower bound, as the previous batch's last
      samples still hold slots), plus refit k + 1, which it spans; refit k + 2 follows by the
      trainer's work: refit k + 2 − refit k = 2 · step >= drain + sync + trainer + sync.
    Without in-flight updates (`prepare_for_refit` waits for the running samples) `generation` is the
    drain itself and the third term is never the largest."""
    return max(generation_s, trainer_s, (drain_s + trainer_s) / 2) + sync_s


def rl_step(m: ModelConfig, gpu: Any, spec: Any, eff: Any, serving: Any, w: Any, tr: Any, par: Any,
            alg: Algorithm, pools: Pools, *, network: Any, matmul_efficiency: float | None = None,
            generation_efficiency: float = GENERATION_EFFICIENCY, trainer_efficiency: float = TRAINER_EFFICIENCY) -> RlStep:
    """One step: the generation, the passes, the updates, the sync, their memory (module docstring)."""
    from transformer_calc.estimators.inference.serving import capacity

    for name, value in (("generation_efficiency", generation_efficiency), ("trainer_efficiency", trainer_efficiency)):
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0 < value <= 1):
            raise ValueError(f"{name} ({value!r}) must be a fraction in (0, 1]")
    # the rollout returns every sampled token's log-prob: LOGPROB_SEQUENCE_S of host work per sequence and step
    eff = dataclasses.replace(eff, sequence_s=eff.sequence_s + LOGPROB_SEQUENCE_S)
    ro = rollout(m, gpu, spec, eff, serving, alg, pools.replicas, generation_efficiency)
    up = updates(m, w, tr, par, gpu, alg, network=network, matmul_efficiency=matmul_efficiency,
                 efficiency=trainer_efficiency)
    sync = weight_sync(m, pools, network, par)
    run = dataclasses.replace(spec, batch_size=1, prompt_len=alg.prompt_len, new_tokens=max(2, round(alg.lengths.mean)))
    cap = capacity(m, gpu, run, serving)
    mem = memory_phases(m, w, tr, par, alg, pools, cap, sync)
    phases = {
        "generation": ro.time_s,
        "policy_log_prob": up.forward_s,
        "reference_log_prob": up.forward_s if alg.kl_reference else 0.0,
        "critic_values": up.forward_s if alg.critic else 0.0,
        "policy_update": up.policy_update_s,
        "critic_update": up.policy_update_s if alg.critic else 0.0,
        "weight_sync": sync.time_s,
    }
    moved = 0
    if pools.placement == "colocated":  # sleep: the engine's weights to the host and back; offload: the states
        train = mem[2]
        moved += 2 * cap.weights_bytes if pools.sleep else 0
        moved += 2 * (train.trainer_bytes + train.reference_bytes + train.critic_bytes) if pools.offload_idle else 0
    phases["offload"] = offload_s(gpu, moved)
    total = sum(phases.values())
    if alg.off_policy_steps and pools.placement == "split":
        trainer = total - phases["generation"] - phases["weight_sync"] - phases["offload"]
        step = off_policy_step_s(phases["generation"], ro.drain_s, trainer, phases["weight_sync"]) + phases["offload"]
    else:
        step = total
    tokens = alg.samples * (alg.prompt_len + max(1, round(alg.lengths.mean)))
    return RlStep(ro, up, sync, phases, step, mem, cap, tokens)
