"""Inference estimates: hand-checked tiny cases, published goldens, the seed's Falcon-40B study
(docs/seed-errata.md FAL-1..6), and roofline invariants."""

from __future__ import annotations

import ast
import dataclasses
import math
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig
from transformer_calc.devices.hardware import GPU
from transformer_calc.estimators.inference.roofline import (
    COLLECTIVE_LATENCY_S,
    InferenceSpec,
    compute_bound_batch,
    decode,
    decode_step,
    dtype_bytes,
    estimate_inference,
    inference_memory,
    kv_cache,
    matmul_params,
    min_tensor_parallel,
    prefill_step,
    roofline,
    tp_communication,
    weights_only_compute_bound_batch,
)
from transformer_calc.estimators.params import count_params, tensor_parallel_params
from transformer_calc.sources.presets import gpu, preset_model

from conftest import REPO, model_configs

GIB = 2**30

# L=2, D=8, A=2 (head_dim 4), d_ff=32, V=10, K=6: GPT-style, biases, tied, 1888 parameters.
TINY = ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6})


def toy_gpu(peak: int = 1000, bw: int = 100, memory: int = 10_000, link: int | None = 200) -> GPU:
    """A GPU with round numbers: 1000 FLOP/s bf16, 100 B/s, 10 kB, 200 B/s bidirectional link."""
    return GPU(
        name="toy", vendor="test", memory_bytes=memory, memory_bw_bytes_s=bw,
        peak_flops={"bf16": peak, "fp32": peak, "fp16": peak}, interconnect_bytes_s=link,
        source="test", verified=False,
    )


def spec(**kw) -> InferenceSpec:
    return InferenceSpec(**{"batch_size": 1, "prompt_len": 1, **kw})


# ============================================================================ hand-checked
def test_tiny_matmul_params_by_hand():
    # 2 layers x (Q, K, V, O: 4 x 8x8 + MLP 2 x 8x32) + tied LM head 10x8;
    # not counted: norms, biases, the position table
    assert matmul_params(TINY) == 2 * (4 * 64 + 2 * 8 * 32) + 80 == 1616
    assert count_params(TINY).total - matmul_params(TINY) == 1888 - 1616  # biases, norms, positions
    # T=2: heads, MLP width and vocabulary split; nothing replicated among the matmuls
    assert matmul_params(TINY, 2) == 2 * (4 * 32 + 2 * 8 * 16) + 5 * 8 == 808


def test_tiny_kv_cache_memory_and_limits_by_hand():
    s = spec(batch_size=3, prompt_len=5)
    kv = kv_cache(TINY, s)
    assert kv.bytes_per_token == 2 * 2 * 2 * 4 * 2 == 64  # K and V x L x n_kv x h_d x 2 bytes
    assert (kv.total_bytes, kv.per_gpu_bytes) == (3 * 5 * 64, 960)
    mem = inference_memory(TINY, toy_gpu(), s)
    assert mem.weights_bytes == 1888 * 2
    # workspace per token: 2·D + max(Q/K/V width (2+2·2)·4 = 24, MLP width 32) = 48 values, bf16
    assert mem.workspace_bytes == 3 * 5 * 48 * 2 == 1440
    assert mem.total_bytes == 3776 + 960 + 1440 == 6176
    assert mem.fits and mem.capacity_bytes == 10_000
    # per sequence (64 + 96)·5 = 800 bytes in 10000 - 3776 = 6224: B <= 7; at B = 3: 480·S <= 6224
    # gives S <= 12, capped by the context window K = 6 (S + N_new - 1 <= 6)
    assert (mem.max_batch_size, mem.max_prompt_len) == (7, 6)
    long_context = ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "K": 4096, "positional": "rotary"})
    free = 10_000 - inference_memory(long_context, toy_gpu(), s).weights_bytes
    assert inference_memory(long_context, toy_gpu(), s).max_prompt_len == free // 480 == 13  # memory-bound
    big = toy_gpu(memory=10**8)  # room for far more than the window: the context caps S at 4096 - 4092 + 1
    assert inference_memory(long_context, big, spec(batch_size=1, prompt_len=5, new_tokens=4092)).max_prompt_len == 5


