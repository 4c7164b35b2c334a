"""Serving engines as profiles of their sourced defaults: vLLM, SGLang, TensorRT-LLM.

`tcalc inference`, `serve` and `sweep` take `--engine vllm|sglang|trtllm` (default `vllm`): the
engine's own defaults for the settings its capacity and its step depend on, each read from the
engine's source or documentation (the URL beside it in `SOURCES`). An explicit flag wins over the
profile (`--max-num-seqs 512 --engine trtllm` is TensorRT-LLM with 512 sequences per step).

| setting | vLLM | SGLang | TensorRT-LLM |
| --- | --- | --- | --- |
| sequences per step | 1024 on a GPU >= 70 GiB other than an A100, else 256 (`max_num_seqs`) | the KV pool's tokens // 2 (`max_running_requests`) | 2048 (`max_batch_size`) |
| tokens per step | 8192 on a GPU >= 70 GiB other than an A100, else 2048 (`max_num_batched_tokens`) | by GPU memory: 2048 / 4096 / 8192 / 16384 (`chunked_prefill_size`) | 8192 (`max_num_tokens`) |
| chunked prefill | on (V1 always chunks) | on (a chunk size is set) | off (`enable_chunked_prefill`) |
| KV block | 16 tokens (`block_size`) | 1 token (`page_size`) | 32 tokens (`tokens_per_block`) |
| memory fraction | 0.92 of all memory, weights + cache + activation peak + graphs (`gpu_memory_utilization`) | (M − reserved) / M of all memory, weights + cache only; activations and graphs live in the reserve (`mem_fraction_static`) | 0.9 of the memory left free after weights and runtime buffers (`free_gpu_memory_fraction`) |
| CUDA graphs | on (`enforce_eager` off) | on (`disable_cuda_graph` off) | on for decode-only batches (the PyTorch backend's `cuda_graph_config`): a step with prompt tokens launches eagerly |
| frontend (`--frontend`) | none | none | none, or triton (Triton's TensorRT-LLM backend; fitted) |

`memory_fraction_of` names the three accountings: "total" (vLLM: the fraction bounds everything
the engine allocates, so the reserves come out of it), "static" (SGLang: the fraction holds the
weights and the KV pool; the CUDA context, activations and graphs sit in what is left), "free"
(TensorRT-LLM: the fraction of what is free once weights and buffers are allocated).

Request overhead (tokenize the prompt, schedule, detokenize the first token) is added to the time
to first token as `request_overhead_s`, and a streamed response's work per sequence per step to the
engine's (`sequence_overhead_s`). Both are properties of the serving path in front of the engine, the
frontend (`--frontend`, FRONTENDS below), not of the engine: `none` (0 and 0) is what the engines'
own benchmarks run (trtllm-bench, gptSessionBenchmark and vLLM's latency CI feed token ids and stream
nothing) and what NIM's AIPerf runs at one request in flight leave room for (its TTFT is the
prefill's, within a few percent); `triton` is Triton's TensorRT-LLM backend ensemble, its two costs
FITTED on one named set of published rows (TRITON_REQUEST_S). Give your own API server's measured
cost with --request-overhead-s (and --sequence-overhead-s); either wins over the frontend's.

CUDA graphs (`prefill_cuda_graphs`): TensorRT-LLM captures decode-only batches ("CUDA graphs ... are
enabled for batches that consist of decoding requests only", TorchLlmArgs.cuda_graph_config,
TRTLLM_TORCH; its TensorRT engines' CUDA-graph mode likewise covers the generation phase), so a step
holding prompt tokens launches every kernel from the CPU (expected.prompt_efficiency). vLLM V1
replays piecewise graphs around attention for mixed batches (up to its largest capture size; a
larger step runs eagerly, not modelled) and SGLang graphs its prefill piecewise in current releases
(`--disable-piecewise-cuda-graph` turns it off): both keep the graphed cost.

trtllm-bench (TensorRT-LLM's benchmark, the tool behind its published throughput tables) does not
run the llm_args defaults above: given no --max_batch_size / --max_num_tokens it derives both from
the model and the dataset (`trtllm_bench_limits`, TRTLLM_BENCH_TUNING), so the engine it builds
reserves activations and sampler buffers for the batch the dataset can fill, not for 2048
sequences and 8192 tokens. `tcalc serve --engine trtllm` keeps the llm_args defaults (a served
engine, the documented default); `--bench-batch-limits` (`bench_batch_limits`, TensorRT-LLM only)
sizes max_num_seqs and max_num_batched_tokens as trtllm-bench does for the model, GPU, T and request
shape given (serving.with_bench_limits; an explicit flag still wins), which reproduces a published
max-throughput row from the CLI; tools/validation/serving.py takes the same limits for those rows.

Wide expert parallelism's two-batch overlap (`moe_a2a_overlap`: the batch split in two micro-batches,
one's MoE all-to-alls under the other's compute) is off in every profile, as in the engines: SGLang
`--enable-two-batch-overlap` (server_args.py, default False), vLLM `--enable-dbo` (dual batch
overlap, docs.vllm.ai/en/stable/design/dbo/, default False); TensorRT-LLM's wide-EP overlap is configured per deployment. SGLang's
DeepSeek deployments turn it on (`--moe-a2a-overlap`).

Not modelled: SGLang runs prefill and decode batches apart unless `--enable-mixed-chunk` (tcalc's
steady-state step mixes them, the same mean work per step); TensorRT-LLM's capacity scheduler
reserves a request's whole output up front (GUARANTEED_NO_EVICT), which tcalc's peak-context
capacity already assumes for every engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ENGINES = ("vllm", "sglang", "trtllm")
FRONTENDS = ("none", "triton")
DEFAULT_FRONTEND = "none"
DEFAULT_ENGINE = "vllm"
MEMORY_FRACTION_OF = ("total", "static", "free")
GIB = 2**30
MIB = 2**20

VLLM_ARGS = "https://github.com/vllm-project/vllm/blob/main/vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults)"
VLLM_CACHE = "https://docs.vllm.ai/en/stable/api/vllm/config/cache/ (CacheConfig)"
SGLANG_ARGS = "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/server_args.py (_handle_gpu_memory_settings)"
SGLANG_SCHEDULER = "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/managers/scheduler.py (max_running_requests)"
SGLANG_TUNING = "https://docs.sglang.io/advanced_features/hyperparameter_tuning.html (mem_fraction_static)"
TRTLLM_ARGS = "https://github.com/NVIDIA/TensorRT-LLM/blob/main/tensorrt_llm/llmapi/llm_args.py (BaseLlmArgs)"
TRTLLM_TORCH = "https://nvidia.github.io/TensorRT-LLM/llm-api/reference/TorchLlmArgs.html"
TRTLLM_KV = "https://nvidia.github.io/TensorRT-LLM/llm-api/reference/KvCacheConfig.html"

# Where each default comes from, per engine and setting.
SOURCES: dict[str, dict[str, str]] = {
    "vllm": {
        "max_num_seqs": VLLM_ARGS, "max_num_batched_tokens": VLLM_ARGS, "chunked_prefill": VLLM_ARGS,
        "block_size": VLLM_CACHE, "memory_utilization": VLLM_CACHE, "cuda_graphs": VLLM_ARGS,
    },
    "sglang": {
        "max_num_seqs": SGLANG_SCHEDULER, "max_num_batched_tokens": SGLANG_ARGS, "chunked_prefill": SGLANG_ARGS,
        "block_size": SGLANG_ARGS, "memory_utilization": SGLANG_ARGS + "; " + SGLANG_TUNING, "cuda_graphs": SGLANG_ARGS,
    },
    "trtllm": {
        "max_num_seqs": TRTLLM_ARGS, "max_num_batched_tokens": TRTLLM_ARGS, "chunked_prefill": TRTLLM_TORCH,
        "block_size": TRTLLM_KV, "memory_utilization": TRTLLM_KV, "cuda_graphs": TRTLLM_TORCH,
    },
}

# vLLM: GPUs with at least 70 GiB that are not an A100 get the larger batch defaults (the OpenAI
# server's; an A100 is excluded by name, vLLM PR #17885: the larger budget lowered its throughput).
VLLM_LARGE_GPU_BYTES = 70 * GIB
VLLM_LARGE = (1024, 8192)  # (max_num_seqs, max_num_batched_tokens), OPENAI_API_SERVER
VLLM_SMALL = (256, 2048)
VLLM_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE
VLLM_MEMORY_UTILIZATION = 0.92  # CacheConfig.gpu_memory_utilization

# SGLang, by the GPU's memory in MiB (server_args: `gpu_mem < 90 * 1024` and so on): the chunked
# prefill size, and the memory reserved outside mem_fraction_static as (GiB, GiB per TP·PP rank):
# reserved = a + b · T; mem_fraction_static = (M − reserved) / M.
SGLANG_TIERS: tuple[tuple[int | None, int, tuple[float, float]], ...] = (
    (20 * 1024, 2048, (2.8, 0.1)),  # T4, 4080
    (35 * 1024, 2048, (2.8, 0.1)),  # A10, L40, 4090, 5090
    (60 * 1024, 4096, (9.5, 0.5)),  # A100 40GB, L40 (chunk 4k; reserve of the < 90 GiB tier)
    (90 * 1024, 8192, (9.5, 0.5)),  # H100, A100 80GB
    (100 * 1024, 8192, (12.0, 0.5)),  # H20
    (160 * 1024, 8192, (12.0, 0.5)),  # H200
    (None, 16384, (32.0, 0.0)),  # B200, MI300: 32 GiB whatever T
)
SGLANG_PAGE_SIZE = 1
SGLANG_SEQS_PER_POOL_TOKEN = 2  # max_running_requests = max_total_num_tokens // 2

TRTLLM_MAX_BATCH_SIZE = 2048
TRTLLM_MAX_NUM_TOKENS = 8192
TRTLLM_TOKENS_PER_BLOCK = 32
TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9

# trtllm-bench's tuning heuristic (calc_engine_setting + finetune_setting), used by `trtllm-bench
# build` (TensorRT engines, v0.17) and by `trtllm-bench throughput` on the PyTorch backend when no
# batch limits are given (v1.0: "Max batch size and max num tokens not provided. Using heuristics").
TRTLLM_BENCH_TUNING = ("https://github.com/NVIDIA/TensorRT-LLM/blob/main/tensorrt_llm/bench/build/tuning.py "
                       "(calc_engine_setting, finetune_setting); tensorrt_llm/bench/benchmark/utils/general.py "
                       "(get_settings: without chunked prefill max_num_tokens >= max ISL + max_batch_size)")
TRTLLM_BENCH_KV_FRACTION = 0.95  # calc_engine_setting's kv_cache_gpu_mem_fraction default
TRTLLM_BENCH_BATCH_CAP = 4096  # "Cap total batch size to avoid decoder buffer size becoming too large"
TRTLLM_BENCH_TOKEN_CAP = 32768  # "Cap num tokens to avoid TRT activation buffer becoming too large"
# tuning.py's BYTES_PER_ELEM by quantization (anything else: 2 bytes)
TRTLLM_BENCH_BYTES_PER_ELEMENT = {"fp8": 1.0, "nvfp4": 0.5}


def trtllm_bench_limits(params: int, weight_dtype: str, kv_bytes_per_token: float, gpu_memory_bytes: int,
                        gpus: int, prompt_len: int, output_len: int, chunked_prefill: bool = False,
                        pipeline_parallel: int = 1) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) as trtllm-bench derives them (TRTLLM_BENCH_TUNING), all in
    GiB as the heuristic computes them:

        engine    = params · bytes per element (fp8 1, nvfp4 0.5, else 2)
        available = gpus · M − engine;  requests = 0.95 · available / (kv per token · (ISL + OSL))
        raw_bs    = min(requests, 4096) / pp;  raw_tokens = min(raw_bs · (1 + ISL / OSL), 32768)
        max_bs    = max(64, 32·⌈raw_bs/32⌉) below 256, 128·⌈raw_bs/128⌉ below 1024, else 256·⌈raw_bs/256⌉
        max_tokens = max(2048, 256·⌈raw/256⌉) below 4096, 512·⌈raw/512⌉ below 8192, else 1024·⌈raw/1024⌉

    and, without chunked prefill, max_tokens >= ISL + max_bs (general.get_settings). `kv_bytes_per_token`
    is the heuristic's 2 · attention layers · max(T, n_kv) · h_d · (1 byte fp8 cache, else 2), the
    whole TP group's. M is the GPU's memory as tcalc's hardware table holds it; trtllm-bench reads
    NVML's total (81,559 MiB on an H100 80GB, 7 % above the table's 80 GB), so on a GPU whose weights
    nearly fill it the batch here can come out one rounding step lower. The heuristic needs the
    weights to fit (else trtllm-bench stops: ValueError)."""
    for name, value in (("params", params), ("gpu_memory_bytes", gpu_memory_bytes), ("gpus", gpus),
                        ("prompt_len", prompt_len), ("output_len", output_len), ("pipeline_parallel", pipeline_parallel)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} ({value!r}) must be a whole number >= 1")
    if not kv_bytes_per_token > 0:
        raise ValueError(f"kv_bytes_per_token ({kv_bytes_per_token!r}) must be > 0")
    engine = params * TRTLLM_BENCH_BYTES_PER_ELEMENT.get(weight_dtype, 2.0) / GIB
    available = gpus * gpu_memory_bytes / GIB - engine
    requests = TRTLLM_BENCH_KV_FRACTION * available / (kv_bytes_per_token / GIB * (prompt_len + output_len))
    if requests < 1:
        raise ValueError(f"trtllm-bench: the weights ({engine:.3g} GiB) leave no room for one request's KV cache "
                         f"on {gpus} GPU(s) of {gpu_memory_bytes / GIB:.3g} GiB; use more GPUs")
    raw_bs = min(requests, TRTLLM_BENCH_BATCH_CAP) / pipeline_parallel
    raw_tokens = min(raw_bs * (1 + prompt_len / output_len), TRTLLM_BENCH_TOKEN_CAP)
    if raw_bs < 256:
        max_bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        max_bs = 128 * math.ceil(raw_bs / 128)
    else:
        max_bs = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        max_tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        max_tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        max_tokens = 1024 * math.ceil(raw_tokens / 1024)
    if not chunked_prefill:
        max_tokens = max(max_tokens, prompt_len + max_bs)
    return max_bs, max_tokens


