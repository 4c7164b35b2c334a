"""Inference settings (`tcalc inference`, `serve`, `check`): the InferenceSpec, the expected-latency
efficiencies and the serving engine's settings, each resolved from the flags, then the job file's
inference: section, then the defaults; the draft model of speculative decoding."""

from __future__ import annotations

from typing import Annotated, Any

from transformer_calc.errors import TcalcError
from transformer_calc.model.config import ModelConfig
from transformer_calc.requests import cost
from transformer_calc.requests.base import DTYPE_HELP, P_HELP, node_size, whole_or_zero, fraction, length, opt, positive, seconds, unit_interval, whole
from transformer_calc.requests.base import ProfileOpt
from transformer_calc.requests.model import ModelRequest

def check_engine_options(merged: dict[str, Any]) -> None:
    """Engine options that contradict each other (the flags over the inference: section), refused as the
    engines refuse them; read by the expected-latency settings and the serving spec alike."""
    if merged.get("block_size") is not None and merged.get("kv_cache") is False:
        raise TcalcError(f"--block-size ({merged['block_size']}) sizes the paged KV cache's blocks; --no-kv-cache keeps "
                         "no cache: drop one")
    seqs, tokens = merged.get("max_num_seqs"), merged.get("max_num_batched_tokens")
    if isinstance(seqs, int) and isinstance(tokens, int) and tokens < seqs:  # vLLM refuses it at start-up
        raise TcalcError(f"--max-num-batched-tokens ({tokens}) is below --max-num-seqs ({seqs}): each sequence in a "
                         "step needs at least one token of the budget (vLLM refuses it); raise the tokens or lower the seqs")


def inference_efficiency(gpu: Any, section: dict[str, Any], flags: dict[str, Any], network: Any = None) -> Any:
    """The expected-latency settings (expected.Efficiency) from the inference: section and flags."""
    from transformer_calc.model.config import resolve
    from transformer_calc.estimators.inference.expected import default_efficiency

    from transformer_calc.estimators.inference.engines import engine_defaults

    merged = resolve(flags, section)
    check_engine_options(merged)
    engine = engine_name(merged)
    try:
        profile = engine_defaults(engine, gpu.name, gpu.memory_bytes)
    except ValueError as exc:
        raise TcalcError(f"inference: {exc}") from None
    graphs = merged.get("cuda_graphs", profile.cuda_graphs)
    if not isinstance(graphs, bool):
        raise TcalcError(f"inference: cuda_graphs ({str(graphs)[:40]!r}) must be true or false")
    front = frontend_of(merged, engine)
    request_s = merged.get("request_overhead_s", profile.request_overhead_s + front.request_overhead_s)
    sequence_s = merged.get("sequence_overhead_s")
    if sequence_s is None and front.sequence_overhead_s:  # the frontend's streaming, beyond the engine's own
        from transformer_calc.estimators.inference.expected import SEQUENCE_S

        sequence_s = SEQUENCE_S + front.sequence_overhead_s
    overlap = merged.get("moe_a2a_overlap", profile.moe_a2a_overlap)
    if not isinstance(overlap, bool):
        raise TcalcError(f"inference: moe_a2a_overlap ({str(overlap)[:40]!r}) must be true or false")
    try:
        return default_efficiency(gpu, cuda_graphs=graphs, matmul=merged.get("matmul_efficiency"),
                                  memory=merged.get("memory_efficiency"), kernel_s=merged.get("kernel_launch_s"),
                                  network=network, sequence_s=sequence_s, request_s=request_s,
                                  moe_a2a_overlap=overlap, dispatch_dtype=merged.get("dispatch_dtype"),
                                  prefill_cuda_graphs=profile.prefill_cuda_graphs)
    except TcalcError:
        raise
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None

def frontend_of(merged: dict[str, Any], engine: str) -> Any:
    """The serving path's costs (`--frontend`, engines.frontend_costs) in front of `engine`."""
    from transformer_calc.estimators.inference.engines import DEFAULT_FRONTEND, FRONTENDS, frontend_costs

    frontend = merged.get("frontend", DEFAULT_FRONTEND)
    if frontend not in FRONTENDS:
        raise TcalcError(f"inference: frontend ({str(frontend)[:40]!r}) must be one of {', '.join(FRONTENDS)} "
                         "(--frontend)")
    try:
        return frontend_costs(str(frontend), engine)
    except ValueError as exc:
        raise TcalcError(f"inference: {exc}") from None


