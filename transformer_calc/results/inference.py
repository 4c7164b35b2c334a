"""`tcalc inference`: KV cache, memory per GPU, prefill and decode as a roofline and as expected time,
serving capacity, speculative decoding; and the resolution of inference settings.

The typed result (`InferenceResult`) is the command's JSON (`model_dump(mode="json")`), the Python
API's return value and what render reads; docs/cli.md documents its keys. The resolution helpers
(`inference_spec`, `inference_efficiency`, `serving_spec`, `draft_model`) turn a job file's
inference: section and flags into the estimators' inputs, for `tcalc serve` and `tcalc check` too.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError


from typing import TYPE_CHECKING, Any

from pydantic import model_validator

from transformer_calc.errors import ImpossibleResult
from transformer_calc.model.config import ATTENTION_KINDS, LayerAttention, ModelConfig
from transformer_calc.results.calibrate import Calibration
from transformer_calc.results.base import TOLERANCE, Result, Section
from transformer_calc.results.common import (Assumptions, CheckpointSection, ModelSection, TowersSection,
                                            assumptions_section, model_section, towers_section)
from transformer_calc.results.serve import EngineSettings, ExpectedAssumptions, engine_section, expected_assumptions

if TYPE_CHECKING:
    from transformer_calc.requests.inference import InferenceRequest


class InferenceSettings(Section):
    """What is run, resolved: the flags and the job file's inference: section with the defaults."""

    batch_size: int  # B, concurrent sequences
    prompt_len: int  # S, prompt tokens per sequence
    new_tokens: int  # generated per sequence; the first comes from the prefill
    tensor: int  # T
    expert: int  # ep, expert-parallel ranks (the glossary's name, as training's `parallelism.expert`)
    gpus: int  # GPUs the model is spread over
    weight_dtype: str  # a dtype, a quantized format, or "checkpoint" (the bytes it stores)
    kv_dtype: str
    compute_dtype: str  # whose peak the roofline uses
    activation_dtype: str  # all-reduces, workspace
    kv_cache: bool  # false: every token reprocesses the context (the seed's naive mode)
    cache_kv_heads: int  # K/V heads the cache holds
    mla_cache: str | None  # latent | decompressed (None: not an MLA model)
    gpu: str
    images: int | None = None  # images per sequence (their tokens are in prompt_len); only when given
    redundant_experts: int | None = None  # MoE expert slots beyond n_experts; only when given
    # where kv_dtype comes from: "given", else the engine's default and its source (engines.default_kv_dtype);
    # only when an engine is given (--engine), whose default it is
    kv_dtype_source: str | None = None


class KVCacheSection(Section):
    context_len: int  # tokens per sequence at the last decode step, S + new_tokens − 1
    layers_by_kind: dict[str, int]  # attention kind (full, sliding, chunked) -> layers of it
    sliding_window: int | None
    attention_chunk_size: int | None
    replicated_per_gpu: bool  # MLA's latent cache: whole on every GPU
    bytes_per_token: int  # one token of one sequence, every layer, the whole model
    total_bytes: int  # B sequences at context_len
    per_gpu_bytes: int


class DecodeStateSection(Section):
    """Hybrid models: the decode state of the mixer layers (Gated DeltaNet, ...), constant in the
    context, beside the KV cache of the attention layers."""

    layers_by_kind: dict[str, int]  # mixer kind (deltanet) -> layers of it
    conv_dtype: str  # the conv state's dtype (the activation dtype)
    state_dtype: str  # the recurrent state's dtype
    conv_bytes_per_sequence: int  # every mixer layer, the whole model
    recurrent_bytes_per_sequence: int
    bytes_per_sequence: int
    bytes_per_sequence_per_gpu: int
    total_bytes: int  # B sequences (0 without a cache)
    per_gpu_bytes: int


