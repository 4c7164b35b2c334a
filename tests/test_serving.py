"""Serving (transformer_calc/estimators/inference/serving.py): the paged KV cache worked by hand, the capacity
invariants as properties, the continuous-batching model, and `tcalc serve`'s acceptance."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.inference.expected import default_efficiency
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode_step, kv_cache
from transformer_calc.sources.presets import gpu, preset_model
from transformer_calc.estimators.inference.serving import (
    CUDA_CONTEXT_BYTES,
    ServingSpec,
    activation_peak_bytes,
    capacity,
    kv_sequence_bytes,
    load_point,
    longest_context,
    search,
)

from test_inference import cases, toy_gpu

MIB, GIB = 2**20, 2**30


def test_paged_sequence_bytes_by_hand():
    # Llama-2-7B: 32 layers x 2 x 4096 x 2 B = 512 KiB per token; 1000 tokens in blocks of 16 take
    # ceil(1000/16) = 63 blocks = 1008 token slots.
    m = preset_model("llama-2-7b")
    spec = InferenceSpec(batch_size=1, prompt_len=1000)
    assert kv_sequence_bytes(m, spec, ServingSpec(), 1000) == 1008 * 524_288
    assert kv_sequence_bytes(m, spec, ServingSpec(block_size=1), 1000) == kv_cache(m, spec, 1000).per_gpu_bytes


def test_sliding_layers_hold_their_window_in_blocks():
    # gpt-oss-20b: 12 sliding (W = 128) + 12 full layers, 8 K/V heads x 64: 2·8·64·2 B = 2 KiB per
    # token and layer. At 10,000 tokens a sliding layer holds ceil(128/16) + 1 = 9 blocks, a full
    # layer ceil(10000/16) = 625.
    m = preset_model("gpt-oss-20b")
    spec = InferenceSpec(batch_size=1, prompt_len=10_000, weight_dtype="mxfp4")
    per_layer_token = 2 * 8 * 64 * 2
    assert kv_sequence_bytes(m, spec, ServingSpec(), 10_000) == per_layer_token * 16 * (12 * 9 + 12 * 625)


def test_capacity_by_hand_on_llama_3_1_8b():
    m, h100 = preset_model("llama-3.1-8b"), gpu("h100")
    spec = InferenceSpec(batch_size=1, prompt_len=2000, new_tokens=501)  # peak context 2500
    serving = ServingSpec()
    cap = capacity(m, h100, spec, serving)
    usable = int(81089 * 2**20 * 0.9)  # the H100's memory as CUDA reports it (hardware.yaml memory_mib)
    weights = 8_030_261_248 * 2
    act = activation_peak_bytes(m, spec, serving)
    assert cap.kv_budget_bytes == usable - weights - CUDA_CONTEXT_BYTES - act - 512 * MIB
    # 32 layers x 2 x 8 heads x 128 x 2 B = 128 KiB per token; a block of 16 tokens = 2 MiB.
    assert cap.block_bytes == 16 * 131_072
    assert cap.kv_blocks == cap.kv_budget_bytes // (2 * MIB)
    assert cap.sequence_bytes == 157 * 2 * MIB  # ceil(2500 / 16) = 157 blocks
    assert cap.max_concurrent_sequences == cap.kv_budget_bytes // (157 * 2 * MIB)
    # Activation peak: 8192 tokens x (2·4096 + 2·14336) x 2 B + 2 x 256 x 128256 x 4 B (logits, probs).
    assert act == 8192 * (2 * 4096 + 2 * 14336) * 2 + 2 * 256 * 128_256 * 4


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(1, 10**12), st.integers(0, 10**12))
def test_more_memory_never_fewer_sequences(case, memory, extra):
    m, g, s = case
    small = capacity(m, g.model_copy(update={"memory_bytes": memory}), s, ServingSpec(activation_peak_bytes=0))
    big = capacity(m, g.model_copy(update={"memory_bytes": memory + extra}), s, ServingSpec(activation_peak_bytes=0))
    assert big.max_concurrent_sequences >= small.max_concurrent_sequences
    assert big.kv_blocks >= small.kv_blocks


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(1, 5000), st.integers(0, 5000))
def test_a_longer_context_never_more_sequences(case, c, more):
    m, g, s = case
    serving = ServingSpec(activation_peak_bytes=0, cuda_context_bytes=0, engine_workspace_bytes=0)
    g = g.model_copy(update={"memory_bytes": 10**13})
    short = capacity(m, g, dataclasses.replace(s, prompt_len=c, new_tokens=1), serving)
    long = capacity(m, g, dataclasses.replace(s, prompt_len=c + more, new_tokens=1), serving)
    assert long.max_concurrent_sequences <= short.max_concurrent_sequences


@settings(max_examples=40, deadline=None)
@given(cases(), st.integers(1, 64))
def test_longest_context_is_the_boundary(case, n):
    m, g, s = case
    serving = ServingSpec()
    budget = 10**9
    c = longest_context(m, s, serving, budget, n)
    if c:
        assert n * kv_sequence_bytes(m, s, serving, c) <= budget
    if 0 < c < m.max_seq_len:
        assert n * kv_sequence_bytes(m, s, serving, c + 1) > budget


def test_load_point_by_hand_without_prefill_interference():
    """B = 8 sequences, 100-token prompts, 1000-token outputs on the toy model: TPOT >= the bound's
    decode step; the other 7 bring 7·P·f/(O − 1) prompt tokens per decode step (f, the share of a
    life spent decoding); throughput and requests/s by Little's law from TTFT and TPOT."""
    m = ModelConfig.model_validate({"L": 2, "D": 64, "A": 4, "V": 100, "K": 4096})
    g = toy_gpu(peak=10**15, bw=10**12, memory=10**11, link=10**11)
    spec = InferenceSpec(batch_size=1, prompt_len=100, new_tokens=1000)
    eff = default_efficiency(g)
    p = load_point(m, g, spec, eff, ServingSpec(), 100, 1000, 8)
    bound = decode_step(m, g, dataclasses.replace(spec, batch_size=p.decode_batch), 100 + 500)
    assert p.tpot_s >= bound.seconds
    f = 999 * p.tpot_s / p.e2e_s
    assert p.prefill_tokens_per_step == pytest.approx(7 * 100 * f / 999, rel=1e-6)
    assert p.e2e_s == pytest.approx(p.ttft_s + 999 * p.tpot_s, rel=1e-12)
    assert p.requests_per_s == pytest.approx(8 / p.e2e_s, rel=1e-12)
    assert p.output_tokens_per_s == pytest.approx(8 * 1000 / p.e2e_s, rel=1e-12)
    # TTFT: half a step + one prefill step (100 tokens < 8192 - 8) + the queue
    assert p.ttft_s == pytest.approx(p.tpot_s / 2 + p.prefill_s + p.queue_s, rel=1e-12)