def test_tiny_prefill_and_decode_by_hand():
    s, g = spec(batch_size=3, prompt_len=5), toy_gpu()
    pre = prefill_step(TINY, g, s)
    assert pre.matmul_flops == 2 * 3 * 5 * 1616 == 48480
    # 2 matmuls x 2 FLOPs x B x L x A x h_d x (1+2+3+4+5): causal, counted exactly
    assert pre.attention_flops == 2 * 2 * 3 * 2 * 2 * 4 * 15 == 2880
    # weights read: all but the learned position table (6 x 8, gathered by row), 2 bytes each
    assert (pre.weight_bytes, pre.kv_read_bytes, pre.kv_write_bytes) == ((1888 - 48) * 2, 0, 960)
    assert pre.roofline.compute_s == 51360 / 1000 and pre.roofline.memory_s == 4640 / 100
    assert pre.bound == "compute" and pre.seconds == 51.36
    dec = decode_step(TINY, g, s, 6)  # the token at position 6 attends over 6 positions
    assert (dec.matmul_flops, dec.attention_flops) == (2 * 3 * 1616, 2 * 2 * 3 * 2 * 2 * 4 * 6)
    assert (dec.kv_read_bytes, dec.kv_write_bytes) == (3 * 5 * 64, 3 * 64)
    assert dec.bytes_moved == 3680 + 3 * 6 * 64 and dec.bound == "memory"
    assert dec.seconds == dec.roofline.memory_s == 48.32


def test_tiny_tensor_parallel_communication_by_hand():
    s = spec(batch_size=3, prompt_len=5, tensor_parallel=2)
    comm = tp_communication(TINY, toy_gpu(), s, 1)
    assert comm.all_reduces == 2 * 2  # two per layer
    assert comm.bytes_per_all_reduce == 3 * 1 * 8 * 2  # B · tokens · D · 2 bytes
    assert comm.link_bytes_s == 100  # half of the 200 B/s bidirectional figure
    assert comm.transfer_s == pytest.approx(4 * (2 * 1 / 2) * 48 / 100)  # ring 2(T-1)/T
    assert comm.latency_s == pytest.approx(4 * COLLECTIVE_LATENCY_S)
    step = decode_step(TINY, toy_gpu(), s, 6)
    assert step.seconds == pytest.approx(step.roofline.seconds + comm.seconds)
    quiet = dataclasses.replace(s, collective_latency_s=0.0)
    assert tp_communication(TINY, toy_gpu(), quiet, 1).latency_s == 0


def test_decode_sum_by_hand():
    s, g = spec(batch_size=3, prompt_len=5, new_tokens=4), toy_gpu()
    d = decode(TINY, g, s)
    steps = [decode_step(TINY, g, s, c) for c in (6, 7, 8)]  # tokens 2, 3, 4
    assert d.steps == 3 and d.first == steps[0] and d.last == steps[-1]
    assert d.flops == sum(x.flops for x in steps)
    assert d.seconds == pytest.approx(sum(x.seconds for x in steps))
    assert d.seconds_per_token == pytest.approx(d.seconds / 3)
    assert d.tokens_per_s == pytest.approx(3 / d.seconds_per_token)
    est = estimate_inference(TINY, g, s)
    assert est.total_s == pytest.approx(est.prefill.seconds + d.seconds)
    assert est.time_to_first_token_s == est.prefill.seconds
    assert est.kv_cache.context_len == 5 + 4 - 1  # the last decode step's token is the 8th


def test_single_new_token_has_no_decode_steps():
    d = decode(TINY, toy_gpu(), spec(prompt_len=5))
    assert (d.steps, d.flops, d.seconds) == (0, 0, 0.0)
    assert d.seconds_per_token == d.first.seconds  # the step that would come next, at context 6
    assert d.first.context_len == 6


def test_naive_mode_reprocesses_the_context():
    """Seed "Naive Inference": no cache; each step is a prefill of the whole context."""
    s, g = spec(batch_size=2, prompt_len=5, kv_cache=False), toy_gpu()
    step = decode_step(TINY, g, s, 7)
    longer = prefill_step(TINY, g, dataclasses.replace(s, prompt_len=7))
    assert step == longer
    assert step.matmul_flops == 2 * 2 * 7 * 1616  # the seed's 2·B·S·N per new token, at S = 7
    assert kv_cache(TINY, s).total_bytes == 0
    assert inference_memory(TINY, g, s).kv_cache_bytes == 0