def engine_name(merged: dict[str, Any]) -> str:
    """The serving engine (`--engine`), else the default (engines.DEFAULT_ENGINE)."""
    from transformer_calc.estimators.inference.engines import DEFAULT_ENGINE, ENGINES

    engine = merged.get("engine", DEFAULT_ENGINE)
    if engine not in ENGINES:
        raise TcalcError(f"inference: engine ({str(engine)[:40]!r}) must be one of {', '.join(ENGINES)} (--engine)")
    return str(engine)


def kv_engine(merged: dict[str, Any]) -> str | None:
    """The engine whose KV-cache default applies: the one given (--engine or the job file), else None."""
    return engine_name(merged) if merged.get("engine") is not None else None


def kv_dtype_source(section: dict[str, Any], flags: dict[str, Any], weight_dtype: str, command_engine: bool) -> str:
    """Where the KV cache's dtype came from: "given", else the engine default's source
    (engines.default_kv_dtype); `command_engine`: the command always runs an engine (serve: vLLM
    unless --engine), so its default applies even when none is named."""
    from transformer_calc.model.config import resolve
    from transformer_calc.estimators.inference.engines import default_kv_dtype

    merged = resolve(flags, section)
    if merged.get("kv_dtype") is not None:
        return "given"
    engine = engine_name(merged) if command_engine else kv_engine(merged)
    return default_kv_dtype(engine, weight_dtype)[1]


def serving_spec(section: dict[str, Any], flags: dict[str, Any], gpu: Any, tensor_parallel: int = 1) -> Any:
    """The engine settings (serving.ServingSpec) from the inference: section and flags over the
    engine's profile on `gpu` at T ranks (engines.py; an explicit setting wins); sizes
    (cuda_context, activation_peak, engine_workspace) as bytes or '1GiB'."""
    from dataclasses import replace

    from transformer_calc.model.config import parse_bytes, resolve
    from transformer_calc.estimators.inference.serving import engine_serving

    merged = resolve(flags, section)
    check_engine_options(merged)
    engine = engine_name(merged)
    given: dict[str, Any] = {}
    sizes: dict[str, Any] = {}
    try:
        for key in ("block_size", "memory_utilization", "max_num_batched_tokens", "max_num_seqs", "chunked_prefill",
                    "bench_batch_limits"):
            if merged.get(key) is not None:
                given[key] = merged[key]
        for key in ("cuda_context", "activation_peak", "engine_workspace"):
            raw = merged.get(key)
            if raw is not None:
                sizes[f"{key}_bytes"] = 0 if raw in (0, "0") else parse_bytes(raw, key)
        return replace(engine_serving(engine, gpu, tensor_parallel, **given), **sizes)
    except TcalcError:
        raise
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None

def draft_model(text: str) -> ModelConfig:
    """A draft model for speculative decoding: a preset name, a tcalc YAML file or an HF config.json."""
    import importlib
    from pathlib import Path

    from transformer_calc.model.config import build_model

    presets = importlib.import_module("transformer_calc.sources.presets")  # the module; the package's name is the API's

    path = Path(text)
    if path.suffix == ".json":
        return build_model(presets.hf_spec(path), where=str(path))
    if path.suffix in (".yaml", ".yml"):
        return build_model(presets.load_job(path, flag="--draft").model, where=str(path))
    return presets.preset_model(text)

from transformer_calc.requests.defaults import DEFAULT_GPU as DEFAULT_INFERENCE_GPU  # the one default GPU