class DeepseekV4StateSection(Section):
    """DeepSeek-V4: its decode state, which is its KV cache (kv_cache holds the same bytes), by part at the
    peak context: a sliding window that grows to W − 1 tokens, compressed entries that grow by one per m
    (m') tokens, open-window buffers and the CSA overlap that stay below a constant (docs/formulas.md §5.16)."""

    layers_by_kind: dict[str, int]  # sliding (window only), csa, hca -> layers of it
    compress_rates: dict[str, int]  # csa: m, hca: m' (source tokens per compressed entry)
    dtype: str  # the KV-cache dtype (transformers: the model's dtype)
    context_len: int  # tokens per sequence, S + new_tokens − 1
    window_bytes_per_sequence: int  # the last min(c, W − 1) tokens' K = V head, every layer
    compressed_bytes_per_sequence: int  # floor(c / m) CSA entries (h_d + d_I), floor(c / m') HCA entries (h_d)
    buffer_bytes_per_sequence: int  # the open windows' tokens (c mod m), kv and gate
    overlap_bytes_per_sequence: int  # CSA: the last full window's Ca slice, once c >= m
    bytes_per_sequence: int
    bytes_per_sequence_per_gpu: int
    total_bytes: int  # B sequences
    per_gpu_bytes: int


class InferenceMemoryPerGpu(Section):
    weights_bytes: int
    kv_cache_bytes: int
    workspace_bytes: int  # the prefill's largest transient
    total_bytes: int
    state_bytes: int | None = None  # hybrid models: the mixer layers' decode state (in total_bytes)


class StaticBatchSection(Section):
    """The static batch's capacity (HF generate: every sequence's whole cache allocated at once,
    no engine reserves beyond the workspace), only with --static-batch; the capacity a serving
    engine has is `serving.max_concurrent_sequences` (the paged KV cache)."""

    model: str  # what this capacity is, in words
    max_batch_size: int  # largest B that fits at this context (0: not even one)
    max_prompt_len: int  # longest S that fits at this B (0: not even one token)


class InferenceMemorySection(Section):
    per_gpu: InferenceMemoryPerGpu
    capacity_bytes: int  # the GPU's memory
    headroom_bytes: int  # capacity − total (< 0: does not fit)
    fits: bool  # this B and S in one static batch (weights + cache + workspace <= capacity)
    min_tensor_parallel: int | None  # smallest T at which this B and S fit (None: none does)
    static_batch: StaticBatchSection | None = None  # with --static-batch only


class RooflineStep(Section):
    """One forward step per GPU, bounded by the roofline: max(compute, memory) + communication."""

    tokens: int  # processed per sequence (S prefill, 1 decode)
    context_len: int  # tokens the last of them attends over
    flops: int
    matmul_flops: int
    attention_flops: int
    bytes_moved: int
    weight_bytes: int  # weights read
    kv_read_bytes: int
    kv_write_bytes: int
    compute_s: float  # FLOPs / peak FLOP/s
    memory_s: float  # bytes / HBM bandwidth
    communication_s: float  # the all-reduces (and all-to-alls)
    time_s: float
    bound: str  # compute | memory
    intensity: float  # FLOPs per byte moved
    math_bandwidth: float  # λ_math = peak / bandwidth, FLOPs per byte


class DecodeSection(Section):
    steps: int  # new_tokens − 1: the first token comes from the prefill
    time_s: float  # every decode step
    time_per_output_token_s: float
    tokens_per_s: float  # the whole batch
    bound: str  # compute | memory when every step agrees, else mixed
    compute_bound_steps: int
    communication_s: float  # summed over the steps
    flops: int  # summed over the steps
    bytes_moved: int  # summed over the steps
    first_step: RooflineStep  # context S + 1
    last_step: RooflineStep  # context S + new_tokens − 1


class ExpectedStepSection(Section):
    """One step at achievable rates with its fixed costs: roofline + launch + communication + sampling."""

    compute_s: float  # FLOPs / (matmul efficiency · peak), summed over the kernel classes
    memory_s: float  # bytes / (memory efficiency · bandwidth), summed over the kernel classes
    roofline_s: float  # the larger of the two per kernel class (GEMMs, attention), summed
    launch_s: float  # kernels · kernel launch cost
    communication_s: float  # the all-reduces and the logit gather
    sampling_s: float
    time_s: float  # the sum


class InferenceAssumptions(ExpectedAssumptions):
    """serve's expected assumptions, and the kernel count and link latencies."""

    kernels_per_step: int  # launches of one forward pass
    intra_node_latency_s: float  # per collective
    inter_node_latency_s: float


