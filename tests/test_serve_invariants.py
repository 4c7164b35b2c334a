"""Serving answers that never contradict themselves (issue 34): properties of `serving.load_point`
over random presets, GPUs, T, prompt and output lengths and concurrencies, and of `tcalc serve`'s JSON.

Conventions (serving.load_point): a closed loop of C sequences in flight; E2E = TTFT + (O − 1)·TPOT
(the first of the O output tokens comes from the prefill); requests/s X = C / E2E (Little's law);
output tokens/s = X·O. Tolerance: relative 1e-9 (the figures are derived from one another, so only
float rounding separates them)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer_calc.estimators.inference.engines import default_kv_dtype
from transformer_calc.estimators.inference.expected import default_efficiency, estimate_expected
from transformer_calc.estimators.inference.roofline import InferenceSpec
from transformer_calc.estimators.inference.serving import capacity, engine_serving, load_point, sequence_limit
from transformer_calc.sources.presets import gpu, preset_model

REL = 1e-9
PRESETS = ("llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-30b-a3b", "gpt2")
GPUS = ("h100", "a100-80gb", "h200")
ENGINES = ("vllm", "sglang", "trtllm")


@st.composite
def workloads(draw: st.DrawFn) -> tuple:
    """A model, GPU, engine, T and request shape whose cache holds at least one sequence, and a
    concurrency the engine can keep in flight (KV cache, max_num_seqs, the step budget)."""
    m = preset_model(draw(st.sampled_from(PRESETS)))
    g = gpu(draw(st.sampled_from(GPUS)))
    engine = draw(st.sampled_from(ENGINES))
    T = draw(st.sampled_from([t for t in (1, 2, 4, 8) if m.n_heads % t == 0 and m.n_kv_heads % t == 0] or [1]))
    P = draw(st.integers(16, 6000))
    O = draw(st.integers(2, 2000))
    spec = InferenceSpec(batch_size=1, prompt_len=P, new_tokens=O, tensor_parallel=T)
    serving = engine_serving(engine, g, T)
    if not serving.chunked_prefill and P >= serving.max_num_batched_tokens:
        serving = engine_serving(engine, g, T, chunked_prefill=True)
    cap = capacity(m, g, spec, serving)
    b_max = min(cap.max_concurrent_sequences, sequence_limit(serving, cap),
                serving.max_num_batched_tokens * O // (O + P))
    if cap.kv_budget_bytes < 0 or b_max < 1:
        b_max = 0
    C = draw(st.integers(1, max(b_max, 1)))
    return m, g, spec, serving, P, O, C, b_max


FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(workloads())
def test_littles_law_and_steady_state(w: tuple) -> None:
    """Little's law (X = C / E2E), E2E = TTFT + (O − 1)·TPOT, tokens/s = X·O = C / TPOT ·
    O / (O − 1 + TTFT / TPOT) (-> C / TPOT as decode dominates: O large against TTFT / TPOT); TTFT <= E2E <= the time to complete the batch
    (C requests at X: C / X); the queue and the prefill inside TTFT."""
    m, g, spec, serving, P, O, C, b_max = w
    if b_max < 1:
        return
    p = load_point(m, g, spec, default_efficiency(g), serving, P, O, C)
    assert p.e2e_s == pytest.approx(p.ttft_s + (O - 1) * p.tpot_s, rel=REL)
    assert p.requests_per_s == pytest.approx(C / p.e2e_s, rel=REL)  # Little's law
    assert p.output_tokens_per_s == pytest.approx(p.requests_per_s * O, rel=REL)
    assert p.output_tokens_per_s == pytest.approx(C / p.tpot_s * O / (O - 1 + p.ttft_s / p.tpot_s), rel=REL)
    batch_s = C * O / p.output_tokens_per_s  # the whole batch's output at the printed rate
    assert 0 < p.ttft_s <= p.e2e_s <= batch_s * (1 + REL)
    assert p.queue_s >= 0 and p.prefill_s > 0 and p.ttft_s >= p.prefill_s + p.queue_s
    assert 1 <= p.decode_batch <= C


@FAST
@given(workloads())
def test_one_step_model_serve_at_one_sequence_is_inference(w: tuple) -> None:
    """`serve` at one sequence in flight and `inference` at B = 1 for the same prompt: the same
    prefill (TTFT, when the prompt fits one step) and the same decode step (TPOT at a 2-token output,
    whose one decode step is at context P + 1 in both)."""
    m, g, spec, serving, P, _, _, b_max = w
    if b_max < 1:
        return
    eff = default_efficiency(g)
    two = dataclasses.replace(spec, new_tokens=2)
    p = load_point(m, g, two, eff, serving, P, 2, 1)
    x = estimate_expected(m, g, two, eff)
    assert p.tpot_s == pytest.approx(x.time_per_output_token_s, rel=1e-9)
    if P <= serving.max_num_batched_tokens:
        assert p.ttft_s == pytest.approx(x.time_to_first_token_s, rel=1e-9)


@pytest.mark.parametrize("engine, weight, kv", [
    ("trtllm", "fp8", "fp8"), ("trtllm", "nvfp4", "fp8"), ("trtllm", "bf16", None),
    ("vllm", "fp8", None), ("sglang", "nvfp4", None), (None, "fp8", None),
])
def test_kv_dtype_default_is_the_engines(engine: str | None, weight: str, kv: str | None) -> None:
    """TensorRT-LLM quantizes the cache to fp8 with ModelOpt fp8/nvfp4 checkpoints; vLLM and SGLang
    ('auto') keep the model's dtype; no engine: the activation dtype. Each with its source."""
    dtype, source = default_kv_dtype(engine, weight)
    assert dtype == kv and source