def inference_spec(model: ModelConfig, section: dict[str, Any], flags: dict[str, Any],
                   checkpoint: Any = None) -> tuple[Any, str]:
    """(InferenceSpec, gpu name) from a job file's inference: section (canonical keys) with the
    flags that are not None overriding it. Defaults: B = 1, S = max_seq_len, one new token, T = 1,
    bf16 weights, the A100 80GB. With a checkpoint (a folder's, repo's or GGUF file's headers) and
    no weight dtype given, the weights are the bytes it stores (weight_dtype "checkpoint")."""
    from transformer_calc.estimators.inference.roofline import InferenceSpec

    from transformer_calc.model.config import resolve
    from transformer_calc.devices.hardware import compute_dtype

    merged = resolve(flags, section)
    if merged.get("state_dtype") is not None and not model.is_hybrid:
        raise TcalcError(f"state_dtype ({merged['state_dtype']}) is the recurrent state's dtype of a hybrid model "
                         f"(Gated DeltaNet, Mamba); {model.name or 'this model'} has attention layers only: drop it")
    if merged.get("mla_cache") is not None and model.kv_lora_rank is None:
        raise TcalcError(f"mla_cache ({merged['mla_cache']}) chooses how an MLA model's cache is kept; "
                         f"{model.name or 'this model'} has no MLA (no kv_lora_rank): drop it")
    dtype = compute_dtype(merged.get("dtype"), merged.get("p"))  # the compute dtype (--dtype / --p)
    stored = None
    if checkpoint is not None:
        from transformer_calc.model.checkpoint import stored_weights

        stored = stored_weights(checkpoint)
    weight = merged.get("weight_dtype", "checkpoint" if stored is not None else model.weight_format or dtype or "bf16")
    kv_dtype = merged.get("kv_dtype")
    if kv_dtype is None:  # the engine's own default for this weight format (engines.default_kv_dtype)
        from transformer_calc.estimators.inference.engines import default_kv_dtype

        kv_dtype = default_kv_dtype(kv_engine(merged), weight)[0]
    try:
        spec = InferenceSpec(
            batch_size=merged.get("batch_size", 1),
            prompt_len=merged.get("seq_len", model.max_seq_len),
            new_tokens=merged.get("new_tokens", 1),
            tensor_parallel=merged.get("tensor", 1),
            expert_parallel=merged.get("expert", 1),
            redundant_experts=merged.get("redundant_experts", 0),
            weight_dtype=weight,
            stored=stored,
            compute_dtype=dtype,
            kv_dtype=kv_dtype,
            cache_kv_heads=merged.get("cache_kv_heads"),
            kv_cache=merged.get("kv_cache", True),
            mla_cache=merged.get("mla_cache", "latent"),
            state_dtype=merged.get("state_dtype"),
        )
    except TcalcError:
        raise
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None
    return spec, str(merged.get("gpu", DEFAULT_INFERENCE_GPU))


# ============================================================================ the options
INFERENCE = "Inference"
EXPECTED = "Expected latency (achievable rates, fixed costs)"
SPECULATIVE = "Speculative decoding"
SERVING = "Serving capacity (paged KV cache)"
SERVE = "Serve (targets and layouts)"