class ExpectedSection(Section):
    """The expected latency: achievable rates with fixed costs (the roofline is the bound)."""

    time_to_first_token_s: float
    time_per_output_token_s: float
    decode_s: float  # every decode step
    total_s: float
    tokens_per_s: float  # B · new_tokens / total
    decode_tokens_per_s: float  # B / time per output token
    prefill: ExpectedStepSection
    decode_first_step: ExpectedStepSection
    decode_last_step: ExpectedStepSection
    assumptions: InferenceAssumptions


class ServingPerGpu(Section):
    usable_bytes: int  # memory_utilization · capacity
    weights_bytes: int
    cuda_context_bytes: int
    activation_peak_bytes: int
    engine_workspace_bytes: int
    kv_budget_bytes: int  # what is left for the cache (< 0: the model does not fit)
    block_bytes: int  # one KV block of every layer
    kv_blocks: int


class ServingPerReplica(Section):
    gpus: int
    kv_budget_bytes: int
    kv_blocks: int


class BudgetMatrix(Section):
    """The share of one GPU's KV budget that N sequences of context c take (<= 1: they fit)."""

    contexts: list[int]  # rows: tokens per sequence
    concurrency: list[int]  # columns: sequences
    kv_fraction: list[list[float | None]]  # [row][column] (None: no budget at all)
    max_concurrent_sequences: list[int]  # per row: the most sequences of that context


class ServingSection(Section):
    """The capacity: the paged KV cache of the serving engine (engines.py), by its accounting."""

    engine: EngineSettings
    per_gpu: ServingPerGpu
    per_replica: ServingPerReplica
    context_len: int  # prompt + output − 1 tokens, the sequence at its peak
    sequence_bytes_per_gpu: int  # its paged cache
    max_concurrent_sequences: int  # per replica: whose paged cache at context_len fits the KV budget
    max_sequences_per_step: int  # the engine's cap (max_num_seqs; SGLang: the pool's tokens / 2)
    longest_context_at_batch_size: int  # tokens per sequence at which B sequences fit
    budget_matrix: BudgetMatrix


class SpeculativeSection(Section):
    """Speculative decoding: a draft (or the MTP modules) proposes k tokens, the target verifies."""

    kind: str  # draft | mtp
    draft: str | None  # the draft model's name
    speculative_tokens: int  # k
    acceptance_rate: float  # α
    expected_tokens_per_step: float
    context_len: int  # the middle of the generation, S + new_tokens / 2
    draft_step_s: float  # one draft decode step
    verify_step_s: float  # the target's pass over k + 1 tokens
    step_s: float  # k · draft + verify
    time_per_output_token_s: float
    baseline_time_per_output_token_s: float  # the plain decode step
    speedup: float
    break_even_acceptance_rate: float | None  # below it speculation is slower (None: it never pays)
    draft_weights_bytes_per_gpu: int
    draft_kv_cache_bytes_per_gpu: int
    target_kv_cache_bytes_per_gpu: int


class InferenceResult(Result):
    model: ModelSection
    inference: InferenceSettings
    kv_cache: KVCacheSection
    decode_state: DecodeStateSection | None = None  # hybrid models only
    deepseek_v4_state: DeepseekV4StateSection | None = None  # DeepSeek-V4 only: its cache by part
    memory: InferenceMemorySection
    prefill: RooflineStep
    decode: DecodeSection
    time_to_first_token_s: float  # the roofline's: the prefill
    total_s: float
    tokens_per_s: float  # B · new_tokens / total
    compute_bound_batch: int | None  # the B at which decode turns compute-bound (None: never, KV reads dominate)
    compute_bound_batch_weights_only: float  # the seed's λ_math · p / 2
    expected: ExpectedSection
    serving: ServingSection | None = None  # with the KV cache on
    speculative: SpeculativeSection | None = None  # with a draft model or --mtp
    towers: TowersSection | None = None  # a multimodal model's towers (in the weights)
    checkpoint: CheckpointSection | None = None
    calibration: Calibration | None = None  # with --profile (issue 37)
    assumptions: Assumptions = Assumptions(defaults=[])  # the defaults assumed (requests/defaults.py), with their sources

    @model_validator(mode="after")
    def _expected_within_bound(self) -> InferenceResult:
        """The expected time (achievable rates plus fixed costs) never beats the roofline bound."""
        for name in ("time_to_first_token_s", "total_s"):
            bound, expected = getattr(self, name), getattr(self.expected, name)
            if expected < bound * (1 - TOLERANCE):
                raise ImpossibleResult(f"the expected {name} ({expected:.6g} s) is below its roofline bound "
                                       f"({bound:.6g} s)")
        return self


