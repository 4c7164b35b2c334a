"""`tcalc serve`: layouts of N GPUs against latency targets under continuous batching.

The typed result (`ServeResult`) is the command's JSON (`model_dump(mode="json")`), the Python
API's return value and what render reads; docs/cli.md documents its keys. The engine settings and
the expected model's assumptions are shared with `tcalc inference` (results/inference.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transformer_calc.model.config import ModelConfig
from transformer_calc.results.calibrate import Calibration, profile_of as _profile
from transformer_calc.results.run_cost import ServeCost
from transformer_calc.results.base import Result, Section
from transformer_calc.requests.inference import inference_efficiency, inference_spec, serving_spec
from transformer_calc.results.common import (Assumptions, CheckpointSection, ModelSection, TowersSection, assumptions_section,
                                            model_section, network_for, towers_section)

if TYPE_CHECKING:
    from transformer_calc.requests.inference import ServeRequest


class EngineSettings(Section):
    """The serving engine's settings, by vLLM's names: its profile's defaults (engines.py) with the
    settings given in their place."""

    engine: str  # vllm | sglang | trtllm: whose profile
    block_size: int  # tokens per KV-cache block
    memory_utilization: float  # the engine's memory fraction, read as memory_fraction_of says
    memory_fraction_of: str  # total (vLLM) | static: weights + cache (SGLang) | free: after weights and buffers (TensorRT-LLM)
    max_num_batched_tokens: int  # tokens per engine step (the largest prefill chunk)
    max_num_seqs: int | None  # sequences per engine step (None: the KV pool bounds it, SGLang)
    chunked_prefill: bool  # prompts in chunks (else whole, in one step)
    given: list[str]  # the settings given explicitly (the rest are the profile's)
    # only when on: max_num_seqs and max_num_batched_tokens sized as trtllm-bench sizes them (in
    # `serve` per layout, whose T varies: the values above are the best layout's, else T = 1's)
    bench_batch_limits: bool | None = None


def engine_section(serving: Any) -> EngineSettings:
    """The engine settings of a serving.ServingSpec."""
    return EngineSettings(engine=serving.engine, block_size=serving.block_size,
                          memory_utilization=serving.memory_utilization, memory_fraction_of=serving.memory_fraction_of,
                          max_num_batched_tokens=serving.max_num_batched_tokens, max_num_seqs=serving.max_num_seqs,
                          chunked_prefill=serving.chunked_prefill, given=sorted(serving.given),
                          **({"bench_batch_limits": True} if serving.bench_batch_limits else {}))


class ExpectedAssumptions(Section):
    """The expected model's achievable rates and fixed costs (expected.Efficiency)."""

    matmul_efficiency: float  # achieved / dense peak FLOP/s
    matmul_efficiency_fp8: float  # the same, for fp8 matmuls
    memory_efficiency: float  # achieved / datasheet HBM bandwidth
    cuda_graphs: bool  # kernels launched from CUDA graphs (else eagerly)
    kernel_launch_s: float  # fixed cost per kernel
    sequence_overhead_s: float  # engine work per sequence per step
    request_overhead_s: float  # per request outside the GPU, in the TTFT
    node_size: int  # GPUs per NVLink domain
    intra_node_bytes_s: float  # per GPU, one direction, within a node
    inter_node_bytes_s: float  # per GPU, one direction, between nodes (the NIC)
    moe_a2a_overlap: bool | None = None  # wide EP: the all-to-alls under the other micro-batch's compute; only when on
    dispatch_dtype: str | None = None  # wide EP: the dispatch's hidden-state dtype; only when given