MatmulEff = Annotated[float | None, opt("--matmul-efficiency", help="Achievable fraction of the dense peak \\[default: measured MAMF per GPU, e.g. H100 0.801].", panel=EXPECTED, parse=fraction)]
MemoryEff = Annotated[float | None, opt("--memory-efficiency", help="Achievable fraction of the HBM bandwidth \\[default: 0.9].", panel=EXPECTED, parse=fraction)]
Graphs = Annotated[bool | None, opt("--cuda-graphs/--no-cuda-graphs", help="Kernels launched from CUDA graphs (vLLM, TensorRT-LLM decode) or eagerly \\[default: --cuda-graphs].", panel=EXPECTED)]
KernelLaunch = Annotated[float | None, opt("--kernel-launch-s", help="Fixed cost per kernel, seconds \\[default: 8.29e-6 with CUDA graphs (fitted), 16.29e-6 without].", panel=EXPECTED, parse=seconds)]
SeqOverhead = Annotated[float | None, opt("--sequence-overhead-s", help="Engine work per sequence per step, seconds \\[default: 0 (fitted), + 14.9e-6 with --frontend triton].", panel=EXPECTED, parse=seconds)]
NodeSize = Annotated[int | None, opt("--node-size", help="GPUs per NVLink domain \\[default: per platform, 8; 72 for GB200/GB300 NVL72].", panel=EXPECTED, parse=node_size, job=False)]
InterNode = Annotated[float | None, opt("--inter-node-gb-s", help="Per-GPU network bandwidth between nodes, GB/s one way \\[default: 25 A100 HDR, 50 H100/H200/B200 NDR].", panel=EXPECTED, parse=positive, job=False)]
BlockSize = Annotated[int | None, opt("--block-size", help="Tokens per KV-cache block \\[default: the engine's: vLLM 16, SGLang 1, TensorRT-LLM 32].", panel=SERVING, parse=whole)]
MemoryUtil = Annotated[float | None, opt("--memory-utilization", help="Memory fraction of the engine, as it reads it: vLLM 0.92 of all memory; SGLang (M − reserve) / M for weights and cache; TensorRT-LLM 0.9 of the memory left free \\[default: the engine's].", panel=SERVING, parse=fraction)]
BatchedTokens = Annotated[int | None, opt("--max-num-batched-tokens", help="Tokens per engine step (the largest prefill chunk) \\[default: the engine's: vLLM 8192 on a GPU >= 70 GiB other than an A100, else 2048; SGLang 2048-16384 by GPU memory (8192 on 80-141 GB); TensorRT-LLM 8192].", panel=SERVING, parse=whole)]
MaxSeqs = Annotated[int | None, opt("--max-num-seqs", help="Sequences per engine step \\[default: the engine's: vLLM 1024 on a GPU >= 70 GiB other than an A100, else 256; SGLang the KV pool's tokens / 2; TensorRT-LLM 2048].", panel=SERVING, parse=whole)]
Engine = Annotated[str | None, opt("--engine", help="Serving engine whose defaults fill the serving settings not given: vllm | sglang | trtllm \\[default: vllm].", panel=SERVING)]
Chunked = Annotated[bool | None, opt("--chunked-prefill/--no-chunked-prefill", help="Prompts split into chunks of what the step budget leaves, or prefilled whole in one step \\[default: the engine's: on for vLLM and SGLang, off for TensorRT-LLM].", panel=SERVING)]
FrontendOpt = Annotated[str | None, opt("--frontend", help="The serving path in front of the engine, priced per request (in the TTFT) and per sequence per step: none (token ids in, nothing streamed: the engines' benchmarks) | triton (Triton's TensorRT-LLM backend ensemble: tokenizer and detokenizer models, gRPC, one streamed response per sequence and step; 5.55 ms and 14.9 µs, fitted, docs/validation.md; needs --engine trtllm); --request-overhead-s and --sequence-overhead-s win \\[default: none].", panel=SERVING)]
RequestOverhead = Annotated[float | None, opt("--request-overhead-s", help="Fixed cost per request outside the GPU (tokenize, schedule, detokenize), added to the time to first token, seconds \\[default: the frontend's: 0 with none, 5.55e-3 with triton].", panel=EXPECTED, parse=seconds)]
A2AOverlap = Annotated[bool | None, opt("--moe-a2a-overlap/--no-moe-a2a-overlap", help="Wide EP (ep > T): each MoE all-to-all runs under the other micro-batch's compute, only its excess over the step's roofline exposed (SGLang --enable-two-batch-overlap, vLLM --enable-dbo) \\[default: off, every engine's default].", panel=EXPECTED)]
DispatchDtype = Annotated[str | None, opt("--dispatch-dtype", help="Wide EP (ep > T): the MoE dispatch's hidden-state dtype, bf16 | fp16 | fp8 (fp8 with one fp32 scale per 128 channels, DeepEP); the combine stays in the activation dtype \\[default: the activation dtype].", panel=EXPECTED)]
RedundantExperts = Annotated[int | None, opt("--redundant-experts", help="MoE: expert slots beyond n_experts, copies of the busiest experts (SGLang --ep-num-redundant-experts, DeepSeek EPLB); ep must divide n_experts + this \\[default: 0].", panel=INFERENCE, parse=whole_or_zero)]
BenchLimits = Annotated[bool | None, opt("--bench-batch-limits/--no-bench-batch-limits", help="TensorRT-LLM (--engine trtllm): size max_num_seqs and max_num_batched_tokens as trtllm-bench does for this model, GPU, T and dataset (every request --prompt-len in, --output-len out; its tuning heuristic, the engine behind TensorRT-LLM's published max-throughput tables); an explicit --max-num-seqs or --max-num-batched-tokens wins \\[default: off: the engine profile's trtllm-serve defaults, 2048 sequences and 8192 tokens].", panel=SERVING)]
CudaContext = Annotated[str | None, opt("--cuda-context", help="Reserve for the CUDA context, e.g. 512MiB \\[default: 512MiB].", panel=SERVING)]
ActivationPeak = Annotated[str | None, opt("--activation-peak", help="Reserve for activations, e.g. 2GiB \\[default: the largest prefill chunk's through one block + the sampler's logits].", panel=SERVING)]
Workspace = Annotated[str | None, opt("--engine-workspace", help="Reserve for CUDA graphs and all-reduce buffers \\[default: 512MiB].", panel=SERVING)]