def expected_section(x: Any) -> ExpectedSection:
    """The `expected` section: achievable-rate latency with its fixed costs, and its assumptions."""
    eff = x.efficiency

    def step(s: Any) -> ExpectedStepSection:
        return ExpectedStepSection(compute_s=s.compute_s, memory_s=s.memory_s, roofline_s=s.roofline_s,
                                   launch_s=s.launch_s, communication_s=s.communication_s, sampling_s=s.sampling_s,
                                   time_s=s.time_s)

    return ExpectedSection(
        time_to_first_token_s=x.time_to_first_token_s,
        time_per_output_token_s=x.time_per_output_token_s,
        decode_s=x.decode_s,
        total_s=x.total_s,
        tokens_per_s=x.tokens_per_s,
        decode_tokens_per_s=x.decode_tokens_per_s,
        prefill=step(x.prefill),
        decode_first_step=step(x.decode_first),
        decode_last_step=step(x.decode_last),
        assumptions=InferenceAssumptions(
            **expected_assumptions(eff).model_dump(exclude_unset=True),
            kernels_per_step=x.kernels_per_step,
            intra_node_latency_s=eff.network.intra_latency_s,
            inter_node_latency_s=eff.network.inter_latency_s,
        ),
    )






def serving_section(m: ModelConfig, gpu: Any, spec: Any, serving: Any) -> ServingSection:
    """The `serving` section: the paged KV cache's capacity per GPU and per replica."""
    from transformer_calc.estimators.inference.serving import budget_matrix, capacity, longest_context, sequence_limit

    cap = capacity(m, gpu, spec, serving)
    per_replica = cap.gpus_per_replica
    matrix = budget_matrix(m, spec, serving, cap.kv_budget_bytes)
    return ServingSection(
        engine=engine_section(serving),
        per_gpu=ServingPerGpu(
            usable_bytes=cap.usable_bytes,
            weights_bytes=cap.weights_bytes,
            cuda_context_bytes=cap.cuda_context_bytes,
            activation_peak_bytes=cap.activation_peak_bytes,
            engine_workspace_bytes=cap.engine_workspace_bytes,
            kv_budget_bytes=cap.kv_budget_bytes,
            block_bytes=cap.block_bytes,
            kv_blocks=cap.kv_blocks,
        ),
        per_replica=ServingPerReplica(gpus=per_replica, kv_budget_bytes=max(cap.kv_budget_bytes, 0) * per_replica,
                                      kv_blocks=cap.kv_blocks * per_replica),
        context_len=cap.context_len,
        sequence_bytes_per_gpu=cap.sequence_bytes,
        max_concurrent_sequences=cap.max_concurrent_sequences,
        max_sequences_per_step=sequence_limit(serving, cap),
        longest_context_at_batch_size=longest_context(m, spec, serving, cap.kv_budget_bytes, spec.batch_size),
        budget_matrix=BudgetMatrix(contexts=matrix["contexts"], concurrency=matrix["concurrency"],
                                   kv_fraction=matrix["kv_fraction"],
                                   max_concurrent_sequences=matrix["max_concurrent_sequences"]),
    )