def test_int4_weights_round_up_to_whole_bytes():
    m = TINY.with_overrides({"V": 11, "lm_head_bias": True})  # 1888 + 8 + 11 parameters
    assert count_params(m).total == 1907  # 953.5 bytes at 4 bits
    assert inference_memory(m, toy_gpu(), spec(weight_dtype="int4")).weights_bytes == 954
    assert dtype_bytes("int4") == Fraction(1, 2) and dtype_bytes("bfloat16") == 2


def test_dtype_defaults():
    s = spec(weight_dtype="int4")
    assert (s.compute_dtype, s.activation_dtype, s.kv_dtype) == ("bf16", "bf16", "bf16")
    s = spec(weight_dtype="fp32")
    assert (s.compute_dtype, s.activation_dtype, s.kv_dtype) == ("fp32", "fp32", "fp32")
    s = spec(weight_dtype="fp8")
    assert (s.compute_dtype, s.activation_dtype, s.kv_dtype) == ("fp8", "bf16", "bf16")
    s = spec(weight_dtype="float16", kv_dtype="fp8")
    assert (s.weight_dtype, s.compute_dtype, s.kv_dtype) == ("fp16", "fp16", "fp8")
    int4 = dataclasses.replace(s, kv_dtype="int4")
    assert kv_cache(TINY, int4).bytes_per_token == 2 * 2 * 2 * 4 // 2


# ============================================================================ goldens
KV_GOLDENS = [
    # (preset, tokens, kv heads, expected total bytes, tolerance 0: exact)
    pytest.param("llama-2-13b", 8192, None, 6_710_886_400,
                 id="issue: llama-2-13b 8192 tok bf16 = 2·2·8192·40·40·128 (MHA)"),
    pytest.param("llama-2-70b", 8192, None, 2_684_354_560,
                 id="HF config llama-2-70b GQA 8 kv heads: 2·2·8192·80·8·128"),
    pytest.param("mistral-7b", 8192, None, GIB,
                 id="HF config mistral-7b GQA 8 kv heads: 2·2·8192·32·8·128 = 1 GiB"),
    pytest.param("falcon-7b", 2048, None, 16_777_216,
                 id="HF config falcon-7b MQA: 2·2·2048·32·1·64"),
    pytest.param("falcon-40b", 2048, 128, 4_026_531_840,
                 id="errata FAL-2: seed's MHA pretense 2pSDL = 4.03 GB = 3.75 GiB per sequence"),
    pytest.param("falcon-40b", 2048, None, 251_658_240,
                 id="errata FAL-2/INF-4: real falcon-40b 8 kv heads x 64 = 0.234 GiB per sequence"),
]


@pytest.mark.parametrize(("preset", "tokens", "heads", "expected"), KV_GOLDENS)
def test_kv_cache_goldens(preset, tokens, heads, expected):
    kv = kv_cache(preset_model(preset), spec(prompt_len=tokens, cache_kv_heads=heads))
    assert kv.total_bytes == expected


# ============================================================================ Falcon-40B
# The seed's case study, 003 l.989-1005, and docs/seed-errata.md FAL-1..6.
FALCON = dict(batch_size=200, prompt_len=2048, tensor_parallel=4)  # the seed's B ~ 200, T = 4
SEED_N = 40 * 10**9  # the seed's N_params for Falcon-40B
A100_BF16 = 312 * 10**12


@pytest.fixture(scope="module")
def falcon():
    return preset_model("falcon-40b")


def test_fal1_weights(falcon):
    """FAL-1: '80GiB' is 40e9·2 = 80 GB = 74.5 GiB; the real shape 76.9 GiB, the MHA pretense 91.0."""
    assert round(SEED_N * 2 / GIB, 1) == 74.5
    weights = inference_memory(falcon, gpu("a100-80gb"), spec()).weights_bytes
    assert weights == 2 * 41_303_293_952 and round(weights / GIB, 1) == 76.9
    mha = falcon.with_overrides({"n_kv_heads": 128})
    assert round(inference_memory(mha, gpu("a100-80gb"), spec()).weights_bytes / GIB, 1) == 91.0


