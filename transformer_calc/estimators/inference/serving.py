"""Serving: the capacity of a paged KV cache, and a deployment sized against latency targets.

Capacity (the paged engine's, per GPU; Kwon et al. 2023, "Efficient Memory Management for Large
Language Model Serving with PagedAttention"). The engine's settings are its profile's (engines.py:
vLLM, SGLang or TensorRT-LLM, each field overridable); the bare `ServingSpec()` is vLLM's older
defaults (block 16, 0.9 of memory, 8192 tokens and 256 sequences per step), kept for the estimators'
tests. What the memory fraction bounds is the engine's (`memory_fraction_of`, engines.py): "total"
as below (vLLM), "static" (SGLang: u·M holds the weights and the KV pool, the reserves sit outside
it), "free" (TensorRT-LLM: the KV pool is u of what weights and reserves leave free).

- the engine may use a fraction u of the GPU's memory (`memory_utilization`, vLLM's
  `gpu_memory_utilization`, default 0.9); from u·M it subtracts the weights, the CUDA context
  (`timeline.CUDA_CONTEXT_BYTES`, 512 MiB), the activation peak of the largest prefill chunk
  (`max_num_batched_tokens` tokens, vLLM's default 8192, through one block: the inference
  workspace's 2·D + widest intermediate per token, plus fp32 logits and probabilities of
  `max_num_seqs` sampled positions, as vLLM's profiling run measures) and an engine workspace
  (CUDA-graph pool and all-reduce buffers, 512 MiB: an assumption of the order vLLM logs when it
  captures graphs). Each reserve is stated and overridable. The rest holds the KV cache.
- the cache is paged in blocks of `block_size` tokens (vLLM's default 16): a sequence of c tokens
  holds ceil(c / block_size) blocks in each full-attention layer; a sliding-window (chunked) layer
  holds at most ceil(W / block_size) + 1 blocks (the window, straddling a block boundary), as vLLM's
  hybrid allocator frees the blocks that leave the window. MLA caches its latent, replicated on
  every TP rank (inference.py's KV groups are reused as they are). DeepSeek-V4's compressed layers page
  their entries as full-attention layers page tokens and hold their open windows and overlap as a
  constant slot per sequence (roofline.paged_compressed_elements; docs/formulas.md §5.16).
- `max_concurrent_sequences` = budget // (bytes per sequence at prompt + output − 1 tokens); the
  longest context at a concurrency is the largest c whose N sequences fit (bisection; bytes per
  sequence never decrease with c), at most the model's context window.

Per GPU and per replica: a replica is the max(T, ep) GPUs that hold one copy of the model; every
sequence is spread over the T GPUs of its attention group, so a group runs as many sequences as one
of its GPUs holds. With expert parallelism beyond T (wide EP, DP attention: SGLang's and TensorRT-LLM's
DeepSeek deployments) a replica is ep/T attention groups, each keeping B sequences in flight; the
experts are spread over the ep GPUs and every MoE layer dispatches and combines its tokens with two
all-to-alls over NVLink or the network (expected.fixed_costs_s, on the network model of `tcalc
train`: a 72-GPU NVLink domain on GB200/GB300 NVL72).

Deployment (`tcalc serve`), continuous batching (Yu et al. 2022, Orca; chunked prefill as
Agrawal et al. 2024, Sarathi-Serve, and vLLM's default scheduler):

- a replica keeps C sequences in flight (a closed loop). All figures come from one steady state of
  two engine steps (load_point; docs/formulas.md, "Serving a deployment"): the decode step a
  decoding sequence sees (TPOT: the decodes in flight at their mean context P + O/2, and the other
  sequences' prompt tokens) and the prompt's own prefill step(s), with the wait behind the other
  prompts as an M/D/1 queue (Pollaczek-Khinchine) whose server takes max_num_batched_tokens less the
  step's decodes. TTFT = the running step's residual + the wait + the prefill steps (+ the request
  overhead); E2E = TTFT + (O − 1)·TPOT; requests/s = C / E2E (Little's law); output tokens/s =
  requests/s · O. At C = 1 the steps are `tcalc inference`'s (expected.estimate_expected).
- with a request rate λ (requests/s, all replicas), a replica serves λ/R; the operating B is the
  smallest whose C / E2E meets it (bisection); none: the layout is overloaded.
- without one, B is the largest that meets both targets and fits the KV cache (bisection: TPOT
  and TTFT grow with B).

A latency-throughput curve (`tcalc serve --concurrency 1,8,64,256`): the best layout's TTFT, TPOT
and output tokens/s at each concurrency given (`curve`), the curve NIM's and the engines' benchmark
pages publish.

Bounded searches only: T over the divisors of the GPU count within a node, B by bisection.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError

import dataclasses
import math
from dataclasses import dataclass

from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.inference.expected import Efficiency, ExpectedStep, KernelClass, prompt_efficiency, step_time
from transformer_calc.devices.hardware import GPU
from transformer_calc.estimators.inference.roofline import (
    KV_DTYPE_BITS,
    InferenceSpec,
    memory_terms,
    paged_compressed_elements,
    rank_shard,
    state_bytes,
    decode_step,
    expert_slots,
    prefill_step,
)
from transformer_calc.estimators.params import check_tensor_parallel
from transformer_calc.estimators.training.timeline import CUDA_CONTEXT_BYTES
from transformer_calc.estimators.inference.engines import (
    MEMORY_FRACTION_OF,
    SGLANG_SEQS_PER_POOL_TOKEN,
    engine_defaults,
    trtllm_bench_limits,
)

MIB = 2**20
BLOCK_SIZE = 16  # vLLM's default --block-size (tokens per KV block)
MEMORY_UTILIZATION = 0.9  # vLLM's default gpu_memory_utilization
MAX_NUM_BATCHED_TOKENS = 8192  # vLLM V1's default for the OpenAI server (chunked prefill)
MAX_NUM_SEQS = 256  # vLLM's default max_num_seqs (sequences per step)
ENGINE_WORKSPACE_BYTES = 512 * MIB  # CUDA-graph pool + custom all-reduce buffers (assumption)
LOGIT_BYTES = 4  # fp32 logits
LOGIT_COPIES = 2  # the logits and the probabilities of the sampler
QUEUE_BISECTION_STEPS = 60  # halvings of the TTFT interval of the prefill queue (bounded)


@dataclass(frozen=True)
class ServingSpec:
    """Engine settings (module docstring); None reserves are derived."""

    block_size: int = BLOCK_SIZE
    memory_utilization: float = MEMORY_UTILIZATION
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int | None = MAX_NUM_SEQS  # None: the KV pool alone bounds it (SGLang: its tokens // 2)
    cuda_context_bytes: int = CUDA_CONTEXT_BYTES
    activation_peak_bytes: int | None = None
    engine_workspace_bytes: int = ENGINE_WORKSPACE_BYTES
    engine: str = "vllm"  # whose profile filled the fields not given (engines.py)
    chunked_prefill: bool = True  # prompts split into chunks of what the step budget leaves (else whole)
    memory_fraction_of: str = "total"  # total | static | free (engines.py)
    given: frozenset[str] = frozenset()  # the fields set explicitly, kept when the profile is re-resolved
    # TensorRT-LLM only: max_num_seqs and max_num_batched_tokens (those not given) sized as trtllm-bench
    # sizes them for the model, GPU, T and dataset (`with_bench_limits`; engines.trtllm_bench_limits)
    bench_batch_limits: bool = False

    def __post_init__(self) -> None:
        for name in ("block_size", "max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, name)
            if name == "max_num_seqs" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} ({value!r}) must be a whole number >= 1")
        if self.memory_fraction_of not in MEMORY_FRACTION_OF:
            raise ValueError(f"memory_fraction_of ({self.memory_fraction_of!r}) must be one of "
                             f"{', '.join(MEMORY_FRACTION_OF)}")
        if not isinstance(self.chunked_prefill, bool):
            raise ValueError(f"chunked_prefill ({self.chunked_prefill!r}) must be true or false")
        for name in ("cuda_context_bytes", "activation_peak_bytes", "engine_workspace_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} ({value!r}) must be a whole number of bytes >= 0")
        if not isinstance(self.bench_batch_limits, bool):
            raise ValueError(f"bench_batch_limits ({str(self.bench_batch_limits)[:40]!r}) must be true or false")
        if self.bench_batch_limits and self.engine != "trtllm":
            raise ValueError(f"bench_batch_limits sizes the batch limits as trtllm-bench (TensorRT-LLM's benchmark) "
                             f"does; the engine is {self.engine}: give --engine trtllm or drop --bench-batch-limits")
        u = self.memory_utilization
        if isinstance(u, bool) or not isinstance(u, (int, float)) or not (math.isfinite(u) and 0 < u <= 1):
            raise ValueError(f"memory_utilization ({u!r}) must be a fraction in (0, 1]")


ENGINE_FIELDS = ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "block_size", "memory_utilization")


def engine_serving(engine: str, gpu: GPU, tensor_parallel: int = 1, **given: object) -> ServingSpec:
    """The engine's profile on `gpu` at T ranks (engines.py), with the settings given (not None)
    in place of its defaults: an explicit flag wins over the profile."""
    d = engine_defaults(engine, gpu.name, gpu.memory_bytes, tensor_parallel)
    values: dict[str, object] = {name: getattr(d, name) for name in ENGINE_FIELDS}
    explicit = {k: v for k, v in given.items() if v is not None}
    values.update(explicit)
    return ServingSpec(engine=engine, memory_fraction_of=d.memory_fraction_of, given=frozenset(explicit),
                       **values)  # type: ignore[arg-type]


def at_tensor_parallel(serving: ServingSpec, gpu: GPU, tensor_parallel: int) -> ServingSpec:
    """The spec for a layout of T ranks: the profile's defaults that depend on T (SGLang's reserve
    grows with it) re-resolved; the settings given stay."""
    if serving.engine != "sglang" or "memory_utilization" in serving.given:
        return serving
    d = engine_defaults(serving.engine, gpu.name, gpu.memory_bytes, tensor_parallel)
    return dataclasses.replace(serving, memory_utilization=d.memory_utilization)


def trtllm_bench_batch_limits(m: ModelConfig, gpu: GPU, spec: InferenceSpec, prompt_len: int, output_len: int,
                              chunked_prefill: bool = False) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) trtllm-bench derives for this model, GPU, T and dataset
    (engines.trtllm_bench_limits): its parameter count (every parameter at the weight dtype's
    bytes) and its K/V bytes per token of the TP group, 2 · L · max(T, n_kv) · h_d · p (at least one
    K/V head per rank; MLA's latent as tcalc caches it)."""
    from transformer_calc.estimators.inference.roofline import kv_cache
    from transformer_calc.estimators.params import total_params

    T = spec.tensor_parallel
    whole = kv_cache(m, dataclasses.replace(spec, batch_size=1, tensor_parallel=1, expert_parallel=1), 1)
    heads = max(whole.n_kv_heads, 1)
    per_token = whole.bytes_per_token * max(T, heads) / heads
    return trtllm_bench_limits(total_params(m), spec.weight_dtype, per_token, gpu.memory_bytes, T, prompt_len,
                               output_len, chunked_prefill)