# The KV cache's dtype when none is given: what each engine does with a checkpoint of this weight format.
# vLLM: CacheConfig.cache_dtype "auto" = the model's dtype (docs.vllm.ai/en/stable/api/vllm/config/cache/;
# an fp8 cache only with --kv-cache-dtype fp8, docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/).
# SGLang: --kv-cache-dtype "auto" = the model's data type (server_args.py). TensorRT-LLM: KvCacheConfig.dtype
# "auto" takes the checkpoint's kv_cache_quant_algo, and ModelOpt's FP8 and NVFP4 checkpoints (the ones
# trtllm-bench and the published tables run, e.g. nvidia/Llama-3.1-8B-Instruct-FP8) set it to FP8 in
# hf_quant_config.json: the cache is fp8 (nvidia.github.io/TensorRT-LLM/features/quantization.html,
# "FP8 KV Cache"; TensorRT-LLM@258c7540 docs/source/performance/perf-overview.md: "the KV cache will
# automatically be set to FP8").
KV_DTYPE_SOURCES = {
    "vllm": "vLLM kv_cache_dtype 'auto': the model's dtype (docs.vllm.ai/en/stable/api/vllm/config/cache/)",
    "sglang": "SGLang kv_cache_dtype 'auto': the model's dtype (sglang python/sglang/srt/server_args.py)",
    "trtllm": ("TensorRT-LLM KvCacheConfig dtype 'auto': the checkpoint's kv_cache_quant_algo, FP8 in ModelOpt "
               "FP8/NVFP4 checkpoints (nvidia.github.io/TensorRT-LLM/features/quantization.html; "
               "perf-overview.md: 'the KV cache will automatically be set to FP8')"),
}
TRTLLM_FP8_KV_WEIGHTS = ("fp8", "nvfp4")  # ModelOpt formats whose checkpoints quantize the cache to fp8