def test_fal2_fal3_seed_memory_formula_vs_tcalc(falcon):
    """The seed's M_total ~ (80 GiB + 4 GiB·B)/T, its formulas evaluated exactly, against tcalc.

    pN + 2pBSDL at N = 40e9: (80 GB + 4.03 GB·B)/T. At B = 200, T = 4 that is 221.3 GB per GPU
    (the seed's rounded 220 GiB; FAL-3); tcalc with the real weights and the MHA-pretense cache
    gives 222.0 GB of weights + cache, plus the prefill workspace.
    """
    p, B, S, D, L, T = 2, 200, 2048, 8192, 60, 4
    seed_per_gpu = (p * SEED_N + 2 * p * B * S * D * L) // T
    assert seed_per_gpu == 221_326_592_000
    s = spec(**FALCON, cache_kv_heads=128)
    mem = inference_memory(falcon, gpu("a100-80gb"), s)
    assert mem.kv_cache_bytes == 2 * p * B * S * D * L // T == 201_326_592_000  # 2pBSDL/T exactly
    assert mem.weights_bytes == 2 * tensor_parallel_params(falcon, 4) == 20_654_620_672
    assert mem.weights_bytes + mem.kv_cache_bytes == 221_981_212_672
    assert not mem.fits
    # FAL-3: T = 4 is not enough for B = 200 (the seed's own numbers need T >= 11); T | 128: 16
    assert min_tensor_parallel(falcon, gpu("a100-80gb"), s) == 16
    assert mem.max_batch_size == 58  # the seed: B <= 60 in 80 GiB; tcalc: 81,920 MiB (nvidia-smi), less the workspace


def test_fal3_real_falcon_kv_heads(falcon):
    """With its real 8 KV heads the cache is 16x smaller: 123.8 GiB of weights + cache (FAL-3)."""
    pretend = kv_cache(falcon, spec(**FALCON, cache_kv_heads=128))
    real = kv_cache(falcon, spec(**FALCON))
    assert pretend.total_bytes == 16 * real.total_bytes == 16 * 200 * 251_658_240
    assert round((2 * 41_303_293_952 + real.total_bytes) / GIB, 1) == 123.8
    mem = inference_memory(falcon, gpu("a100-80gb"), spec(**FALCON))
    assert mem.kv_cache_bytes == real.total_bytes // 4  # T = 4 divides 8 KV heads
    # weights + cache alone fit at T = 2; the prefill workspace for 200 x 2048 tokens needs T = 4
    half = inference_memory(falcon, gpu("a100-80gb"), spec(**{**FALCON, "tensor_parallel": 2}))
    assert half.weights_bytes + half.kv_cache_bytes <= 80 * 10**9 < half.total_bytes
    assert min_tensor_parallel(falcon, gpu("a100-80gb"), spec(**FALCON)) == 4


@pytest.mark.parametrize(
    ("part", "lam"),
    [pytest.param("a100-80gb", 153.0, id="errata FAL-6: A100 80GB lambda_math 312/2.039 = 153.0"),
     pytest.param("a100-40gb", 200.6,
                  id="errata FAL-6: A100 40GB 312/1.555 = 200.6 (the seed's ~200)")],
)
def test_fal6_weights_only_threshold(falcon, part, lam):
    """The seed's B ~ 200: 2·B·N FLOPs per p·N bytes, B* = lambda_math·p/2 (lambda_math at p=2)."""
    g = gpu(part)
    lambda_math = g.peak_flops["bf16"] / g.memory_bw_bytes_s
    assert round(lambda_math, 1) == lam
    b = weights_only_compute_bound_batch(falcon, g, spec())
    assert b == pytest.approx(lambda_math, rel=1e-4)  # weights / (2 x matmul weights): norms, 5e-5
    assert math.ceil(b) == math.ceil(lambda_math)