def expected_assumptions(eff: Any) -> ExpectedAssumptions:
    """The expected model's rates and fixed costs (inference's `expected.assumptions` adds the
    kernel count and the link latencies; serve's `expected_assumptions` is this)."""
    wide_ep: dict[str, Any] = {}  # wide EP's settings, only when set (no key otherwise)
    if eff.moe_a2a_overlap:
        wide_ep["moe_a2a_overlap"] = True
    if eff.dispatch_dtype is not None:
        wide_ep["dispatch_dtype"] = eff.dispatch_dtype
    return ExpectedAssumptions(
        matmul_efficiency=eff.matmul,
        matmul_efficiency_fp8=eff.matmul_fp8,
        memory_efficiency=eff.memory,
        cuda_graphs=eff.cuda_graphs,
        kernel_launch_s=eff.kernel_s,
        sequence_overhead_s=eff.sequence_s,
        request_overhead_s=eff.request_s,
        node_size=eff.network.node_size,
        intra_node_bytes_s=eff.network.intra_bytes_s,
        inter_node_bytes_s=eff.network.inter_bytes_s,
        **wide_ep,
    )


class Targets(Section):
    ttft_s: float | None  # time to first token (None: no target)
    tpot_s: float | None  # time per output token (None: no target)


class ServeSettings(Section):
    """What is served, on what, against which targets."""

    gpu: str
    gpus: int  # in all; replicas = gpus / (T·ep)
    prompt_len: int  # tokens per request
    output_len: int  # tokens per request
    expert: int  # ep, expert-parallel ranks (the glossary's name, as training's `parallelism.expert`)
    weight_dtype: str
    kv_dtype: str
    kv_dtype_source: str | None = None  # "given", else the engine's default and its source (engines.default_kv_dtype)
    targets: Targets
    redundant_experts: int | None = None  # MoE expert slots beyond n_experts; only when given
    request_rate: float | None  # requests/s for the whole deployment (None: the most the targets allow)
    engine: EngineSettings
    batching: str  # the serving model, in words


class LayoutRow(Section):
    """One layout and its verdict; the operating point's keys are None where none was evaluated
    (the layout does not fit), the capacity's where it has none (T does not divide the heads)."""

    tensor: int  # T
    replicas: int
    gpus: int
    feasible: bool  # meets the targets
    reason: str | None  # why it was rejected (None: feasible)
    concurrency: int | None  # sequences in flight per attention group (per replica without DP attention)
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None = None  # a request's end-to-end latency: ttft_s + (O − 1)·tpot_s
    tokens_per_s: float | None  # output tokens, all replicas: requests_per_s · O
    tokens_per_s_per_gpu: float | None
    tokens_per_s_per_replica: float | None
    requests_per_s: float | None  # all replicas: concurrency · groups · replicas / e2e_s (Little's law)
    prefill_tokens_per_step: float | None  # the other sequences' prompt tokens in a decode step, a steady-state mean
    max_concurrent_sequences: int | None  # whose KV cache fits, per replica
    kv_budget_bytes_per_gpu: int | None  # < 0: weights and reserves exceed the usable memory
    kv_blocks_per_gpu: int | None
    attention_groups: int = 1  # per replica: ep/T with DP attention (wide EP), else 1
    sequences_per_gpu: float | None = None  # the per-GPU batch: B · groups · replicas / GPUs
    prefill_share: float | None = None  # of the GPUs' time, the prompts': requests/s · the time one prompt adds to a decode step


class CurveSection(Section):
    """A latency-throughput curve: one layout at each concurrency given (--concurrency), no targets;
    a point the engine cannot keep in flight has its reason and no times."""

    tensor: int  # the layout's T: --T's, else the best layout's, else the first that fits
    replicas: int
    points: list[LayoutRow]  # one per concurrency, ascending (concurrency set on a rejected point too)