def test_tpot_grows_with_concurrency():
    m, h100 = preset_model("llama-3.1-8b"), gpu("h100")
    spec = InferenceSpec(batch_size=1, prompt_len=1000, new_tokens=200)
    eff = default_efficiency(h100)
    times = [load_point(m, h100, spec, eff, ServingSpec(), 1000, 200, b).tpot_s for b in (1, 8, 64, 256)]
    assert times == sorted(times)


def test_serve_acceptance_llama_3_1_70b_on_8_h100():
    """The issue's acceptance command answers with feasible layouts and their throughput."""
    m, h100 = preset_model("llama-3.1-70b"), gpu("h100")
    spec = InferenceSpec(batch_size=1, prompt_len=2000, new_tokens=500)
    layouts = search(m, h100, spec, default_efficiency(h100), ServingSpec(), gpus=8, prompt_len=2000,
                     output_len=500, ttft_s=1.0, tpot_s=0.05)
    feasible = [x for x in layouts if x.meets_targets]
    assert {x.tensor_parallel for x in feasible} == {2, 4, 8}  # T = 2: 65.7 GiB of bf16 weights in 79.19 GiB
    for x in feasible:
        assert x.point.tpot_s <= 0.05 and x.point.ttft_s <= 1.0
        assert x.point.concurrency <= x.capacity.max_concurrent_sequences
        # The largest B that meets the targets: one more breaks TPOT or does not fit.
        if x.point.concurrency < min(x.capacity.max_concurrent_sequences, 256):
            nxt = load_point(m, h100, dataclasses.replace(spec, tensor_parallel=x.tensor_parallel),
                             default_efficiency(h100), ServingSpec(), 2000, 500, x.point.concurrency + 1)
            assert nxt.tpot_s > 0.05 or nxt.ttft_s > 1.0
    assert feasible[0].tokens_per_s >= feasible[-1].tokens_per_s
    rejected = {x.tensor_parallel: x.reason for x in layouts if not x.meets_targets}
    assert set(rejected) == {1} and all("does not fit" in r for r in rejected.values())