def test_fal4_seed_step_latency(falcon):
    """FAL-4: the seed's ~13 ms is 2·B·N/(lambda·T) = 12.8 ms; its printed pN/(lambda·T), 64 µs."""
    seed = roofline(2 * 200 * SEED_N // 4, 0, A100_BF16, gpu("a100-80gb").memory_bw_bytes_s)
    assert round(seed.compute_s * 1e3, 1) == 12.8
    assert round(2 * SEED_N / (A100_BF16 * 4) * 1e6) == 64
    s = spec(**FALCON, cache_kv_heads=128)
    step = decode_step(falcon, gpu("a100-80gb"), s, 2048)
    assert round(step.matmul_flops / A100_BF16 * 1e3, 1) == 13.2  # real N 41.30e9
    mha = decode_step(falcon.with_overrides({"n_kv_heads": 128}), gpu("a100-80gb"), s, 2048)
    assert round(mha.matmul_flops / A100_BF16 * 1e3, 1) == 15.7  # MHA pretense N 48.85e9
    assert round(mha.roofline.compute_s * 1e3, 1) == 16.3  # + attention 4·B·S·D·L/T


def test_fal5_the_step_is_memory_bound(falcon):
    """FAL-5: at T = 4, B = 200, S = 2048 with an MHA cache, memory time is ~8x compute time and no
    batch makes the step compute-bound; with the real 8 KV heads, B = 263 does."""
    g = gpu("a100-80gb")
    step = decode_step(falcon, g, spec(**FALCON, cache_kv_heads=128), 2048)
    assert step.bound == "memory"
    assert round(step.roofline.memory_s * 1e3, 1) == 108.9
    assert round(step.roofline.compute_s * 1e3, 1) == 13.9
    assert round(step.roofline.intensity, 1) == 19.5 < step.roofline.math_bandwidth
    assert compute_bound_batch(falcon, g, spec(**FALCON, cache_kv_heads=128), 2048) is None
    real = decode_step(falcon, g, spec(**FALCON), 2048)
    assert real.bound == "memory" and round(real.roofline.memory_s * 1e3, 1) == 16.3
    assert compute_bound_batch(falcon, g, spec(**FALCON), 2048) == 263


def test_falcon_estimate_end_to_end(falcon):
    est = estimate_inference(falcon, gpu("a100-80gb"), spec(**FALCON, new_tokens=128))
    assert est.decode.steps == 127 and est.decode.bound == "memory"
    assert est.kv_cache.context_len == 2048 + 127
    assert est.prefill.bound == "compute"
    assert est.prefill.comm.all_reduces == 2 * 60
    assert est.total_s == pytest.approx(est.time_to_first_token_s + est.decode.seconds)


# ============================================================================ validation
@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"batch_size": 0}, r"batch_size \(0\) must be a whole number >= 1"),
        ({"prompt_len": True}, r"prompt_len \(True\)"),
        ({"new_tokens": 1.5}, r"new_tokens \(1.5\)"),
        ({"weight_dtype": "int3"}, r"weight_dtype \('int3'\) is not supported; use one of fp32"),
        ({"kv_dtype": "tf32"}, r"kv_dtype \('tf32'\)"),
        ({"compute_dtype": "int2"}, r"compute_dtype"),
        ({"cache_kv_heads": 0}, r"cache_kv_heads \(0\)"),
        ({"collective_latency_s": -1.0}, r"collective_latency_s \(-1.0\) must be a finite number"),
        ({"kv_cache": "yes"}, r"kv_cache \('yes'\) must be true or false"),
    ],
)
def test_spec_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        spec(**kw)


def test_model_dependent_validation():
    with pytest.raises(ValueError, match=r"n_heads \(2\) must be divisible by T \(4\)"):
        kv_cache(TINY, spec(tensor_parallel=4))
    m = preset_model("falcon-40b")
    with pytest.raises(ValueError, match=r"cache_kv_heads \(3\) and T \(2\) must divide one"):
        kv_cache(m, spec(tensor_parallel=2, cache_kv_heads=3))
    with pytest.raises(ValueError, match=r"toy has no interconnect bandwidth"):
        decode_step(TINY, toy_gpu(link=None), spec(tensor_parallel=2), 2)
    with pytest.raises(ValueError, match=r"context_len \(0\)"):
        decode_step(TINY, toy_gpu(), spec(), 0)
    with pytest.raises(ValueError, match=r"bytes_moved \(-1\)"):
        roofline(1, -1, 1, 1)


# The roofline and the modules it was split into (issue 35): spec, shard, memory, step, decode.
ROOFLINE_PARTS = ("roofline", "spec", "shard", "rank_parts", "layout", "memory", "step", "decode")
# the blocks' own inference modules, which the shard asks (imported as modules of the package)
INFERENCE_BLOCKS = ("deepseek_v4", "gemma_layers", "kind_attention", "dsa", "shared_block")