def default_kv_dtype(engine: str | None, weight_dtype: str) -> tuple[str | None, str]:
    """(the KV cache's dtype, where it comes from) when none is given: None for the activation dtype.
    Without an engine (`tcalc inference` with no --engine) the activation dtype; else the engine's
    own default for a checkpoint of `weight_dtype` (KV_DTYPE_SOURCES)."""
    if engine is None:
        return None, "the activation dtype (no --engine given)"
    check_engine(engine)
    if engine == "trtllm" and weight_dtype in TRTLLM_FP8_KV_WEIGHTS:
        return "fp8", KV_DTYPE_SOURCES["trtllm"]
    return None, KV_DTYPE_SOURCES[engine]


@dataclass(frozen=True)
class EngineDefaults:
    """One engine's defaults on one GPU at one tensor-parallel degree (module docstring)."""

    engine: str
    max_num_seqs: int | None  # None: bounded by the KV pool alone (SGLang: its tokens // 2)
    max_num_batched_tokens: int
    chunked_prefill: bool
    block_size: int
    memory_utilization: float
    memory_fraction_of: str  # total | static | free
    cuda_graphs: bool
    request_overhead_s: float = 0.0
    moe_a2a_overlap: bool = False  # wide EP's two-batch overlap (module docstring)
    prefill_cuda_graphs: bool = True  # steps holding prompt tokens replay CUDA graphs too (module docstring)