def speculative_section(m: ModelConfig, gpu: Any, spec: Any, eff: Any, options: dict[str, Any]) -> SpeculativeSection:
    """The `speculative` section: a draft (or the MTP modules) proposing k tokens at acceptance α."""
    from transformer_calc.estimators.inference.speculative import speculate

    try:
        x = speculate(m, gpu, spec, eff, draft=options.get("draft"), speculative_tokens=options["speculative_tokens"],
                      acceptance_rate=options["acceptance_rate"])
    except TcalcError:
        raise
    except ValueError as exc:
        raise TcalcError(f"speculative decoding: {exc}") from None
    return SpeculativeSection(
        kind=x.kind,
        draft=x.draft_name,
        speculative_tokens=x.speculative_tokens,
        acceptance_rate=x.acceptance_rate,
        expected_tokens_per_step=x.expected_tokens_per_step,
        context_len=x.context_len,
        draft_step_s=x.draft_step_s,
        verify_step_s=x.verify_step_s,
        step_s=x.step_s,
        time_per_output_token_s=x.time_per_output_token_s,
        baseline_time_per_output_token_s=x.baseline_time_per_output_token_s,
        speedup=x.speedup,
        break_even_acceptance_rate=x.break_even_acceptance_rate,
        draft_weights_bytes_per_gpu=x.draft_weights_bytes,
        draft_kv_cache_bytes_per_gpu=x.draft_kv_cache_bytes,
        target_kv_cache_bytes_per_gpu=x.target_kv_cache_bytes,
    )


STATIC_BATCH = ("static batch (HF generate): every sequence's cache for the whole context allocated at once, "
                "weights + cache + workspace within the GPU's memory, no engine reserve")


def inference_report(m: ModelConfig, gpu: Any, spec: Any, eff: Any = None, serving: Any = None,
                     speculative: dict[str, Any] | None = None,
                     checkpoint: CheckpointSection | None = None, static_batch: bool = False,
                     kv_source: str | None = None, assumed: Any = ()) -> InferenceResult:
    """`tcalc inference`: KV cache, memory per GPU, prefill and decode as a roofline (the bound),
    the expected latency at achievable rates with fixed costs (`expected`), and the paged KV
    cache's serving capacity (`serving`, with the cache on)."""
    from transformer_calc.estimators.inference.expected import default_efficiency, estimate_expected
    from transformer_calc.estimators.inference.roofline import estimate_inference

    e = estimate_inference(m, gpu, spec)
    x = estimate_expected(m, gpu, spec, eff or default_efficiency(gpu))
    extra = _optional_sections(m, gpu, spec, x, serving, speculative, checkpoint)
    return InferenceResult(
        assumptions=assumptions_section(assumed),
        model=model_section(m),
        inference=_settings_section(m, gpu, spec, e.kv_cache, kv_source),
        kv_cache=_kv_cache_section(m, spec, e.kv_cache),
        memory=_memory_section(m, gpu, spec, e.memory, static_batch),
        prefill=_roofline_step(e.prefill),
        decode=_decode_section(e.decode),
        time_to_first_token_s=e.time_to_first_token_s,
        total_s=e.total_s,
        tokens_per_s=e.tokens_per_s,
        compute_bound_batch=e.compute_bound_batch,
        compute_bound_batch_weights_only=e.compute_bound_batch_weights_only,
        expected=expected_section(x),
        **extra,
    )


def _roofline_step(s: Any) -> RooflineStep:
    """One prefill or decode step of the roofline (inference/step.py `Step`)."""
    r = s.roofline
    return RooflineStep(
        tokens=s.tokens,
        context_len=s.context_len,
        flops=s.flops,
        matmul_flops=s.matmul_flops,
        attention_flops=s.attention_flops,
        bytes_moved=s.bytes_moved,
        weight_bytes=s.weight_bytes,
        kv_read_bytes=s.kv_read_bytes,
        kv_write_bytes=s.kv_write_bytes,
        compute_s=r.compute_s,
        memory_s=r.memory_s,
        communication_s=s.comm.seconds,
        time_s=s.seconds,
        bound=s.bound,
        intensity=r.intensity,
        math_bandwidth=r.math_bandwidth,
    )