def test_request_rate_picks_the_smallest_concurrency_that_serves_it():
    m, h100 = preset_model("llama-3.1-8b"), gpu("h100")
    spec = InferenceSpec(batch_size=1, prompt_len=1000, new_tokens=200)
    eff = default_efficiency(h100)
    (best, *_) = search(m, h100, spec, eff, ServingSpec(), gpus=1, prompt_len=1000, output_len=200,
                        ttft_s=None, tpot_s=None, request_rate=5.0)
    assert best.point.requests_per_s >= 5.0
    below = load_point(m, h100, spec, eff, ServingSpec(), 1000, 200, best.point.concurrency - 1)
    assert below.requests_per_s < 5.0
    over = search(m, h100, spec, eff, ServingSpec(), gpus=1, prompt_len=1000, output_len=200,
                  ttft_s=None, tpot_s=None, request_rate=1e6)
    assert not over[0].meets_targets and over[0].reason.startswith("overloaded")


def test_cli_serve_json(capsys):
    from transformer_calc.cli import run

    argv = ["serve", "--preset", "llama-3.1-70b", "--gpu", "h100", "--gpus", "8", "--prompt-len", "2000",
            "--output-len", "500", "--ttft", "1", "--tpot", "0.05", "-f", "json"]
    assert run(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"]["feasible"] and out["best"]["tokens_per_s"] > 0
    assert out["best"]["tokens_per_s_per_gpu"] == pytest.approx(out["best"]["tokens_per_s"] / 8)
    assert [r["tensor"] for r in out["layouts"] if not r["feasible"]] == [1]
    assert run(argv[:-2]) == 0 and "meets targets" in capsys.readouterr().out


def test_cli_inference_serving_section(capsys):
    from transformer_calc.cli import run

    argv = ["inference", "--preset", "llama-3.1-8b", "--gpu", "h100", "--S", "2000", "--new-tokens", "501", "-f", "json"]
    assert run(argv) == 0
    base = json.loads(capsys.readouterr().out)["serving"]
    assert run([*argv, "--memory-utilization", "0.5", "--cuda-context", "1GiB"]) == 0
    less = json.loads(capsys.readouterr().out)["serving"]
    assert less["per_gpu"]["cuda_context_bytes"] == GIB
    assert less["max_concurrent_sequences"] < base["max_concurrent_sequences"]
    assert base["budget_matrix"]["contexts"][0] == 1024 and base["budget_matrix"]["contexts"][-1] == 131072
    assert run([*argv[:-2], "--no-kv-cache", "-f", "json"]) == 0
    assert "serving" not in json.loads(capsys.readouterr().out)


def test_prefill_queue_wait_is_the_pk_fixed_point():
    """TTFT under load = half a step + the prompt's own prefill + the M/D/1 wait behind the other
    C − 1 sequences' prompts (Pollaczek-Khinchine: the server takes L = budget − decodes tokens per
    prefill step, a prompt P/L of it), at the fixed point of cycle and wait. At C = 1 the engine is
    idle between the sequence's requests: no residual step, no queue."""
    m, h100 = preset_model("llama-3.1-8b"), gpu("h100")
    spec = InferenceSpec(batch_size=1, prompt_len=4000, new_tokens=100)
    eff = default_efficiency(h100)
    one = load_point(m, h100, spec, eff, ServingSpec(), 4000, 100, 1)
    assert one.queue_s == 0 and one.ttft_s == pytest.approx(one.prefill_s)
    p = load_point(m, h100, spec, eff, ServingSpec(), 4000, 100, 32)
    assert p.ttft_s == pytest.approx(p.tpot_s / 2 + p.prefill_s + p.queue_s)
    others = round(31 * 99 * p.tpot_s / p.e2e_s)  # the others decoding beside the prefill
    service = 4000 / (8192 - others) * p.prefill_step_s
    rho = 31 * service / p.e2e_s
    assert 0 < rho < 1
    assert p.queue_s == pytest.approx(rho * service / (2 * (1 - rho)), rel=1e-6)


def test_serve_reads_the_job_files_inference_section(tmp_path, capsys):
    from transformer_calc.cli import run

    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: llama-3.1-8b}\ninference: {S: 1000, new_tokens: 200, gpu: h100, gpus: 2, "
                   "tpot_s: 0.03, ttft_s: 0.5, memory_utilization: 0.85, block_size: 32}\n")
    assert run(["serve", "--config", str(job), "-f", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["serve"]["prompt_len"] == 1000 and out["serve"]["gpus"] == 2
    assert out["serve"]["targets"] == {"ttft_s": 0.5, "tpot_s": 0.03}
    assert out["serve"]["engine"]["block_size"] == 32 and out["serve"]["engine"]["memory_utilization"] == 0.85
    assert out["best"]["tpot_s"] <= 0.03
    # Flags win over the file.
    assert run(["serve", "--config", str(job), "--tpot", "0.02", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["serve"]["targets"]["tpot_s"] == 0.02