# The serving path in front of the engine (`--frontend`), its costs per request (in the TTFT) and per
# sequence per step (in every step: a streamed response per sequence and token).
# none: the engine fed token ids, nothing streamed (trtllm-bench, gptSessionBenchmark, vLLM's
# latency CI), or an API server whose cost the published runs show none of (NIM's AIPerf runs at one
# request in flight: its TTFT is the prefill's); 0 and 0.
# triton: Triton Inference Server's TensorRT-LLM backend as its `inflight_batcher_llm` ensemble runs it
# (github.com/triton-inference-server/tensorrtllm_backend, all_models/inflight_batcher_llm: a Python
# `preprocessing` model tokenizes the prompt, `tensorrt_llm` runs the engine, a Python `postprocessing`
# model detokenizes every streamed token; gRPC/HTTP in front; decoupled mode streams one response per
# sequence per step). FITTED, both on ONE named set of rows, the Llama-3.1-8B H100 rows of the
# trtllm-v014-serving source (tools/validation/serving.yaml, TensorRT-LLM perf-overview.md 'Online
# Serving Measurements', v0.14: 14 TTFT and 14 ITL at 2-32 requests/s; `serving.py --fit`), checked
# on that source's 78 others (Llama-3.1-8B on H200, Llama-3.1-70B TP4 on H100 and H200;
# docs/validation.md, "Inference serving"). Refit at the per-kernel cost of issue 37 (8.29 µs): 5.67 ms and
# 15.3 µs before.
TRITON_REQUEST_S = 5.55e-3
TRITON_SEQUENCE_S = 14.9e-6