def _optional_sections(m: ModelConfig, gpu: Any, spec: Any, x: Any, serving: Any,
                       speculative: dict[str, Any] | None, checkpoint: CheckpointSection | None) -> dict[str, Any]:
    """The sections a model or a request has only sometimes: the mixers' decode state, DeepSeek-V4's
    compressed state, the paged cache's serving capacity, speculative decoding, towers, the checkpoint."""
    from transformer_calc.estimators.inference.engines import DEFAULT_ENGINE
    from transformer_calc.estimators.inference.roofline import decode_state
    from transformer_calc.estimators.inference.serving import engine_serving

    extra: dict[str, Any] = {}
    state = decode_state(m, spec)
    if state is not None:
        extra["decode_state"] = DecodeStateSection(**vars(state))
    if m.deepseek_v4 is not None:
        from transformer_calc.estimators.inference.deepseek_v4 import decode_state as v4_state

        extra["deepseek_v4_state"] = DeepseekV4StateSection(**vars(v4_state(m, spec)))
    if spec.kv_cache:
        extra["serving"] = serving_section(m, gpu, spec, serving or engine_serving(DEFAULT_ENGINE, gpu,
                                                                                      spec.tensor_parallel))
    if speculative:
        extra["speculative"] = speculative_section(m, gpu, spec, x.efficiency, speculative)
    if (towers := towers_section(m, "inference")) is not None:
        extra["towers"] = towers
    if checkpoint is not None:
        extra["checkpoint"] = checkpoint
    return extra


def _settings_section(m: ModelConfig, gpu: Any, spec: Any, kv: Any, kv_source: str | None) -> InferenceSettings:
    from transformer_calc.estimators.inference.roofline import expert_layout

    images = {"images": spec.images} if spec.images else {}
    images |= {"redundant_experts": spec.redundant_experts} if spec.redundant_experts else {}
    images |= {"kv_dtype_source": kv_source} if kv_source is not None else {}
    return InferenceSettings(
        batch_size=spec.batch_size,
        prompt_len=spec.prompt_len,
        new_tokens=spec.new_tokens,
        tensor=spec.tensor_parallel,
        expert=spec.expert_parallel,
        gpus=expert_layout(m, spec.tensor_parallel, spec.expert_parallel)[0],
        weight_dtype=spec.weight_dtype,
        kv_dtype=spec.kv_dtype,
        compute_dtype=spec.compute_dtype,
        activation_dtype=spec.activation_dtype,
        kv_cache=spec.kv_cache,
        cache_kv_heads=kv.n_kv_heads,
        mla_cache=spec.mla_cache if m.is_mla else None,
        gpu=gpu.name,
        **images,
    )


def _kv_cache_section(m: ModelConfig, spec: Any, kv: Any) -> KVCacheSection:
    return KVCacheSection(
        context_len=kv.context_len,
        # (Zamba2's shared-block applications cache K/V as full-attention layers)
        layers_by_kind={k.value: n for k in LayerAttention if k in ATTENTION_KINDS
                        and (n := m.n_kv_layers(k) + (m.n_shared_block_applications
                                                      if k is LayerAttention.full else 0))},
        sliding_window=m.sliding_window,
        attention_chunk_size=m.attention_chunk_size,
        replicated_per_gpu=m.is_mla and spec.mla_cache == "latent",
        bytes_per_token=kv.bytes_per_token,
        total_bytes=kv.total_bytes,
        per_gpu_bytes=kv.per_gpu_bytes,
    )


def _memory_section(m: ModelConfig, gpu: Any, spec: Any, mem: Any, static_batch: bool) -> InferenceMemorySection:
    from transformer_calc.estimators.inference.roofline import min_tensor_parallel

    return InferenceMemorySection(
        per_gpu=InferenceMemoryPerGpu(
            weights_bytes=mem.weights_bytes,
            kv_cache_bytes=mem.kv_cache_bytes,
            workspace_bytes=mem.workspace_bytes,
            total_bytes=mem.total_bytes,
            **({"state_bytes": mem.state_bytes} if m.is_hybrid else {}),
        ),
        capacity_bytes=mem.capacity_bytes,
        headroom_bytes=mem.capacity_bytes - mem.total_bytes,
        fits=mem.fits,
        min_tensor_parallel=min_tensor_parallel(m, gpu, spec),
        **({"static_batch": StaticBatchSection(
            model=STATIC_BATCH, max_batch_size=mem.max_batch_size, max_prompt_len=mem.max_prompt_len)}
           if static_batch else {}),
    )