class DisaggregatedSection(Section):
    """Prefill and decode pools (--disaggregate xPyD; estimators/inference/disaggregated.py)."""

    prefill_instances: int  # x
    decode_instances: int  # y
    tensor: int  # T, GPUs per instance
    gpus: int  # (x + y)·T
    link: str  # nvlink (both pools in one NVLink domain) | network (the per-GPU NIC)
    link_bytes_s: float  # per GPU, one direction
    kv_bytes_per_request: int  # the prompt's cache, the whole model
    kv_transfer_s: float  # per request (delays the second token)
    prefill_batch: int  # prompts per prefill step
    prefill_step_s: float
    prefill_requests_per_s: float  # per prefill instance (its compute, or the link)
    decode_concurrency: int  # sequences in flight per decode instance
    tpot_s: float
    decode_requests_per_s: float  # per decode instance
    decode_tokens_per_s: float  # per decode instance
    max_concurrent_sequences: int  # per decode instance (its paged cache)
    requests_per_s: float  # the deployment: the slower pool's
    tokens_per_s: float  # output tokens/s, the deployment
    tokens_per_s_per_gpu: float
    ttft_s: float  # the prefill step (+ its queue at --request-rate)
    bottleneck: str  # prefill | decode
    balanced_decode_per_prefill: float  # decode instances per prefill instance at which both pools run at the same rate


class ServeResult(Result):
    model: ModelSection
    serve: ServeSettings
    best: LayoutRow | None  # the first feasible layout (None: no layout meets the targets)
    layouts: list[LayoutRow]  # best first; rejections with their reasons
    expected_assumptions: ExpectedAssumptions
    curve: CurveSection | None = None  # with --concurrency only
    disaggregated: DisaggregatedSection | None = None  # with --disaggregate only
    towers: TowersSection | None = None  # a multimodal model's towers (in the weights)
    checkpoint: CheckpointSection | None = None
    assumptions: Assumptions = Assumptions(defaults=[])  # the defaults assumed (requests/defaults.py), with their sources
    calibration: Calibration | None = None  # with --profile (issue 37)
    cost: ServeCost | None = None  # the best layout's $ per hour and per million tokens, energy (absent: no feasible layout)


BATCHING = ("continuous, a closed loop of B sequences in flight: a decode step carries the decoding "
            "sequences (mean context P + O/2) and the others' prompt tokens; a prompt queues for the prefill "
            "(max_num_batched_tokens less the decodes per step), then its prefill step(s) sample the first token; "
            "E2E = TTFT + (O − 1)·TPOT, requests/s = B / E2E (Little's law), tokens/s = requests/s · O")


def layout_section(x: Any) -> LayoutRow:
    """One layout (serving.Layout) as a row."""
    p, cap = x.point, x.capacity
    return LayoutRow(
        tensor=x.tensor_parallel,
        replicas=x.replicas,
        gpus=x.gpus,
        feasible=x.meets_targets,
        reason=x.reason,
        concurrency=p.concurrency if p else None,
        ttft_s=p.ttft_s if p else None,
        tpot_s=p.tpot_s if p else None,
        e2e_s=p.e2e_s if p else None,
        tokens_per_s=x.tokens_per_s if p else None,
        tokens_per_s_per_gpu=x.tokens_per_s / x.gpus if p else None,
        tokens_per_s_per_replica=x.attention_groups * p.output_tokens_per_s if p else None,
        requests_per_s=x.replicas * x.attention_groups * p.requests_per_s if p else None,
        attention_groups=x.attention_groups,
        sequences_per_gpu=p.concurrency * x.attention_groups * x.replicas / x.gpus if p else None,
        prefill_share=p.prefill_share if p else None,
        prefill_tokens_per_step=p.prefill_tokens_per_step if p else None,
        max_concurrent_sequences=cap.max_concurrent_sequences if cap else None,
        kv_budget_bytes_per_gpu=cap.kv_budget_bytes if cap else None,
        kv_blocks_per_gpu=cap.kv_blocks if cap else None,
    )