class _Engine(ModelRequest):
    """The expected-latency and serving-capacity settings `inference` and `serve` share."""

    matmul_efficiency: MatmulEff = None
    memory_efficiency: MemoryEff = None
    cuda_graphs: Graphs = None
    kernel_launch_s: KernelLaunch = None
    sequence_overhead_s: SeqOverhead = None
    node_size: NodeSize = None
    inter_node_gb_s: InterNode = None
    block_size: BlockSize = None
    memory_utilization: MemoryUtil = None
    max_num_batched_tokens: BatchedTokens = None
    max_num_seqs: MaxSeqs = None
    cuda_context: CudaContext = None
    activation_peak: ActivationPeak = None
    engine_workspace: Workspace = None
    engine: Engine = None
    frontend: FrontendOpt = None
    chunked_prefill: Chunked = None
    bench_batch_limits: BenchLimits = None
    request_overhead_s: RequestOverhead = None
    moe_a2a_overlap: A2AOverlap = None
    dispatch_dtype: DispatchDtype = None
    redundant_experts: RedundantExperts = None
    profile: ProfileOpt = None


class InferenceRequest(_Engine):
    """`tcalc inference`: the inference: keys, the engine's settings, speculative decoding."""

    command = "inference"
    common = ('model', 'seq_len', 'batch_size', 'new_tokens', 'gpu', 'tensor', 'weight_dtype', 'kv_dtype', 'engine')  # the options shown first (help, MCP schema)
    section = "inference"
    batch_size: Annotated[int | None, opt("--B", "--batch-size", help="B: concurrent sequences \\[default: 1].", panel=INFERENCE, parse=whole)] = None
    seq_len: Annotated[int | None, opt("--S", "--prompt-len", "--seq-len", help="S: prompt tokens per sequence (8k = 8192) \\[default: the model's max_seq_len].", panel=INFERENCE, parse=length)] = None
    new_tokens: Annotated[int | None, opt("--new-tokens", "--output-len", help="Tokens generated per sequence; the first comes from the prefill \\[default: 1].", panel=INFERENCE, parse=whole)] = None
    tensor: Annotated[int | None, opt("--T", "--tensor-parallel", help="T: tensor-parallel GPUs \\[default: 1].", panel=INFERENCE, parse=whole)] = None
    gpu: Annotated[str | None, opt("--gpu", help="GPU, e.g. h100, a100-80gb, b200 \\[default: the job file's, else h100].", panel=INFERENCE)] = None
    dtype: Annotated[str | None, opt("--dtype", help=DTYPE_HELP + "; the weights' and the cache's unless given \\[default: bf16].", panel=INFERENCE)] = None
    p: Annotated[int | None, opt("--p", help=P_HELP + " \\[default: 2].", panel=INFERENCE, parse=whole)] = None
    weight_dtype: Annotated[str | None, opt("--weight-dtype", help="Stored weights: fp32 | fp16 | bf16 | fp8 | int8 | int4, or a format with its scales: gptq-int4 | awq-int4 | q8_0 | q4_k_m | q5_k_m | mxfp4 | nvfp4 \\[default: the model's weight_format (gpt-oss: mxfp4), else bf16].", panel=INFERENCE)] = None
    kv_dtype: Annotated[str | None, opt("--kv-dtype", help="KV-cache dtype \\[default: the activation dtype].", panel=INFERENCE)] = None
    cache_kv_heads: Annotated[int | None, opt("--cache-kv-heads", help="K/V heads the cache holds, weights unchanged (the seed's Falcon study: MHA) \\[default: the model's].", panel=INFERENCE, parse=whole)] = None
    kv_cache: Annotated[bool | None, opt("--kv-cache/--no-kv-cache", help="--no-kv-cache: the seed's naive mode, every token reprocesses the context \\[default: on].", panel=INFERENCE)] = None
    expert: Annotated[int | None, opt("--ep", "--expert-parallel", help="Expert-parallel GPUs: each holds n_experts / ep routed experts \\[default: 1].", panel=INFERENCE, parse=whole)] = None
    mla_cache: Annotated[str | None, opt("--mla-cache", help="MLA models: latent (r_kv + d_rope per token, replicated over T; transformers) | decompressed (per-head K and V) \\[default: latent].", panel=INFERENCE)] = None
    state_dtype: Annotated[str | None, opt("--state-dtype", help="Hybrid models (Gated DeltaNet, Mamba): the recurrent state's dtype, fp32 | bf16 | fp16 \\[default: fp32, as transformers keeps it].", panel=INFERENCE)] = None
    images: Annotated[int | None, opt("--images", help="Images per prompt (multimodal models): each adds the model's tokens per image to the prompt, and the vision tower's forward to the prefill \\[default: 0].", panel=INFERENCE, parse=whole_or_zero)] = None
    static_batch: Annotated[bool, opt("--static-batch", help="Also the static batch's capacity (HF generate: every sequence's whole cache allocated at once), labelled: the largest B at this context and the longest S at this B; the capacity shown otherwise is the serving engine's paged KV cache \\[default: off].", panel=SERVING, job=False)] = False
    draft: Annotated[Any, opt("--draft", help="Speculative decoding: the draft model (a preset, a tcalc YAML or an HF config.json) \\[default: none].", panel=SPECULATIVE, job=False)] = None
    mtp: Annotated[bool, opt("--mtp", help="Speculative decoding with the model's multi-token-prediction modules as the draft.", panel=SPECULATIVE, job=False)] = False
    speculative_tokens: Annotated[int | None, opt("--speculative-tokens", help="k: draft tokens per verification step, with --draft or --mtp \\[default: 4].", panel=SPECULATIVE, parse=whole, job=False)] = None
    acceptance_rate: Annotated[float | None, opt("--acceptance-rate", help="α: the chance the target accepts a draft token, with --draft or --mtp \\[default: 0.7].", panel=SPECULATIVE, parse=unit_interval, job=False)] = None

    def check(self, label: Any) -> None:
        if self.draft is None and not self.mtp:
            for name in ("speculative_tokens", "acceptance_rate"):
                if getattr(self, name) is not None:
                    raise TcalcError(f"{label(name).rstrip('= ')} sets speculative decoding, which needs a draft: "
                                     "give --draft MODEL or --mtp, or drop it")