@dataclass(frozen=True)
class Frontend:
    """The serving path's costs outside the engine's kernels (FRONTENDS, above)."""

    name: str
    request_overhead_s: float  # per request, in its TTFT
    sequence_overhead_s: float  # per sequence per step, added to the engine's own (expected.SEQUENCE_S)


def frontend_costs(frontend: str, engine: str) -> Frontend:
    """The costs of `frontend` in front of `engine`; Triton's are its TensorRT-LLM backend's, fitted
    with TensorRT-LLM only (another engine behind Triton is refused)."""
    if frontend not in FRONTENDS:
        raise ValueError(f"frontend ({str(frontend)[:40]!r}) must be one of {', '.join(FRONTENDS)}")
    if frontend == "triton":
        if engine != "trtllm":
            raise ValueError(f"frontend 'triton' is Triton's TensorRT-LLM backend (its ensemble's costs were fitted on "
                             f"it); the engine is {engine}: give --engine trtllm or drop --frontend triton")
        return Frontend("triton", TRITON_REQUEST_S, TRITON_SEQUENCE_S)
    return Frontend("none", 0.0, 0.0)


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise ValueError(f"engine ({str(engine)[:40]!r}) must be one of {', '.join(ENGINES)}")
    return engine


def sglang_tier(memory_bytes: int) -> tuple[int, tuple[float, float]]:
    """(chunked_prefill_size, (reserved GiB, GiB per rank)) of a GPU with this much memory."""
    mib = memory_bytes / MIB
    for bound, chunk, reserve in SGLANG_TIERS:
        if bound is None or mib < bound:
            return chunk, reserve
    raise AssertionError("the last tier has no bound")  # pragma: no cover


def engine_defaults(engine: str, gpu_name: str, memory_bytes: int, tensor_parallel: int = 1) -> EngineDefaults:
    """The defaults `engine` takes on a GPU (its name and memory) at T ranks (module docstring)."""
    check_engine(engine)
    if engine == "vllm":
        large = memory_bytes >= VLLM_LARGE_GPU_BYTES and "a100" not in gpu_name.lower()
        seqs, tokens = VLLM_LARGE if large else VLLM_SMALL
        return EngineDefaults("vllm", seqs, tokens, True, VLLM_BLOCK_SIZE, VLLM_MEMORY_UTILIZATION, "total", True)
    if engine == "sglang":
        chunk, (a, b) = sglang_tier(memory_bytes)
        reserved = (a + b * tensor_parallel) * GIB
        fraction = (memory_bytes - reserved) / memory_bytes
        if not 0 < fraction <= 1:
            raise ValueError(f"SGLang's reserve ({reserved / GIB:.3g} GiB at T = {tensor_parallel}) leaves no memory "
                             f"on a {memory_bytes / GIB:.3g} GiB GPU; give --memory-utilization")
        return EngineDefaults("sglang", None, chunk, True, SGLANG_PAGE_SIZE, fraction, "static", True)
    return EngineDefaults("trtllm", TRTLLM_MAX_BATCH_SIZE, TRTLLM_MAX_NUM_TOKENS, False, TRTLLM_TOKENS_PER_BLOCK,
                          TRTLLM_FREE_GPU_MEMORY_FRACTION, "free", True, prefill_cuda_graphs=False)
