"""DeepSeek-V4 inference (estimators/inference/deepseek_v4.py; docs/formulas.md §5.16 "Inference"): the decode
state against the bytes transformers 5.23's cache holds (tools/crosscheck/kv_cache_deepseek_v4.py -v, its first
case, 2 sequences; the numbers are fixtures here, the suite needs no torch), and the prefill and decode-step
rooflines derived by hand from `cache_elements` and `forward_flops`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from test_deepseek_v4 import CACHE_CFG, model
from test_inference import toy_gpu
from transformer_calc.errors import TcalcError
from transformer_calc.estimators import deepseek_v4 as v4
from transformer_calc.estimators.inference import deepseek_v4 as inf
from transformer_calc.model.units import FLOPS_PER_MAC

M = model(CACHE_CFG)  # L 4 (sliding, CSA, HCA, CSA), D 32, A 4, h_d 8, V 300, E 4, k 2, F 12, W 6, m 4, m' 8, d_I 4, H_I 2
GPU = toy_gpu(peak=10**12, bw=10**9, memory=10**7)

# kv_cache_deepseek_v4.py -v, case "sliding, CSA m=4, HCA m'=8, W=6", prompt S = 13, 2 sequences: the bytes of
# every tensor transformers 5.23's cache holds after the prompt and after each decode step (torch 2.13, CPU)
MEASURED = {"fp32": [5184, 6080, 6976, 4032, 4928, 5824, 6720], "bf16": [2592, 3040, 3488, 2016]}


@pytest.mark.parametrize("dtype", sorted(MEASURED))
def test_state_bytes_equal_transformers_cache(dtype: str) -> None:
    for step, measured in enumerate(MEASURED[dtype]):
        assert 2 * inf.state_bytes(M, 13 + step, dtype) == measured


def test_decode_step_by_hand() -> None:
    """B = 2, the token at c = 19, bf16 weights and state."""
    s = inf.decode_step(M, GPU, 2, 19)
    f = v4.forward_flops(M, 2, 1)
    matmuls = 20480 + 12288 + 10240 + 116736 + 36864 + 18432 + 2048 + 5632  # forward_flops(B 2, S 1) less its cores
    assert matmuls == f.blocks - f.attention_cores + f.indexer + f.idle_compressors
    lm_head = 2 * 2 * 32 * 300
    # 2·2·B·A·h_d per key: min(19, W 6) window keys in all 4 layers, 19 // 4 = 4 entries on each CSA layer, 19 // 8 = 2 on HCA
    cores = 2 * 2 * 2 * 4 * 8 * (4 * 6 + 2 * 4 + 2)
    scoring = 2 * 2 * 2 * 2 * 4 * 4  # 2 CSA indexers: 2·B·H_I·d_I per entry, 4 entries
    assert s.attention_flops == cores + scoring == 8960
    assert s.flops == matmuls + lm_head + cores + scoring == 270080
    assert s.weight_bytes == 2 * (80909 - 9600)  # every parameter but the embedding (B·k = 4 = E: all experts), bf16
    assert s.state_read_bytes == 2 * 2 * 728 == 5824 // 2  # the state at 18 tokens (fixture: fp32 5,824 bytes)
    # the token's window entry (h_d, 2·h_d on the sliding-only layer) and its kv and gate in the open windows
    assert s.state_write_bytes == 2 * 2 * (8 * (2 + 3) + 2 * (2 * 2 * (8 + 4) + 8)) == 608
    assert s.roofline.bytes_moved == 142618 + 2912 + 608 and s.roofline.bound == "memory"
    assert s.roofline.seconds == 146138 / 10**9


def test_prefill_by_hand() -> None:
    """B = 2 prompts of S = 13: forward_flops plus the LM head; the states at 13 tokens written."""
    s = inf.prefill(M, GPU, 2, 13)
    f = v4.forward_flops(M, 2, 13)
    lm_head = FLOPS_PER_MAC * 2 * 13 * 32 * 300
    assert s.flops == f.blocks + f.indexer + f.idle_compressors + lm_head
    # cores 2·2·B·A·S·(S + T)·h_d: sliding T 0, CSA 13 // 4 = 3 (twice), HCA 13 // 8 = 1; indexers 2·B·S·H_I·T·d_I
    cores = 2 * 2 * 2 * 4 * 13 * 8 * (13 + 2 * 16 + 14)
    assert s.attention_flops == cores + 2 * 2 * 2 * 13 * 2 * 3 * 4 == 198848
    assert s.state_write_bytes == MEASURED["bf16"][0] and s.state_read_bytes == 0


def test_idle_experts_not_read() -> None:
    """B = 1: k = 2 of the 4 experts touched per layer; the other 2 (3·D·F each, 4 layers) are not read."""
    assert inf.weight_read_params(M, 1) == 80909 - 9600 - 4 * 2 * 3 * 32 * 12


def test_memory_by_hand() -> None:
    mem = inf.memory(M, GPU, 2, 19)
    assert (mem.weights_bytes, mem.state_bytes_per_sequence, mem.state_bytes) == (2 * 80909, 1680, 3360)
    assert mem.max_batch_size == (10**7 - 161818) // 1680 == 5856 and mem.fits


@settings(max_examples=40, deadline=None)
@given(c=st.integers(2, 5))
def test_appended_is_the_growth_before_any_window_closes(c: int) -> None:
    """Below the sliding window (6) and the first CSA window (4 tokens): the state grows by what a token appends."""
    if c % 4 == 0:
        return
    grown = v4.cache_elements(M, c).total - v4.cache_elements(M, c - 1).total
    assert inf.appended_elements(M, c) == grown


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 64), c=st.integers(2, 10_000))
def test_decode_grows_with_batch_and_context(B: int, c: int) -> None:
    a, b = inf.decode_step(M, GPU, B, c), inf.decode_step(M, GPU, B + 1, c)
    assert b.flops > a.flops and b.state_read_bytes >= a.state_read_bytes
    assert inf.decode_step(M, GPU, B, c + 8).attention_flops > a.attention_flops  # one more entry per m, m'


@pytest.mark.parametrize("call, field", [
    (lambda: inf.decode_step(M, GPU, 0, 5), "batch_size"), (lambda: inf.decode_step(M, GPU, 1, 1), "context_len"),
    (lambda: inf.prefill(M, GPU, 1, 4, weight_dtype="int3"), "weight_dtype"),
    (lambda: inf.state_bytes(M, 4, "q4_0"), "state_dtype"),
    (lambda: inf.memory(model({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
                                 "intermediate_size": 128, "vocab_size": 100}), GPU, 1, 4), "deepseek_v4"),
])
def test_bad_input_names_the_field(call, field: str) -> None:
    with pytest.raises(TcalcError, match=field):
        call()


@settings(max_examples=60, deadline=None)
@given(B=st.integers(1, 6), S=st.integers(1, 50), N=st.integers(1, 40), dtype=st.sampled_from(["bf16", "fp32", "fp8"]))
def test_decode_totals_equal_the_steps_summed(B: int, S: int, N: int, dtype: str) -> None:
    """The closed form equals the N - 1 steps summed one by one (a test may loop; the estimator does not),
    and the per-step roofline times summed lie within its bracket."""
    d = inf.decode_totals(M, GPU, B, S, N, state_dtype=dtype)
    steps = [inf.decode_step(M, GPU, B, c, state_dtype=dtype) for c in range(S + 1, S + N)]
    assert (d.steps, d.flops, d.bytes_moved) == (N - 1, sum(s.flops for s in steps), sum(s.roofline.bytes_moved for s in steps))
    seconds = sum(s.roofline.seconds for s in steps)
    assert d.min_s <= seconds * (1 + 1e-12) and seconds <= d.max_s * (1 + 1e-12)


def test_decode_totals_by_hand() -> None:
    """B = 2 after a prompt of 13: the steps at c = 14 .. 19. Window keys 6 per layer each step; CSA entries
    3, 3, 4, 4, 4, 4 (c // 4); HCA 1, 1, 2, 2, 2, 2 (c // 8)."""
    d = inf.decode_totals(M, GPU, 2, 13, 7)
    per_key, score = 2 * 2 * 2 * 4 * 8, 2 * 2 * 2 * 4
    fixed = 222720 + 2 * 2 * 32 * 300  # matmuls and LM head per step (test_decode_step_by_hand)
    assert d.flops == 6 * fixed + per_key * (6 * 4 * 6 + 2 * 22 + 10) + score * 2 * 22
    # the states at 13 .. 18 tokens read (fixtures: fp32 bytes / 2 for bf16) and 6 x 608 appended
    assert d.bytes_moved == 6 * 142618 + sum(MEASURED["fp32"][:6]) // 2 + 6 * 608


def test_decode_totals_refuse_a_sub_byte_state() -> None:
    with pytest.raises(TcalcError, match="state_dtype"):
        inf.decode_totals(M, GPU, 1, 4, 3, state_dtype="int4")