README_BENCH = ["serve", "--preset", "llama-3.1-8b", "--gpu", "h100", "--gpus", "1", "--T", "1", "--prompt-len", "128",
                "--output-len", "128", "--engine", "trtllm", "--weight-dtype", "fp8", "--kv-dtype", "fp8",
                "--bench-batch-limits", "--memory-utilization", "0.95"]


def test_readme_bench_batch_limits_example_is_consistent(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's `--bench-batch-limits` example (issue 34 printed TTFT 316 s beside a batch that
    completes in 18 s): TTFT below the batch's completion time, Little's law on the printed row, and
    no "meets targets" claim without targets."""
    from transformer_calc.cli import run

    assert run([*README_BENCH, "-f", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    best = out["best"]
    O, C = 128, best["concurrency"]
    batch_s = C * O / best["tokens_per_s"]  # C requests of O tokens at the printed rate
    assert best["ttft_s"] < batch_s
    assert best["e2e_s"] == pytest.approx(best["ttft_s"] + (O - 1) * best["tpot_s"], rel=REL)
    assert best["requests_per_s"] == pytest.approx(C / best["e2e_s"], rel=REL)
    assert out["serve"]["targets"] == {"ttft_s": None, "tpot_s": None}
    assert "meets targets" not in json.dumps(out)
    assert run(README_BENCH) == 0
    text = capsys.readouterr().out
    assert "meets" not in text and "targets: none" in text  # no targets: the verdict is "fits" (issue 38: one word, no wrap)


def test_trtllm_fp8_weights_default_to_an_fp8_cache_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --kv-dtype, `serve --engine trtllm --weight-dtype fp8` runs an fp8 cache (TensorRT-LLM's
    default for a ModelOpt fp8 checkpoint) and prints where that comes from; the same answer as with
    --kv-dtype fp8 given. vLLM keeps bf16."""
    from transformer_calc.cli import run

    i = README_BENCH.index("--kv-dtype")
    argv = README_BENCH[:i] + README_BENCH[i + 2:]  # the README example without --kv-dtype fp8
    assert run([*argv, "-f", "json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["serve"]["kv_dtype"] == "fp8" and "kv_cache_quant_algo" in default["serve"]["kv_dtype_source"]
    assert run([*README_BENCH, "-f", "json"]) == 0
    given_ = json.loads(capsys.readouterr().out)
    assert given_["serve"]["kv_dtype_source"] == "given" and given_["best"] == default["best"]
    vllm = [a if a != "trtllm" else "vllm" for a in argv if a != "--bench-batch-limits"]
    assert run([*vllm, "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["serve"]["kv_dtype"] == "bf16"