def with_bench_limits(serving: ServingSpec, m: ModelConfig, gpu: GPU, spec: InferenceSpec, prompt_len: int,
                      output_len: int) -> ServingSpec:
    """`serving` at the batch limits trtllm-bench derives for this model, GPU, T (spec's) and dataset
    (every request `prompt_len` in, `output_len` out) when `bench_batch_limits` is on: each of
    max_num_seqs and max_num_batched_tokens unless given (an explicit flag wins); else `serving` as is.
    A served engine (trtllm-serve) keeps its llm_args defaults; this reproduces the engine the
    published max-throughput tables ran (engines.py, TRTLLM_BENCH_TUNING)."""
    if not serving.bench_batch_limits:
        return serving
    bs, tokens = trtllm_bench_batch_limits(m, gpu, spec, prompt_len, output_len, serving.chunked_prefill)
    values: dict[str, int] = {}
    if "max_num_seqs" not in serving.given:
        values["max_num_seqs"] = bs
    if "max_num_batched_tokens" not in serving.given:
        values["max_num_batched_tokens"] = tokens
    return dataclasses.replace(serving, **values)  # type: ignore[arg-type]


def kv_sequence_bytes(m: ModelConfig, spec: InferenceSpec, serving: ServingSpec, context: int) -> int:
    """Paged KV bytes of one sequence of `context` tokens on one GPU: whole blocks per layer, a
    windowed layer at most ceil(W / block) + 1 blocks; plus, for a hybrid model, the constant decode
    state of its mixer layers (vLLM holds it in a per-sequence slot of its own beside the blocks)."""
    sh = rank_shard(m, spec)
    bs = serving.block_size
    bits = KV_DTYPE_BITS[spec.resolved_kv_dtype]
    blocks_full = -(-context // bs)
    total = 0
    for g in sh.kv_groups:
        blocks = blocks_full if g.window is None else min(blocks_full, -(-g.window // bs) + 1)
        total += g.layers * g.elements * blocks * bs
    total += paged_compressed_elements(sh, context, bs)  # DeepSeek-V4's compressed layers (0 otherwise)
    return -(-total * bits // 8) + state_bytes(sh, spec)


def activation_peak_bytes(m: ModelConfig, spec: InferenceSpec, serving: ServingSpec) -> int:
    """The largest prefill chunk through one block, and the sampler's fp32 logits."""
    sh = rank_shard(m, spec)
    _, _, per_token = memory_terms(sh, spec)
    # the sampled positions of a step: at most max_num_seqs, and without a cap (SGLang) at most its tokens
    sampled = serving.max_num_batched_tokens if serving.max_num_seqs is None else serving.max_num_seqs
    logits = LOGIT_COPIES * sampled * m.vocab_size * LOGIT_BYTES
    return per_token * serving.max_num_batched_tokens + logits


@dataclass(frozen=True)
class Capacity:
    """The KV cache of one GPU under an engine (module docstring)."""

    usable_bytes: int  # what the engine may allocate: weights + reserves + KV budget (vLLM: u · capacity)
    weights_bytes: int
    cuda_context_bytes: int
    activation_peak_bytes: int
    engine_workspace_bytes: int
    kv_budget_bytes: int  # what is left for the cache (< 0: the model does not fit)
    block_size: int
    block_bytes: int  # one block of every layer (full-attention layers' size)
    kv_blocks: int  # budget // block_bytes
    context_len: int  # prompt + output − 1 tokens, the sequence at its peak
    sequence_bytes: int  # its paged cache
    max_concurrent_sequences: int  # per GPU = per replica
    tensor_parallel: int
    gpus_per_replica: int


def capacity(m: ModelConfig, gpu: GPU, spec: InferenceSpec, serving: ServingSpec) -> Capacity:
    """KV blocks and concurrent sequences of one GPU (and so of one replica)."""
    sh = rank_shard(m, spec)
    weights, _, _ = memory_terms(sh, spec)
    M, u = gpu.memory_bytes, serving.memory_utilization
    act = activation_peak_bytes(m, spec, serving) if serving.activation_peak_bytes is None else serving.activation_peak_bytes
    context, workspace = serving.cuda_context_bytes, serving.engine_workspace_bytes
    if serving.memory_fraction_of == "static":
        # SGLang: u·M holds the weights and the KV pool; the CUDA context, activations and CUDA
        # graphs live in the (1 − u)·M it reserves (server_args: mem_fraction_static)
        context = act = workspace = 0
        usable = math.floor(M * u)
        budget = usable - weights
    elif serving.memory_fraction_of == "free":
        # TensorRT-LLM: the KV pool takes u of what is free once the weights and the runtime's
        # buffers are allocated (KvCacheConfig.free_gpu_memory_fraction)
        free = M - weights - context - act - workspace
        budget = math.floor(free * u) if free > 0 else free
        usable = weights + context + act + workspace + max(budget, 0)
    else:  # vLLM: u·M bounds everything the engine allocates (gpu_memory_utilization)
        usable = math.floor(M * u)
        budget = usable - weights - context - act - workspace
    bits = KV_DTYPE_BITS[spec.resolved_kv_dtype]
    block = -(-sum(g.layers * g.elements for g in sh.kv_groups) * serving.block_size * bits // 8)
    c = spec.peak_context_len
    per_seq = kv_sequence_bytes(m, spec, serving, c)
    return Capacity(
        usable_bytes=usable,
        weights_bytes=weights,
        cuda_context_bytes=context,
        activation_peak_bytes=act,
        engine_workspace_bytes=workspace,
        kv_budget_bytes=budget,
        block_size=serving.block_size,
        block_bytes=block,
        kv_blocks=max(budget, 0) // block if block else 0,
        context_len=c,
        sequence_bytes=per_seq,
        max_concurrent_sequences=max(budget, 0) // per_seq if per_seq else 0,
        tensor_parallel=spec.tensor_parallel,
        gpus_per_replica=max(spec.tensor_parallel, spec.expert_parallel),
    )


def sequence_limit(serving: ServingSpec, cap: Capacity) -> int:
    """The engine's cap on sequences per step: max_num_seqs, or without one (SGLang) the KV pool's
    tokens // 2 (its scheduler's max_running_requests; engines.py)."""
    if serving.max_num_seqs is not None:
        return serving.max_num_seqs
    return cap.kv_blocks * cap.block_size // SGLANG_SEQS_PER_POOL_TOKEN


def longest_context(m: ModelConfig, spec: InferenceSpec, serving: ServingSpec, budget: int, concurrency: int) -> int:
    """The longest context (tokens per sequence) at which `concurrency` sequences fit in `budget`
    bytes, at most the model's context window (0: not even one token). Bisection."""
    if concurrency < 1:
        raise ValueError(f"concurrency ({concurrency!r}) must be >= 1")

    def fits(c: int) -> bool:
        return concurrency * kv_sequence_bytes(m, spec, serving, c) <= budget

    hi = m.max_seq_len
    if budget < 0 or not fits(1):
        return 0
    if fits(hi):
        return hi
    lo = 1
    while hi - lo > 1:  # at most log2(max_seq_len) steps
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def budget_contexts(m: ModelConfig) -> list[int]:
    """Rows of the budget matrix: 1k, 2k, 4k, ... up to the model's context window (and it)."""
    rows: list[int] = []
    c = 1024
    while c < m.max_seq_len and len(rows) < 16:
        rows.append(c)
        c *= 2
    return rows + [m.max_seq_len]


BUDGET_CONCURRENCY = (1, 4, 16, 64, 256)


def budget_matrix(m: ModelConfig, spec: InferenceSpec, serving: ServingSpec, budget: int) -> dict:
    """The fraction of the KV budget that N sequences of context c take (<= 1: they fit), and the
    most sequences of each context, per GPU."""
    contexts = budget_contexts(m)
    per_seq = [kv_sequence_bytes(m, spec, serving, c) for c in contexts]
    return {
        "contexts": contexts,
        "concurrency": list(BUDGET_CONCURRENCY),
        "kv_fraction": [[(n * b / budget) if budget > 0 else None for n in BUDGET_CONCURRENCY] for b in per_seq],
        "max_concurrent_sequences": [max(budget, 0) // b if b else 0 for b in per_seq],
    }


# ============================================================================ the serving model
FIXED_POINT_STEPS = 24  # halvings of the steady state's composition interval (load_point; bounded)


@dataclass(frozen=True)
class LoadPoint:
    """One replica at concurrency C under continuous batching (module docstring). Every figure is
    derived from the same two engine steps (`step`: what a decoding sequence sees; the prompt's own
    prefill step), so that Little's law holds by construction: requests/s = C / e2e_s, output
    tokens/s = requests/s · O, e2e_s = ttft_s + (O − 1)·tpot_s."""

    concurrency: int
    prefill_tokens_per_step: float  # the other sequences' prompt tokens in a decode step (steady-state mean)
    step: ExpectedStep  # the decode step a sequence in its decode phase sees
    tpot_s: float  # = step.time_s
    ttft_s: float
    output_tokens_per_s: float  # per replica: C · O / e2e_s
    requests_per_s: float  # per replica: C / e2e_s (Little's law)
    prefill_s: float = 0.0  # the prompt's own chunked prefill steps
    queue_s: float = 0.0  # the wait behind other prompts (M/D/1, module docstring)
    e2e_s: float = 0.0  # ttft_s + (O − 1)·tpot_s
    decode_batch: int = 1  # sequences decoded in `step` (the one seeing it among them)
    prefill_step_s: float = 0.0  # one step of the prompt's own prefill
    prefill_marginal_s: float = 0.0  # the GPU time one prompt's tokens add to the running decode step

    @property
    def prefill_share(self) -> float:
        """The share of the replica's time its prompts take: requests/s x the time one prompt's tokens
        add to the decode step they join (the weights are read for the decodes anyway), at most 1;
        the decodes take the rest."""
        return min(self.requests_per_s * self.prefill_marginal_s, 1.0)


class _Cycle:
    """The steps of load_point's steady state at one concurrency (its docstring): the model, the
    engine and the request shape, each decode batch's step costed once."""

    def __init__(self, m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, serving: ServingSpec,
                 prompt_len: int, output_len: int, concurrency: int) -> None:
        self.m, self.gpu, self.spec, self.eff, self.serving = m, gpu, spec, eff, serving
        self.C, self.P, self.O = concurrency, prompt_len, output_len
        self.N = serving.max_num_batched_tokens
        self.mean_context = prompt_len + max(output_len // 2, 1)
        one = dataclasses.replace(spec, batch_size=1, prompt_len=prompt_len, new_tokens=1)
        self.pre = prefill_step(m, gpu, one)
        self.decodes_at: dict = {}  # decode steps by batch, costed once

    def dec(self, n: int):
        if n not in self.decodes_at:
            d_spec = dataclasses.replace(self.spec, batch_size=n, prompt_len=self.P, new_tokens=max(self.O, 2))
            self.decodes_at[n] = decode_step(self.m, self.gpu, d_spec, self.mean_context)
        return self.decodes_at[n]

    def mixed(self, decodes: int, prefill_tokens: float) -> ExpectedStep:
        """A step that decodes `decodes` sequences and prefills `prefill_tokens` prompt tokens (their
        share of one prompt's prefill FLOPs and K/V traffic; the weights are read once for both, plus
        the experts the prompt touches that the decode tokens did not), as three kernel classes that
        run one after another (expected.py): the linear layers over all the step's tokens, the decode
        attention over the sequences' caches, the prompt tokens' context attention."""
        pre, P = self.pre, self.P
        share = prefill_tokens / P
        d = self.dec(decodes) if decodes else None
        base_flops = d.matmul_flops if d else 0
        base_weights = d.weight_bytes if d else 0
        # the experts (or, with no decodes, the weights) the prompt tokens read beyond the decodes'
        extra_weights = max(pre.weight_bytes - base_weights, 0) * (min(share, 1.0) if d else (1.0 if share else 0.0))
        classes = (
            KernelClass(base_flops + share * pre.matmul_flops, base_weights + extra_weights),
            KernelClass(d.attention_flops if d else 0, (d.kv_read_bytes + d.kv_write_bytes) if d else 0, attention=True),
            KernelClass(share * pre.attention_flops, share * (pre.kv_read_bytes + pre.kv_write_bytes), attention=True),
        )
        sampled = decodes + math.ceil(share - 1e-9)  # the decodes and the prompts that finish in the step
        # a step holding prompt tokens outside CUDA graphs (TensorRT-LLM), in the share of the steps
        # that hold a chunk of min(P, N) tokens (expected.prompt_efficiency)
        rates = prompt_efficiency(self.eff, prefill_tokens / min(P, self.N))
        return step_time(self.m, self.gpu, self.spec, rates, classes, decodes + math.ceil(prefill_tokens), sampled)

    def solve(self, f: float) -> tuple[int, ExpectedStep, float, int, int, float]:
        """The steps at a composition f: (decodes in the decode step, the decode step, the prefill
        step's time, prefill steps, the prefill server's tokens per step, the others' prompt tokens
        per step). The others start a prompt once per E2E = (O − 1)·TPOT / f, so per step they bring
        (C − 1)·P·f / (O − 1) prompt tokens, whatever the step's time."""
        C, P, O, N = self.C, self.P, self.O, self.N
        n_dec = min(max(1, round(1 + (C - 1) * f)), C)
        others = min(max(0, round((C - 1) * f)), C - 1)
        y = (C - 1) * P * f / (O - 1) if O > 1 else 0.0
        step = self.mixed(n_dec, min(y, max(N - n_dec, 0)))
        budget = max(N - others, 1)  # what the prefill step's decodes leave of the step budget
        if self.serving.chunked_prefill:
            chunk, steps, server = min(P, budget), math.ceil(P / budget), budget
        else:  # whole prompts only (TensorRT-LLM's default)
            chunk, steps, server = P, 1, max(budget // P, 1) * P
        extra = min(y, max(server - chunk, 0))  # the others' prompt tokens the prefill server still takes
        return n_dec, step, self.mixed(others, chunk + extra).time_s, steps, server, min(y, max(N - n_dec, 0))

    def ttft_of(self, tpot: float, t_pre: float, steps: int, server: int) -> tuple[float, float]:
        """(TTFT, the wait behind other prompts) at these steps: TTFT = fixed + W(TTFT), W falling as
        TTFT grows (a longer cycle feeds the queue less), so the fixed point is unique (bisection)."""
        C, P, O = self.C, self.P, self.O
        service = P / server * t_pre  # seconds of the prefill server one prompt takes
        fixed = self.eff.request_s + (tpot / 2 if C > 1 else 0.0) + steps * t_pre
        if C == 1:
            return fixed, 0.0
        cap = (C - 1) * service  # every other prompt ahead

        def wait(ttft: float) -> float:
            rho = (C - 1) * service / (ttft + (O - 1) * tpot)
            return cap if rho >= 1 else min(rho * service / (2 * (1 - rho)), cap)

        lo, hi = fixed, fixed + cap
        for _ in range(QUEUE_BISECTION_STEPS):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if fixed + wait(mid) > mid else (lo, mid)
        return hi, hi - fixed

    def composed(self, f: float) -> tuple[float, tuple[int, ExpectedStep, float, int, int, float]]:
        """The share of a life spent decoding that the steps at composition f give back."""
        steps_at = self.solve(f)
        tpot = steps_at[1].time_s
        ttft = self.ttft_of(tpot, *steps_at[2:5])[0]
        return (self.O - 1) * tpot / (ttft + (self.O - 1) * tpot), steps_at


def load_point(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, serving: ServingSpec,
    prompt_len: int, output_len: int, concurrency: int,
) -> LoadPoint:
    """TTFT, TPOT, end-to-end latency and throughput of one replica keeping `concurrency` sequences
    in flight (a closed loop: a finished request is replaced at once, as a benchmark at a fixed
    concurrency runs it), all from one steady state (module docstring, "Deployment").

    A sequence's life is its TTFT (wait for the running step, queue behind other prompts, its own
    prefill steps, whose last samples the first token), then O − 1 decode steps. With f = the
    share of a life spent decoding, (O − 1)·TPOT / E2E, the other C − 1 sequences are decoding a
    fraction f of the time and start a prompt once per E2E (the arrival theorem of closed
    queueing networks: an arriving sequence sees the other C − 1 in their time-average state):

    - decode step (TPOT): 1 + (C − 1)·f decodes at the mean context P + O/2, plus the prompt tokens
      the others prefill meanwhile, (C − 1)·P·TPOT / E2E, within the step budget;
    - prefill step: (C − 1)·f decodes, the prompt's chunk c = min(P, L) of the budget L the decodes
      leave (max_num_batched_tokens − decodes; without chunked prefill the whole prompt, one step),
      ceil(P / L) such steps, plus the others' prompt tokens that still fit;
    - queue: the prefill is one server of L tokens per step (whole prompts only: ⌊L/P⌋·P), a prompt
      taking P/L of a step, fed by the other C − 1 once per E2E: M/D/1 (Pollaczek-Khinchine,
      W = ρ·s / (2(1 − ρ))), at most every other prompt's service, (C − 1)·s;
    - TTFT = request overhead + half a step (the running step's mean residual; none at C = 1: the
      engine is idle between one's requests) + W + the prefill steps; E2E = TTFT + (O − 1)·TPOT.

    f and the others' prefill rate depend on TTFT and TPOT, which depend on them: the composition is
    iterated to its fixed point (at most FIXED_POINT_STEPS rounds; the step times depend weakly on
    it). At C = 1 the decode step is `tcalc inference`'s decode step of one sequence and the prefill
    step its prefill (one model of a step for both commands)."""
    C, P, O = concurrency, prompt_len, output_len
    if C < 1:
        raise ValueError(f"concurrency ({concurrency!r}) must be >= 1")
    cycle = _Cycle(m, gpu, spec, eff, serving, P, O, C)
    # f = composed(f): the returned share falls as f grows (more decodes per step leave less of the
    # budget to the prompts, which queue longer), so the fixed point is unique (bisection on [0, 1])
    lo, hi = 0.0, 1.0
    for _ in range(FIXED_POINT_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cycle.composed(mid)[0] > mid else (lo, mid)
    n_dec, step, t_pre, steps, server, y = cycle.composed(lo)[1]
    # every figure from these steps: Little's law holds by construction
    tpot = step.time_s
    ttft, queue = cycle.ttft_of(tpot, t_pre, steps, server)
    e2e = ttft + (O - 1) * tpot
    marginal = max(cycle.mixed(n_dec, y + P).time_s - step.time_s, 0.0)  # one more prompt in the step (step: mixed(n_dec, y))
    return LoadPoint(C, y, step, tpot, ttft, C * O / e2e, C / e2e, steps * t_pre, queue, e2e, n_dec, t_pre, marginal)


@dataclass(frozen=True)
class Layout:
    """One deployment layout and its verdict."""

    tensor_parallel: int
    replicas: int
    gpus: int
    capacity: Capacity | None
    point: LoadPoint | None
    meets_targets: bool
    reason: str | None  # why it was rejected (None: feasible)
    attention_groups: int = 1  # per replica: ep/T groups of T GPUs with DP attention, each with B in flight

    @property
    def tokens_per_s(self) -> float:
        return self.replicas * self.attention_groups * self.point.output_tokens_per_s if self.point else 0.0


def replica_layout(T: int, ep: int) -> tuple[int, int]:
    """(GPUs per replica, attention groups per replica) under expert parallelism
    (roofline.expert_layout): ep dividing T, the experts inside the T-way group: T GPUs, one group;
    T dividing ep, DP attention: ep GPUs in ep/T groups of T, each keeping B sequences in flight
    (wide EP; the all-to-alls over the ep GPUs are expected.fixed_costs_s's)."""
    return max(T, ep), max(ep // T, 1)


def _largest(pred, hi: int) -> int:
    """The largest B in [1, hi] with pred(B) (pred true at 1, monotone: true then false)."""
    lo = 1
    if pred(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if pred(mid) else (lo, mid)
    return lo


def _smallest(pred, hi: int) -> int | None:
    """The smallest B in [1, hi] with pred(B) (monotone: false then true); None if none."""
    if not pred(hi):
        return None
    lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if pred(mid) else (mid, hi)
    return hi


def evaluate_layout(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, serving: ServingSpec, *,
    gpus: int, prompt_len: int, output_len: int, ttft_s: float | None, tpot_s: float | None,
    request_rate: float | None = None, concurrency: int | None = None,
) -> Layout:
    """One layout (spec.tensor_parallel, replicas = gpus // max(T, ep)): its capacity, its operating
    concurrency (B per attention group) and whether the targets hold."""
    T = spec.tensor_parallel
    per_replica, groups = replica_layout(T, spec.expert_parallel)
    replicas = gpus // per_replica

    def reject(reason: str, cap: Capacity | None = None, point: LoadPoint | None = None) -> Layout:
        return Layout(T, replicas, gpus, cap, point, False, reason, groups)

    run = dataclasses.replace(spec, batch_size=1, prompt_len=prompt_len, new_tokens=output_len)
    cap = capacity(m, gpu, run, serving)
    limits = _batch_limits(cap, serving, prompt_len, output_len)
    if isinstance(limits, str):
        return reject(limits, cap)
    b_max, seq_cap, b_budget = limits

    def at(b: int) -> LoadPoint:
        return load_point(m, gpu, run, eff, serving, prompt_len, output_len, b)

    def meets(p: LoadPoint) -> bool:
        return (tpot_s is None or p.tpot_s <= tpot_s) and (ttft_s is None or p.ttft_s <= ttft_s)

    def missed(p: LoadPoint) -> str:
        what = "TPOT" if tpot_s is not None and p.tpot_s > tpot_s else "TTFT"
        return f"{what} {p.tpot_s if what == 'TPOT' else p.ttft_s:.4g} s exceeds the target"

    if concurrency is not None:
        reason = _concurrency_refused(concurrency, cap, seq_cap, b_budget, serving.max_num_batched_tokens,
                                      prompt_len, output_len)
        if reason is not None:
            return reject(reason, cap)
        b = concurrency
    elif request_rate is not None:
        need = request_rate / (replicas * groups)
        found = _smallest(lambda b: at(b).requests_per_s >= need, b_max)
        if found is None:
            top = at(b_max)
            return reject(f"overloaded: {need:.3g} requests/s per replica, at most {top.requests_per_s:.3g} "
                          f"at the {b_max} sequences that fit", cap, top)
        b = found
    else:
        if not meets(one := at(1)):
            return reject(f"{missed(one)} even at one sequence", cap, one)
        b = _largest(lambda b: meets(at(b)), b_max)
    point = at(b)
    if not meets(point):
        return Layout(T, replicas, gpus, cap, point, False, f"{missed(point)} at B = {b}", groups)
    return Layout(T, replicas, gpus, cap, point, True, None, groups)


def _batch_limits(cap: Capacity, serving: ServingSpec, prompt_len: int, output_len: int) -> tuple[int, int, int] | str:
    """(largest B kept in flight, the engine's sequences per step, the step budget's B), or why no B runs."""
    if cap.kv_budget_bytes < 0:
        return "does not fit: weights + reserves exceed the usable memory per GPU"
    seq_cap = sequence_limit(serving, cap)
    b_max = min(cap.max_concurrent_sequences, seq_cap)
    if b_max < 1:
        return f"no room in the KV cache for one sequence of {cap.context_len} tokens"
    if not serving.chunked_prefill and prompt_len >= serving.max_num_batched_tokens:
        return (f"without chunked prefill a prompt of {prompt_len} tokens must fit in one step beside the "
                f"decodes: raise --max-num-batched-tokens above {prompt_len} or give --chunked-prefill")
    # The step budget: a steady state decodes B tokens and prefills B·P/O prompt tokens per step
    # (load_point), all within max_num_batched_tokens: B·(1 + P/O) <= budget, B <= budget·O/(O + P).
    # A larger B cannot be kept in flight (the prompts queue without bound).
    budget = serving.max_num_batched_tokens
    b_budget = budget * output_len // (output_len + prompt_len)
    if b_budget < 1:
        return (f"the step budget max_num_batched_tokens ({budget}) is below the {1 + prompt_len / output_len:.4g} "
                "tokens per step one sequence needs in steady state (1 decode + P/O prompt tokens); raise "
                "--max-num-batched-tokens")
    return min(b_max, b_budget), seq_cap, b_budget


def _concurrency_refused(concurrency: int, cap: Capacity, seq_cap: int, b_budget: int, budget: int,
                         prompt_len: int, output_len: int) -> str | None:
    """Why a closed-loop concurrency cannot be kept in flight (None: it can)."""
    if concurrency > cap.max_concurrent_sequences:
        return f"concurrency {concurrency} exceeds the {cap.max_concurrent_sequences} sequences whose cache fits"
    if concurrency > seq_cap:
        return (f"concurrency {concurrency} exceeds the engine's {seq_cap} sequences per step "
                "(max_num_seqs); raise --max-num-seqs")
    if concurrency > b_budget:
        need = concurrency * (1 + prompt_len / output_len)
        return (f"concurrency {concurrency} needs {need:,.0f} tokens per step (B decodes + B·P/O prompt "
                f"tokens), above max_num_batched_tokens ({budget}); at most {b_budget} fit")
    return None


def candidate_tensor_parallel(m: ModelConfig, gpus: int, node_size: int, ep: int = 1) -> list[int]:
    """T values to try within one node (at most node_size of them): T and ep dividing one another
    and the replica's max(T, ep) GPUs dividing gpus."""
    out = []
    for T in range(1, min(node_size, gpus) + 1):
        if (T % ep == 0 or ep % T == 0) and gpus % max(T, ep) == 0:
            out.append(T)
    return out


def search(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, serving: ServingSpec, *,
    gpus: int, prompt_len: int, output_len: int, ttft_s: float | None, tpot_s: float | None,
    request_rate: float | None = None, tensor_parallel: int | None = None, concurrency: int | None = None,
) -> list[Layout]:
    """Every layout, feasible ones first by total output tokens/s, then the rejected with reasons."""
    Ts = [tensor_parallel] if tensor_parallel else candidate_tensor_parallel(
        m, gpus, eff.network.node_size, spec.expert_parallel)
    layouts = []
    for T in Ts:
        if gpus % replica_layout(T, spec.expert_parallel)[0]:
            layouts.append(Layout(T, 0, gpus, None, None, False,
                                  f"gpus ({gpus}) is not a multiple of a replica's max(T, ep) = "
                                  f"{replica_layout(T, spec.expert_parallel)[0]} GPUs"))
            continue
        try:
            layout_spec = dataclasses.replace(spec, tensor_parallel=T)
            check_tensor_parallel(expert_slots(m, layout_spec), T, spec.expert_parallel)
            rank_shard(m, layout_spec)
            layout_serving = with_bench_limits(at_tensor_parallel(serving, gpu, T), m, gpu, layout_spec, prompt_len,
                                               output_len)
        except TcalcError:
            raise
        except ValueError as exc:
            layouts.append(Layout(T, gpus // replica_layout(T, spec.expert_parallel)[0], gpus, None, None, False,
                                  str(exc)))
            continue
        layouts.append(evaluate_layout(m, gpu, layout_spec, eff, layout_serving, gpus=gpus, prompt_len=prompt_len,
                                       output_len=output_len, ttft_s=ttft_s, tpot_s=tpot_s,
                                       request_rate=request_rate, concurrency=concurrency))
    if request_rate is not None:  # the load is fixed: the fastest responses first
        order = lambda x: (x.point.tpot_s, x.point.ttft_s)  # noqa: E731
    else:  # the most output tokens/s at the targets first
        order = lambda x: (-x.tokens_per_s, x.point.tpot_s)  # noqa: E731
    feasible = sorted((x for x in layouts if x.meets_targets), key=order)
    rejected = [x for x in layouts if not x.meets_targets]
    return feasible + rejected


def curve(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, serving: ServingSpec, *,
    gpus: int, prompt_len: int, output_len: int, concurrencies: list[int],
) -> list[Layout]:
    """The latency-throughput curve engines publish: one layout (spec.tensor_parallel) at each
    concurrency per replica, no targets; a concurrency the engine cannot keep in flight (the cache,
    its sequence cap, its step budget) comes back rejected with the reason. One evaluation per
    point (at most requests.inference.MAX_CURVE_POINTS)."""
    layout_serving = with_bench_limits(at_tensor_parallel(serving, gpu, spec.tensor_parallel), m, gpu, spec, prompt_len,
                                       output_len)
    return [evaluate_layout(m, gpu, spec, eff, layout_serving, gpus=gpus, prompt_len=prompt_len, output_len=output_len,
                            ttft_s=None, tpot_s=None, concurrency=b) for b in concurrencies]