def _decode_section(dec: Any) -> DecodeSection:
    return DecodeSection(
        steps=dec.steps,
        time_s=dec.seconds,
        time_per_output_token_s=dec.seconds_per_token,
        tokens_per_s=dec.tokens_per_s,
        bound=dec.bound,
        compute_bound_steps=dec.compute_bound_steps,
        communication_s=dec.comm_s,
        flops=dec.flops,
        bytes_moved=dec.bytes_moved,
        first_step=_roofline_step(dec.first),
        last_step=_roofline_step(dec.last),
    )


def inference_command(src: Any, flags: dict[str, Any], profile: Any = None) -> InferenceResult:
    """`tcalc inference` and `tc.inference` from a resolved model source (`sources.resolve.Source`)
    and the options given (job-file key names; None: not given): the inference keys, the
    expected-latency and serving settings, node_size and inter_node_gb_s, and speculative decoding
    (draft: a model as MODEL takes it, or a ModelConfig; mtp; speculative_tokens; acceptance_rate)."""
    from transformer_calc.model.config import ModelConfig
    from transformer_calc.requests.inference import draft_model, inference_efficiency, inference_spec, serving_spec
    from transformer_calc.results.common import network_for, source_checkpoint
    from transformer_calc.sources.presets import gpu as find_gpu

    m, job = src.model, src.job
    section = job.inference if job else {}
    spec, gpu_name = inference_spec(m, section, flags, src.checkpoint)
    images = flags.get("images") if flags.get("images") is not None else section.get("images")
    if images:  # images per sequence: their tokens join the prompt (roofline.with_images)
        from transformer_calc.estimators.inference.roofline import with_images

        try:
            spec = with_images(m, spec, images)
        except ValueError as exc:
            raise TcalcError(f"inference: {exc}") from None
    device = find_gpu(gpu_name)
    eff = inference_efficiency(device, section, flags, network_for(device, flags.get("node_size"), flags.get("inter_node_gb_s")))
    calibration = None
    if profile is not None:  # a calibrated profile's serving constants (tcalc calibrate)
        from transformer_calc.results.calibrate import calibrated_efficiency

        eff, calibration = calibrated_efficiency(eff, profile)
    serving = serving_spec(section, flags, device, spec.tensor_parallel)
    if serving.bench_batch_limits:  # trtllm-bench's limits for this model, GPU, T and request shape
        from transformer_calc.estimators.inference.serving import with_bench_limits

        try:
            serving = with_bench_limits(serving, m, device, spec, spec.prompt_len, spec.new_tokens)
        except ValueError as exc:
            raise TcalcError(f"--bench-batch-limits: {exc}") from None
    speculative = None
    draft, mtp = flags.get("draft"), flags.get("mtp")
    if draft is not None or mtp:
        if draft is not None and mtp:
            raise TcalcError("give one draft: --draft MODEL or --mtp (the model's own MTP modules), not both")
        speculative = {
            "draft": None if draft is None else draft if isinstance(draft, ModelConfig) else draft_model(str(draft)),
            "speculative_tokens": 4 if flags.get("speculative_tokens") is None else flags["speculative_tokens"],
            "acceptance_rate": 0.7 if flags.get("acceptance_rate") is None else flags["acceptance_rate"],
        }
    from transformer_calc.model.config import resolve
    from transformer_calc.requests.inference import kv_dtype_source

    from transformer_calc.requests.defaults import inference_defaults

    given = resolve(flags, section)
    kv_source = kv_dtype_source(section, flags, spec.weight_dtype, False)
    assumed = inference_defaults(m, given, (spec.kv_dtype, kv_source))
    result = inference_report(m, device, spec, eff, serving, speculative, checkpoint=source_checkpoint(src),
                              static_batch=bool(flags.get("static_batch")),
                              kv_source=kv_source if given.get("engine") is not None else None, assumed=assumed)
    return result if calibration is None else result.model_copy(update={"calibration": calibration})


# ---------------------------------------------------------------------------- the command
def run_inference(req: InferenceRequest) -> InferenceResult:
    from transformer_calc.results.calibrate import profile_of

    flags = {k: v for k, v in req.settings().items() if k != "profile"}
    return inference_command(req.source(), flags, profile_of(req))