@pytest.mark.parametrize("part", ROOFLINE_PARTS)
def test_module_is_pure(part):
    """Stdlib and the estimator layer only; nothing prints (STYLE.md)."""
    tree = ast.parse((REPO / "transformer_calc" / "estimators" / "inference" / f"{part}.py").read_text())
    allowed = {"transformer_calc.model.config", "transformer_calc.estimators.params", "transformer_calc.devices.hardware",
               "transformer_calc.estimators.mixers", "transformer_calc.estimators.shared_block",
               "transformer_calc.estimators.deepseek_v4", "transformer_calc.estimators.mla", "transformer_calc.estimators.gemma_layers", "transformer_calc.estimators.attention",
               "transformer_calc.estimators.inference.quant", "transformer_calc.errors", "transformer_calc.model.checkpoint", "transformer_calc.model.units", "__future__", "dataclasses", "math", "fractions",
               "collections.abc", "typing"}
    allowed |= {f"transformer_calc.estimators.inference.{p}" for p in ROOFLINE_PARTS + INFERENCE_BLOCKS}
    allowed |= {"transformer_calc.estimators.inference"}  # `from ...inference import <block module>`
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):  # or a block's refusal line (issue 35's one table)
            assert node.module in allowed | {"transformer_calc.estimators.support_table"}, node.module
        elif isinstance(node, ast.Import):
            assert all(a.name in allowed for a in node.names)
        elif isinstance(node, ast.Call):
            assert getattr(node.func, "id", None) != "print"


# ============================================================================ properties
@st.composite
def gpus(draw: st.DrawFn) -> GPU:
    return toy_gpu(
        peak=draw(st.integers(10**3, 10**15)),
        bw=draw(st.integers(10**3, 10**13)),
        memory=draw(st.integers(10**3, 10**12)),
        link=draw(st.integers(10**3, 10**12)),
    )


@st.composite
def specs(draw: st.DrawFn, m: ModelConfig | None = None) -> InferenceSpec:
    T = 1
    if m is not None:
        options = [t for t in (1, 2, 4) if not (m.n_heads % t or m.d_ff % t)
                   and not (m.n_kv_heads % t and t % m.n_kv_heads)]
        T = draw(st.sampled_from(options))
    return InferenceSpec(
        batch_size=draw(st.integers(1, 64)),
        prompt_len=draw(st.integers(1, 512)),
        new_tokens=draw(st.integers(1, 40)),
        tensor_parallel=T,
        weight_dtype=draw(st.sampled_from(["fp32", "bf16", "fp8", "int8", "int4"])),
        kv_dtype=draw(st.sampled_from([None, "fp8", "int4"])),
        compute_dtype="bf16",
        kv_cache=draw(st.booleans()),
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[ModelConfig, GPU, InferenceSpec]:
    m = draw(model_configs(max_layers=4))
    return m, draw(gpus()), draw(specs(m))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**18), st.integers(0, 10**18), st.integers(1, 10**16),
       st.integers(1, 10**13))
def test_roofline_time_is_the_max(flops, nbytes, peak, bw):
    r = roofline(flops, nbytes, peak, bw)
    assert r.seconds == max(r.compute_s, r.memory_s)
    assert (r.bound == "compute") == (r.compute_s >= r.memory_s)
    if nbytes:
        assert (r.bound == "compute") == (Fraction(flops, nbytes) >= Fraction(peak, bw))


@given(st.integers(1, 10**9), st.integers(1, 10**16), st.integers(1, 10**13))
def test_roofline_at_the_knee_compute_equals_memory(k, peak, bw):
    """At intensity = lambda_math both times are equal (and the bound reads compute)."""
    r = roofline(k * peak, k * bw, peak, bw)  # intensity = peak / bw exactly
    assert r.compute_s == r.memory_s and r.bound == "compute"
    assert r.intensity == pytest.approx(r.math_bandwidth)


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(1, 2000))
def test_decode_time_non_decreasing_in_context(case, c):
    m, g, s = case
    a, b = decode_step(m, g, s, c), decode_step(m, g, s, c + 1)
    assert b.seconds >= a.seconds and b.flops >= a.flops and b.bytes_moved >= a.bytes_moved


@settings(max_examples=80, deadline=None)
@given(cases())
def test_closed_form_decode_equals_the_explicit_loop(case):
    m, g, s = case
    d = decode(m, g, s)
    steps = [decode_step(m, g, s, s.prompt_len + j) for j in range(1, s.new_tokens)]
    assert d.flops == sum(x.flops for x in steps)
    assert d.bytes_moved == sum(x.bytes_moved for x in steps)
    assert d.compute_bound_steps == sum(x.bound == "compute" for x in steps)
    assert d.seconds == pytest.approx(sum(x.seconds for x in steps), rel=1e-12, abs=1e-300)
    assert d.comm_s == pytest.approx(sum(x.comm.seconds for x in steps), rel=1e-12, abs=1e-300)