MAX_CURVE_POINTS = 64  # concurrencies of one latency-throughput curve (bounded: each point is a model evaluation)


def concurrency_list(value: Any) -> list[int]:
    """Concurrencies of a latency-throughput curve: "1,8,64,256" (the CLI) or a list (the API), each
    a whole number >= 1, at most MAX_CURVE_POINTS of them, sorted and unique."""
    items = value.split(",") if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [value]
    if not items or len(items) > MAX_CURVE_POINTS:
        raise ValueError(f"takes 1 to {MAX_CURVE_POINTS} concurrencies, e.g. 1,8,64,256")
    return sorted({whole(item.strip() if isinstance(item, str) else item) for item in items})


def pools(value: Any) -> tuple[int, int]:
    """Disaggregated pools as "xPyD" (x prefill and y decode instances, e.g. 1P3D), each >= 1."""
    import re

    if not isinstance(value, str):
        raise ValueError("takes the pools as xPyD, e.g. 1P3D (one prefill and three decode instances)")
    match = re.fullmatch(r"\s*(\d{1,6})\s*[pP]\s*(\d{1,6})\s*[dD]\s*", value)
    if not match or int(match[1]) < 1 or int(match[2]) < 1:
        raise ValueError("takes the pools as xPyD with x, y >= 1, e.g. 1P3D (one prefill and three decode instances)")
    return int(match[1]), int(match[2])