def serve_report(
    m: ModelConfig, gpu: Any, spec: Any, eff: Any, serving: Any, *, gpus: int, ttft_s: float | None,
    tpot_s: float | None, request_rate: float | None = None, tensor_parallel: int | None = None,
    concurrency: int | None = None, checkpoint: CheckpointSection | None = None,
    concurrencies: list[int] | None = None, pools: tuple[int, int] | None = None, kv_source: str | None = None,
    assumed: Any = (),
) -> ServeResult:
    """`tcalc serve`: layouts of `gpus` GPUs (T within a node, replicas, concurrency) under
    continuous batching, with TTFT, TPOT and throughput against the targets (serving.py)."""
    from transformer_calc.estimators.inference.serving import search

    layouts = search(m, gpu, spec, eff, serving, gpus=gpus, prompt_len=spec.prompt_len, output_len=spec.new_tokens,
                     ttft_s=ttft_s, tpot_s=tpot_s, request_rate=request_rate, tensor_parallel=tensor_parallel,
                     concurrency=concurrency)
    rows = [layout_section(x) for x in layouts]
    feasible = [r for r in rows if r.feasible]
    extra: dict[str, Any] = {"checkpoint": checkpoint} if checkpoint is not None else {}
    if concurrencies:
        extra["curve"] = curve_section(m, gpu, spec, eff, serving, layouts, gpus=gpus, concurrencies=concurrencies)
    if pools is not None:
        extra["disaggregated"] = disaggregated_section(m, gpu, spec, eff, serving, layouts, pools, tpot_s=tpot_s,
                                                       concurrency=concurrency, request_rate=request_rate,
                                                       tensor_parallel=tensor_parallel)
    if (towers := towers_section(m, "inference")) is not None:
        extra["towers"] = towers
    return ServeResult(
        assumptions=assumptions_section(assumed),
        model=model_section(m),
        serve=ServeSettings(
            gpu=gpu.name,
            gpus=gpus,
            prompt_len=spec.prompt_len,
            output_len=spec.new_tokens,
            expert=spec.expert_parallel,
            weight_dtype=spec.weight_dtype,
            kv_dtype=spec.kv_dtype,
            kv_dtype_source=kv_source,
            targets=Targets(ttft_s=ttft_s, tpot_s=tpot_s),
            **({"redundant_experts": spec.redundant_experts} if spec.redundant_experts else {}),
            request_rate=request_rate,
            engine=engine_section(shown_serving(m, gpu, spec, serving, layouts)),
            batching=BATCHING,
        ),
        best=feasible[0] if feasible else None,
        layouts=rows,
        expected_assumptions=expected_assumptions(eff),
        **extra,
    )


def shown_serving(m: ModelConfig, gpu: Any, spec: Any, serving: Any, layouts: list[Any]) -> Any:
    """The engine settings `serve` reports: with --bench-batch-limits, the limits trtllm-bench derives
    at the best layout's T (the first layout's when none is feasible); else the settings as given."""
    if not serving.bench_batch_limits:
        return serving
    import dataclasses

    from transformer_calc.estimators.inference.serving import with_bench_limits

    feasible = [x for x in layouts if x.meets_targets]
    T = (feasible or layouts)[0].tensor_parallel
    try:
        return with_bench_limits(serving, m, gpu, dataclasses.replace(spec, tensor_parallel=T), spec.prompt_len,
                                 spec.new_tokens)
    except ValueError:  # the weights leave no KV room at that T: the profile's limits are shown
        return serving


def curve_section(m: ModelConfig, gpu: Any, spec: Any, eff: Any, serving: Any, layouts: list[Any], *, gpus: int,
                  concurrencies: list[int]) -> CurveSection | None:
    """The curve on the best layout (the first of `layouts`, which is --T's when T is fixed), else
    on the first whose capacity fits; None when no layout fits at all."""
    import dataclasses

    from transformer_calc.estimators.inference.serving import curve

    fits = [x for x in layouts if x.meets_targets] or [x for x in layouts if x.capacity is not None
                                                         and x.capacity.kv_budget_bytes >= 0]
    if not fits:
        return None
    T = fits[0].tensor_parallel
    points = curve(m, gpu, dataclasses.replace(spec, tensor_parallel=T), eff, serving, gpus=gpus,
                   prompt_len=spec.prompt_len, output_len=spec.new_tokens, concurrencies=concurrencies)
    rows = [layout_section(x).model_copy(update={"concurrency": b}) for x, b in zip(points, concurrencies)]
    return CurveSection(tensor=T, replicas=fits[0].replicas, points=rows)