@given(model_configs(max_layers=4), gpus(), specs())
def test_tensor_parallel_one_has_no_communication(m, g, s):
    assert s.tensor_parallel == 1
    assert tp_communication(m, g, s, 1).seconds == 0
    assert prefill_step(m, g, s).comm.all_reduces == 0


@settings(max_examples=60, deadline=None)
@given(cases())
def test_kv_per_gpu_times_T_covers_the_total(case):
    m, _, s = case
    kv = kv_cache(m, s)
    T = s.tensor_parallel
    if m.n_kv_heads % T == 0:
        assert kv.per_gpu_bytes * T == kv.total_bytes  # sharded
    else:
        assert kv.per_gpu_bytes * m.n_kv_heads == kv.total_bytes  # one replicated head per GPU


@given(model_configs(max_layers=4), specs())
def test_gqa_override_equal_to_mha_equals_mha(m, s):
    """cache_kv_heads = A caches what the same model with n_kv_heads = A caches."""
    mha = m.with_overrides({"n_kv_heads": m.n_heads})
    assert kv_cache(m, dataclasses.replace(s, cache_kv_heads=m.n_heads)) == kv_cache(mha, s)


@given(model_configs(max_layers=4), specs(), st.integers(2, 5))
def test_linear_in_batch(m, s, k):
    big = dataclasses.replace(s, batch_size=s.batch_size * k)
    assert kv_cache(m, big).total_bytes == k * kv_cache(m, s).total_bytes
    g = toy_gpu()
    a, b = decode_step(m, g, s, 9), decode_step(m, g, big, 9)
    assert b.flops == k * a.flops and b.kv_read_bytes == k * a.kv_read_bytes


@settings(max_examples=60, deadline=None)
@given(model_configs(max_layers=4), specs())
def test_prefill_attention_is_the_sum_of_decode_steps(m, s):
    """Causal attention counted exactly: prefill(S+1) = prefill(S) + the step at context S+1."""
    g = toy_gpu()
    s = dataclasses.replace(s, kv_cache=True)
    longer = dataclasses.replace(s, prompt_len=s.prompt_len + 1)
    step = decode_step(m, g, s, s.prompt_len + 1)
    assert prefill_step(m, g, longer).attention_flops == (
        prefill_step(m, g, s).attention_flops + step.attention_flops
    )


@settings(max_examples=60, deadline=None)
@given(cases())
def test_fit_limits_are_exact(case):
    m, g, s = case
    mem = inference_memory(m, g, s)
    assert mem.total_bytes == mem.weights_bytes + mem.kv_cache_bytes + mem.workspace_bytes
    cap = max(m.max_seq_len - s.new_tokens + 1, 0)  # the longest prompt the context window allows
    assert mem.fits == (s.batch_size <= mem.max_batch_size) and mem.max_prompt_len <= cap
    if s.prompt_len <= cap:
        assert mem.fits == (s.prompt_len <= mem.max_prompt_len)
    if mem.max_batch_size:
        at = dataclasses.replace(s, batch_size=mem.max_batch_size)
        over = dataclasses.replace(s, batch_size=mem.max_batch_size + 1)
        assert inference_memory(m, g, at).fits and not inference_memory(m, g, over).fits
    if mem.max_prompt_len:
        at = dataclasses.replace(s, prompt_len=mem.max_prompt_len)
        over = dataclasses.replace(s, prompt_len=mem.max_prompt_len + 1)
        assert inference_memory(m, g, at).fits
        assert mem.max_prompt_len == cap or not inference_memory(m, g, over).fits


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(1, 600))
def test_compute_bound_batch_is_the_threshold(case, c):
    m, g, s = case
    b = compute_bound_batch(m, g, s, c)
    assume(b is not None and b < 10**6)
    assert decode_step(m, g, dataclasses.replace(s, batch_size=b), c).bound == "compute"
    if b > 1:
        assert decode_step(m, g, dataclasses.replace(s, batch_size=b - 1), c).bound == "memory"