class ServeRequest(_Engine):
    """`tcalc serve`: layouts of `gpus` GPUs against TTFT/TPOT targets."""

    command = "serve"
    common = ('model', 'gpu', 'gpus', 'seq_len', 'new_tokens', 'ttft_s', 'tpot_s', 'request_rate', 'weight_dtype', 'kv_dtype', 'engine')  # the options shown first (help, MCP schema)
    section = "inference"
    gpu: Annotated[str | None, opt("--gpu", help="GPU, e.g. h100, a100-80gb, b200 \\[default: the job file's, else h100].", panel=SERVE)] = None
    gpus: Annotated[int | None, opt("--gpus", help="GPUs in all; replicas = gpus / (T·ep) \\[default: 8].", panel=SERVE, parse=whole)] = None
    seq_len: Annotated[int | None, opt("--prompt-len", "--S", "--seq-len", help="Prompt tokens per request (8k = 8192) \\[default: none: required here or in the job file].", panel=SERVE, parse=length)] = None
    new_tokens: Annotated[int | None, opt("--output-len", "--new-tokens", help="Output tokens per request \\[default: none: required here or in the job file].", panel=SERVE, parse=whole)] = None
    ttft_s: Annotated[float | None, opt("--ttft", help="Target time to first token, seconds \\[default: none].", panel=SERVE, parse=positive)] = None
    tpot_s: Annotated[float | None, opt("--tpot", help="Target time per output token, seconds \\[default: none].", panel=SERVE, parse=positive)] = None
    request_rate: Annotated[float | None, opt("--request-rate", help="Requests per second for the whole deployment: concurrency is what serves it \\[default: none: the most the targets allow].", panel=SERVE, parse=positive)] = None
    tensor: Annotated[int | None, opt("--T", "--tensor-parallel", help="Fix T (else every T within a node that divides --gpus) \\[default: search].", panel=SERVE, parse=whole)] = None
    expert: Annotated[int | None, opt("--ep", "--expert-parallel", help="Expert-parallel GPUs per replica \\[default: 1].", panel=SERVE, parse=whole)] = None
    batch_size: Annotated[int | None, opt("--B", "--batch-size", help="Fix the concurrency per replica (sequences in flight) \\[default: search].", panel=SERVE, parse=whole)] = None
    disaggregate: Annotated[Any, opt("--disaggregate", help="Disaggregated prefill and decode: xPyD pools (x prefill, y decode instances of T GPUs each, e.g. 1P3D), the KV cache sent between them over NVLink within a node (an NVL72 rack) or the network; each pool's rate and the ratio that balances them \\[default: none].", panel=SERVE, parse=pools, job=False)] = None
    concurrency: Annotated[Any, opt("--concurrency", help="A latency-throughput curve: TTFT, TPOT and tokens/s at each of these concurrencies per replica (sequences in flight), e.g. 1,8,64,256, on the best layout (or --T's) \\[default: none].", panel=SERVE, parse=concurrency_list, job=False)] = None
    dtype: Annotated[str | None, opt("--dtype", help=DTYPE_HELP + "; the weights' and the cache's unless given \\[default: bf16].", panel=SERVE)] = None
    p: Annotated[int | None, opt("--p", help=P_HELP + " \\[default: 2].", panel=SERVE, parse=whole)] = None
    weight_dtype: Annotated[str | None, opt("--weight-dtype", help="As in `tcalc inference` \\[default: the model's weight_format, else the compute dtype].", panel=SERVE)] = None
    kv_dtype: Annotated[str | None, opt("--kv-dtype", help="KV-cache dtype \\[default: the activation dtype].", panel=SERVE)] = None
    price_per_gpu_hour: cost.Price = None
    price_kind: cost.PriceKind = None
    prices: cost.Prices = None
    pue: cost.Pue = None
    node_overhead: cost.NodeOverhead = None
    grid_intensity_g_per_kwh: cost.GridIntensity = None