def disaggregated_section(m: ModelConfig, gpu: Any, spec: Any, eff: Any, serving: Any, layouts: list[Any],
                          pools: tuple[int, int], *, tpot_s: float | None, concurrency: int | None,
                          request_rate: float | None, tensor_parallel: int | None) -> DisaggregatedSection:
    """The pools at --T, else at the best layout's T, else at the first T whose cache fits."""
    import dataclasses

    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.inference.disaggregated import disaggregate

    T = tensor_parallel
    if T is None:
        fits = [x for x in layouts if x.meets_targets] or [x for x in layouts if x.capacity is not None
                                                             and x.capacity.max_concurrent_sequences >= 1]
        if not fits:
            raise TcalcError("--disaggregate: no T within a node holds one sequence on a decode instance; give "
                             "--T, a larger --gpus or a smaller --prompt-len/--output-len")
        T = fits[0].tensor_parallel
    try:
        d = disaggregate(m, gpu, dataclasses.replace(spec, tensor_parallel=T), eff, serving,
                         prefill_instances=pools[0], decode_instances=pools[1], prompt_len=spec.prompt_len,
                         output_len=spec.new_tokens, tpot_s=tpot_s, concurrency=concurrency, request_rate=request_rate)
    except ValueError as exc:
        raise TcalcError(f"--disaggregate {pools[0]}P{pools[1]}D at T = {T}: {exc}") from None
    return DisaggregatedSection(**{("tensor" if f.name == "tensor_parallel" else f.name): getattr(d, f.name)
                                   for f in dataclasses.fields(d)},
                                tokens_per_s_per_gpu=d.tokens_per_s / d.gpus)