# ============================================================================ MoE: the experts a batch touches
def test_expected_experts_touched_by_hand():
    """n·(1 − (1 − k/n)^t): k at one token; the bound min(n, t·k) is above it from two tokens on."""
    from transformer_calc.estimators.inference.memory import (
        all_touched_tokens,
        expected_experts_touched,
        untouched_share,
    )

    assert untouched_share(8, 2, 8) == Fraction(3, 4) ** 8
    assert expected_experts_touched(8, 2, 8) == pytest.approx(8 * (1 - 0.75**8)) == pytest.approx(7.199, abs=1e-3)
    assert expected_experts_touched(256, 8, 32) == pytest.approx(163.31, abs=0.01)  # DeepSeek-V3 at B = 32
    for n, k in ((8, 2), (256, 8), (60, 4), (384, 8), (16, 1)):
        assert expected_experts_touched(n, k, 1) == k  # exact at one token
        for t in (2, 3, 7, 50):
            assert expected_experts_touched(n, k, t) < min(n, t * k)
        t_all = all_touched_tokens(n, k)
        assert untouched_share(n, k, t_all) == 0 < untouched_share(n, k, t_all - 1) < Fraction(1, 2**99)
    assert all_touched_tokens(8, 2) == 241 and all_touched_tokens(256, 8) == 2184
    assert expected_experts_touched(1, 1, 5) == 1 and untouched_share(4, 4, 1) == 0  # dense MLP, k = n
    assert expected_experts_touched(256, 8, 32, held=32) == pytest.approx(163.31 / 8, abs=0.01)  # one GPU of ep 8


def test_moe_weight_reads_are_the_expected_experts_bytes():
    """Mixtral, bf16: a step of t tokens reads every weight but the experts it is expected to leave idle,
    L·n·(3/4)^t of them, rounded up once; at one token exactly the k = 2 experts the bound read."""
    from transformer_calc.estimators.inference.memory import weights_read_bytes
    from transformer_calc.estimators.inference.shard import rank_shard

    m = preset_model("mixtral-8x7b")
    s = spec()
    sh = rank_shard(m, s)
    every = weights_read_bytes(sh, s, None)
    expert = sh.moe_layers * sh.expert_params * 2  # one expert in every MoE layer, bf16 bytes
    assert every - weights_read_bytes(sh, s, 1) == 6 * expert
    assert every - weights_read_bytes(sh, s, 8) == math.floor(8 * Fraction(3, 4) ** 8 * expert)
    reads = [weights_read_bytes(sh, s, t) for t in (1, 2, 4, 8, 16, 64, 240, 241)]
    assert reads == sorted(reads) and reads[-1] == every and reads[-3] < every  # under a byte idle at t = 240
    # DP attention (T = 1, ep = 4): each GPU's 2 experts serve the 4 groups' tokens, 4·t routed
    s4 = spec(expert_parallel=4)
    sh4 = rank_shard(m, s4)
    idle = weights_read_bytes(sh4, s4, None) - weights_read_bytes(sh4, s4, 2)
    assert idle == math.floor(2 * Fraction(3, 4) ** 8 * expert)


def test_moe_decode_batch_and_naive_sum_follow_the_expected_experts():
    """compute_bound_batch is the smallest compute-bound B with the expected reads (bisected), and a
    naive-mode MoE decode sums its steps, whose touched experts grow with the context, exactly."""
    m = ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6, "n_experts": 8, "experts_per_token": 2,
                                    "moe_d_ff": 16})
    g = toy_gpu(peak=1000, bw=400, memory=10**9)  # lambda 2.5 FLOP per byte: compute-bound at a few sequences
    s = spec(prompt_len=4, new_tokens=2)
    b = compute_bound_batch(m, g, s)
    assert b == 9  # 8·(1 − (3/4)^9) = 7.40 experts touched: below every expert's bytes
    assert decode_step(m, g, dataclasses.replace(s, batch_size=b), 5).bound == "compute"
    assert decode_step(m, g, dataclasses.replace(s, batch_size=b - 1), 5).bound == "memory"
    # B = 2: every expert is read from context 121 on (2·121 >= 241 tokens), a polynomial piece after it
    naive = spec(prompt_len=3, new_tokens=150, kv_cache=False, batch_size=2)
    d = decode(m, g, naive)
    steps = [decode_step(m, g, naive, c) for c in range(4, 153)]
    assert d.bytes_moved == sum(x.bytes_moved for x in steps) and d.flops == sum(x.flops for x in steps)
    assert d.seconds == pytest.approx(sum(x.seconds for x in steps), rel=1e-12)
    assert steps[0].weight_bytes < steps[5].weight_bytes < steps[-1].weight_bytes  # 8, 18, 304 tokens' experts