def serve_request(
    m: ModelConfig, section: dict[str, Any], flags: dict[str, Any], checkpoint: Any = None, *,
    ttft_s: float | None = None, tpot_s: float | None = None, request_rate: float | None = None,
    gpus: int | None = None, checkpoint_section: CheckpointSection | None = None,
    concurrencies: list[int] | None = None, pools: tuple[int, int] | None = None, profile: Any = None,
) -> ServeResult:
    """`tcalc serve` from its options: each a flag (`flags`: the inference keys, the expected-latency
    and serving settings, node_size, inter_node_gb_s), else the job file's inference: section, else
    the default; the CLI and the Python API both call it."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.model.config import resolve
    from transformer_calc.requests.inference import kv_dtype_source
    from transformer_calc.sources.presets import gpu as find_gpu

    given = resolve(flags, section)
    if given.get("seq_len") is None or given.get("new_tokens") is None:
        raise TcalcError("give --prompt-len and --output-len (or seq_len and new_tokens in the job file's inference: section)")
    spec, gpu_name = inference_spec(m, section, flags, checkpoint)
    device = find_gpu(gpu_name)
    eff = inference_efficiency(device, section, flags, network_for(device, flags.get("node_size"), flags.get("inter_node_gb_s")))
    calibration = None
    if profile is not None:  # a calibrated profile's serving constants (tcalc calibrate)
        from transformer_calc.results.calibrate import calibrated_efficiency

        eff, calibration = calibrated_efficiency(eff, profile)
    serving = serving_spec(section, flags, device, spec.tensor_parallel)
    targets = serve_targets(section, ttft_s=ttft_s, tpot_s=tpot_s, request_rate=request_rate, gpus=gpus)
    if spec.expert_parallel > 1 and m.n_experts <= 1:  # it would split nothing
        raise TcalcError(f"--ep ({spec.expert_parallel}) splits a mixture-of-experts model's routed experts; "
                         f"{m.name or 'this model'} is dense: use --ep 1 or drop it")
    if targets["gpus"] % spec.expert_parallel:
        raise TcalcError(f"--gpus ({targets['gpus']}) must be a multiple of --ep ({spec.expert_parallel})")
    kv_source = kv_dtype_source(section, flags, spec.weight_dtype, True)
    result = serve_report(m, device, spec, eff, serving, gpus=targets["gpus"], ttft_s=targets["ttft_s"],
                          tpot_s=targets["tpot_s"], request_rate=targets["request_rate"],
                          tensor_parallel=given.get("tensor"), concurrency=given.get("batch_size"),
                          checkpoint=checkpoint_section, concurrencies=concurrencies, pools=pools,
                          kv_source=kv_source, assumed=serve_assumed(m, given, spec, kv_source))
    return result if calibration is None else result.model_copy(update={"calibration": calibration})


def serve_assumed(m: ModelConfig, given: dict[str, Any], spec: Any, kv_source: str) -> list[Any]:
    """`tcalc serve`'s assumed defaults: the engine (vLLM), the GPU, the KV cache's dtype."""
    from transformer_calc.estimators.inference.engines import DEFAULT_ENGINE
    from transformer_calc.requests.defaults import Assumption, inference_defaults

    engine = [] if given.get("engine") is not None else [
        Assumption("engine", DEFAULT_ENGINE, "vLLM, the most deployed open serving engine; its sourced defaults "
                                             "(engines.py)")]
    return engine + inference_defaults(m, given, (spec.kv_dtype or spec.activation_dtype, kv_source),
                                       prompt_default=False)


def serve_targets(section: dict[str, Any], **flags: Any) -> dict[str, Any]:
    """Targets, request rate and GPU count: a flag, else the job file's inference: section."""
    import math

    from transformer_calc.errors import TcalcError

    out: dict[str, Any] = {}
    for key, name in (("ttft_s", "--ttft"), ("tpot_s", "--tpot"), ("request_rate", "--request-rate"), ("gpus", "--gpus")):
        value = flags[key] if flags[key] is not None else section.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value <= 0):
            raise TcalcError(f"inference: {key} ({str(value)[:40]!r}) must be a positive number ({name})")
        out[key] = value
    gpus = out["gpus"] if out["gpus"] is not None else 8
    if not isinstance(gpus, int) or gpus > 1_000_000:
        raise TcalcError(f"inference: gpus ({gpus!r}) must be a whole number from 1 to 1,000,000")
    out["gpus"] = gpus
    return out


# ---------------------------------------------------------------------------- the command
def run_serve(req: ServeRequest) -> ServeResult:
    from transformer_calc.results.common import source_checkpoint

    from transformer_calc.results.run_cost import cost_options, price_section, serve_cost
    from transformer_calc.sources.presets import gpu as find_gpu

    src = req.source()
    costing = ("price_per_gpu_hour", "price_kind", "prices", "pue", "node_overhead", "grid_intensity_g_per_kwh")
    flags = {k: v for k, v in req.settings().items()
             if k not in ("ttft_s", "tpot_s", "request_rate", "gpus", "concurrency", "disaggregate", "profile", *costing)}
    result = serve_request(src.model, src.job.inference if src.job else {}, flags, src.checkpoint,
                           checkpoint_section=source_checkpoint(src), ttft_s=req.ttft_s, tpot_s=req.tpot_s,
                           request_rate=req.request_rate, gpus=req.gpus, concurrencies=req.concurrency,
                           pools=req.disaggregate, profile=_profile(req))
    device = find_gpu(result.serve.gpu)
    given = cost_options(req, src.job, costing)  # flags, else the job file's cost: section
    price = price_section(device, given["price_per_gpu_hour"], given["price_kind"], given["prices"])
    cost = serve_cost(device, result.best, result.serve.prompt_len, req.request_rate, price, pue=given["pue"],
                      node_overhead=given["node_overhead"], grid=given["grid_intensity_g_per_kwh"])
    return result if cost is None else result.model_copy(update={"cost": cost})
