"""Training FLOPs, MFU and compute-optimal sizing: hand-checked tiny models, published closed forms
and runs, and invariants.

Exact ints throughout; the published closed forms are compared in exact rational arithmetic
(fractions.Fraction). The default convention (every matmul in full) was checked against
torch.utils.flop_counter.FlopCounterMode (torch 2.13, transformers 5.23, eager attention): the
FLOPCOUNTER rows below are those runs' totals.
"""

from __future__ import annotations

import ast
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import importlib

flops_module = importlib.import_module("transformer_calc.estimators.flops")
from transformer_calc.model.config import ModelConfig, Recompute, Workload
from transformer_calc.estimators.flops import (
    BACKWARD_PER_FORWARD,
    FLOPS_PER_MAC,
    TOKENS_PER_PARAM_CHINCHILLA,
    achieved_flops_per_gpu,
    chinchilla_for_flops,
    chinchilla_for_params,
    count_flops,
    gpu_hours,
    hardware_flops,
    hfu,
    layer_flops,
    mfu,
    mfu_from_throughput,
    model_flops,
    palm_flops_per_token,
    seed_model_flops,
    six_n_flops_per_token,
    train_flops_for_tokens,
    training_time_s,
)
from transformer_calc.estimators.params import count_params
from transformer_calc.sources.presets import preset_model

from conftest import model_configs

# A model small enough to count by hand: L=2, D=8, A=2 (head_dim 4), d_ff=32, V=10, K=6.
TINY = {"L": 2, "D": 8, "A": 2, "V": 10, "K": 6}
W = Workload(seq_len=3, batch_size=2)  # B·S = 6 tokens

A100_BF16 = 312 * 10**12  # dense, FLOP/s (Korthikanti et al. 2022, footnote: A100 peak 312 TFLOP/s)
TPU_V4_BF16 = 275 * 10**12  # per chip (Chowdhery et al. 2022, sec. 4.1)


def tiny(**overrides: object) -> ModelConfig:
    return ModelConfig.model_validate({**TINY, **overrides})


# ============================================================================ by hand
def test_tiny_gpt_style_by_hand():
    s = count_flops(tiny(), W)
    assert s.layer.qkv == 2 * 6 * 8 * (2 + 2 * 2) * 4 == 2304  # 3 x 2·B·S·D²
    assert s.layer.scores == s.layer.reweight == 2 * 2 * 3 * 3 * 2 * 4 == 288  # 2·B·S²·A·h_d
    assert s.layer.attn_out == 2 * 6 * 8 * 8 == 768
    assert s.layer.mlp == 2 * 6 * 8 * 32 * 2 == 6144
    assert s.layer.router == 0
    assert s.layer.total == 2304 + 576 + 768 + 6144 == 9792
    assert s.lm_head == 2 * 6 * 8 * 10 == 960 and s.embedding_projection == 0
    assert s.forward == 2 * 9792 + 960 == 20544
    assert s.backward == 2 * 20544
    assert s.total == 3 * 20544 == 61632
    assert s.per_token == 61632 // 6 == 10272


def test_tiny_llama_style_by_hand():
    m = tiny(n_kv_heads=1, d_ff=12, mlp="swiglu", norm="rmsnorm", bias=False, tied_embeddings=False,
             positional="rotary")  # fmt: skip
    lf = layer_flops(m, W)
    assert lf.qkv == 2 * 6 * 8 * (2 + 2 * 1) * 4 == 1536  # q 8 wide, k and v 4 wide each
    assert lf.scores == 288  # GQA: every query head still attends over all S keys
    assert lf.mlp == 2 * 6 * 8 * 12 * 3 == 3456  # gate, up, down
    assert count_flops(m, W).total == 3 * (2 * (1536 + 576 + 768 + 3456) + 960) == 40896


def test_tiny_moe_by_hand():
    m = tiny(n_experts=4, experts_per_token=2, mlp="swiglu", bias=False, d_ff=12)
    lf = layer_flops(m, W)
    assert lf.mlp == 2 * 6 * 8 * 12 * 3 * 2 == 6912  # two active experts, not four
    assert lf.router == 2 * 6 * 8 * 4 == 384  # every token scores all four experts


def test_tiny_opt_projections_by_hand():
    s = count_flops(tiny(d_embed=4), W)
    assert s.lm_head == 2 * 6 * 4 * 10 == 480  # the head is d_embed wide
    assert s.embedding_projection == 2 * (2 * 6 * 8 * 4) == 768  # project_in + project_out


def test_tiny_causal_by_hand():
    s = count_flops(tiny(), W, causal=True)
    assert s.layer.scores == s.layer.reweight == 2 * 3 * 3 * 2 * 4 == 144  # B·S²·A·h_d
    assert count_flops(tiny(), W).total - s.total == 3 * 2 * 288  # 3 passes x 2 layers x half core


def test_tiny_recompute_by_hand():
    s = count_flops(tiny(), W)
    assert s.hardware(Recompute.none) == s.total == 61632
    assert s.hardware(Recompute.selective) == 61632 + 2 * 576  # one more forward of QK^T and PV
    assert s.hardware(Recompute.full) == 61632 + 2 * 9792  # one more forward of each block
    assert hardware_flops(tiny(), W, Recompute.full) == 61632 + 19584
    assert model_flops(tiny(), W) == 61632
    assert s.hardware("selective") == s.hardware(Recompute.selective)  # the CLI's string values


# ============================================================================ golden values
# FlopCounterMode totals of HF eager models built from the presets' config values on the meta
# device (forward with labels + backward), torch 2.13.0 / transformers 5.23.0.
FLOPCOUNTER = [
    pytest.param("gpt2", 4, 1024, 3_499_779_686_400, id="FlopCounterMode-torch2.13-hf-gpt2-B4-S1024"),
    pytest.param("llama-3-8b", 1, 2048, 98_814_312_579_072, id="FlopCounterMode-torch2.13-hf-llama3-8b-S2048"),
    pytest.param("opt-350m", 2, 512, 2_174_629_183_488, id="FlopCounterMode-torch2.13-hf-opt-350m-B2-S512"),
]  # fmt: skip


@pytest.mark.parametrize(("preset", "B", "S", "expected"), FLOPCOUNTER)
def test_presets_match_flop_counter_mode(preset, B, S, expected):
    assert count_flops(preset_model(preset), Workload(seq_len=S, batch_size=B)).total == expected


def _megatron(L: int, h: int, heads: int, V: int = 51200) -> ModelConfig:
    """Megatron-LM's GPT shapes: MHA, d_ff = 4h, GeLU (biases and norms carry no matmul FLOPs)."""
    return ModelConfig.model_validate({"L": L, "D": h, "A": heads, "V": V, "K": 2048})


def korthikanti_model(B: int, s: int, L: int, h: int, V: int) -> Fraction:
    """Korthikanti et al. 2022, App. A, eq. (7); Narayanan et al. 2021, sec. 5.1 (no recompute)."""
    return 72 * B * s * L * h * h * (1 + Fraction(s, 6 * h) + Fraction(V, 12 * L * h))


def korthikanti_full(B: int, s: int, L: int, h: int, V: int) -> Fraction:
    """Narayanan et al. 2021, eq. (3): full activation recomputation (the head is not recomputed)."""
    return 96 * B * s * L * h * h * (1 + Fraction(s, 6 * h) + Fraction(V, 16 * L * h))


def korthikanti_selective(B: int, s: int, L: int, h: int, V: int) -> Fraction:
    """Korthikanti et al. 2022, App. A, eq. (8): selective recomputation, as printed."""
    return 72 * B * s * L * h * h * (1 + Fraction(s, 3 * h) + Fraction(V, 12 * L * h))


SHAPES = [  # (L, h, heads, B): Korthikanti et al. 2022, Table 3 (s = 2048, V = 51200)
    pytest.param(48, 6144, 64, 4, id="Korthikanti2022-Table3-22B"),
    pytest.param(96, 12288, 96, 64, id="Korthikanti2022-Table3-175B-GPT-3"),
    pytest.param(105, 20480, 128, 280, id="Korthikanti2022-Table3-530B-MT-NLG"),
    pytest.param(128, 25600, 160, 512, id="Korthikanti2022-Table3-1T"),
]


@pytest.mark.parametrize(("L", "h", "heads", "B"), SHAPES)
def test_korthikanti_closed_forms(L, h, heads, B):
    s = count_flops(_megatron(L, h, heads), Workload(seq_len=2048, batch_size=B))
    assert s.total == korthikanti_model(B, 2048, L, h, 51200)
    assert s.hardware(Recompute.full) == korthikanti_full(B, 2048, L, h, 51200)
    # Eq. (8) adds 12·B·s²·h per layer (72·s/(6h) more than eq. (7)): three times the 4·B·s²·h
    # forward of QK^T and PV that selective recomputation executes again. tcalc counts the one
    # forward, 72·B·s·L·h²·(1 + 2s/(9h) + V/(12Lh)); eq. (8) as printed is what the paper's HFU
    # column uses (test_korthikanti_table5_utilization).
    recomputed = s.recompute_flops(Recompute.selective)
    assert recomputed == 4 * B * 2048 * 2048 * h * L
    assert korthikanti_selective(B, 2048, L, h, 51200) == s.total + 3 * recomputed
    assert s.hardware(Recompute.selective) == 72 * B * 2048 * L * h * h * (
        1 + Fraction(2 * 2048, 9 * h) + Fraction(51200, 12 * L * h)
    )


@given(
    st.integers(1, 8), st.integers(1, 64), st.integers(1, 8), st.integers(1, 4096), st.integers(1, 4),
    st.integers(1, 2048),
)  # fmt: skip
def test_korthikanti_and_seed_closed_forms_hold_exactly(L, head_dim, A, V, B, S):
    """Any ungated MHA model with E = 4: eq. (7), eq. (3) and the seed's sum are exact."""
    h = head_dim * A
    m = ModelConfig.model_validate({"L": L, "D": h, "A": A, "V": V, "K": S})
    s = count_flops(m, Workload(seq_len=S, batch_size=B))
    assert s.total == korthikanti_model(B, S, L, h, V)
    assert s.hardware(Recompute.full) == korthikanti_full(B, S, L, h, V)
    # seed eq. (model_flops) 12·B·D·L·S·(S + (2+E)·D), plus the 6·B·S·D·V it omits (FLOP-4)
    assert s.total == seed_model_flops(m, Workload(seq_len=S, batch_size=B), lm_head=True)
    assert seed_model_flops(m, Workload(seq_len=S, batch_size=B)) == 12 * B * h * L * S * (S + 6 * h)


@given(st.integers(1, 8), st.integers(2, 2048), st.integers(1, 4096), st.integers(1, 4096))
def test_seed_6bsn_limit(L, D, V, S):
    """Seed: F = 6·B·S·N·(1 + O(S/D)). With N the block weights (12·L·D², E = 4, no norms or
    biases), F / (6·B·S·N) - 1 = S/(6D) + V/(12·L·D) exactly: -> 0 as S/D and V/(D·L) -> 0."""
    spec = {"L": L, "D": D, "A": 1, "V": V, "K": S, "bias": False, "norms_per_layer": 0,
            "final_norm": False, "positional": "rotary"}  # fmt: skip
    m = ModelConfig.model_validate(spec)
    n = count_params(m).non_embedding
    assert n == 12 * L * D * D
    B = 3
    ratio = Fraction(count_flops(m, Workload(seq_len=S, batch_size=B)).total, 6 * B * S * n)
    assert ratio - 1 == Fraction(S, 6 * D) + Fraction(V, 12 * L * D)


def test_seed_6bsn_limit_numerically():
    ratios = []
    for D in (256, 1024, 4096, 16384):  # S = 128, V = 1024, L = 32: both corrections shrink as 1/D
        m = ModelConfig.model_validate({"L": 32, "D": D, "A": 8, "V": 1024, "K": 128, "bias": False,
                                        "positional": "rotary"})  # fmt: skip
        s = count_flops(m, Workload(seq_len=128, batch_size=1))
        ratios.append(s.total / (6 * 128 * count_params(m).non_embedding))
    assert ratios == sorted(ratios, reverse=True)
    assert 1 < ratios[-1] < 1.002


# ============================================================================ published MFU
TIME_ROUNDING_S = 0.005  # Table 5 prints iteration times to 0.01 s
PCT_ROUNDING = 0.0005  # utilizations printed to 0.1 %

TABLE5 = [  # Korthikanti et al. 2022, Table 3 shapes, Table 5 "present work": time, MFU, HFU
    pytest.param(48, 6144, 64, 4, 8, 1.10, 0.415, 0.437, id="Korthikanti2022-Table5-22B"),
    pytest.param(96, 12288, 96, 64, 64, 13.75, 0.514, 0.528, id="Korthikanti2022-Table5-175B"),
    pytest.param(105, 20480, 128, 280, 280, 37.83, 0.560, 0.570, id="Korthikanti2022-Table5-530B"),
    pytest.param(128, 25600, 160, 512, 512, 71.49, 0.563, 0.570, id="Korthikanti2022-Table5-1T"),
]


def _within_rounding(flops: int, t: float, gpus: int, reported: float) -> bool:
    """The reported utilization lies in the range the printed (rounded) time and % allow."""
    low = mfu(flops, t + TIME_ROUNDING_S, gpus, A100_BF16)
    high = mfu(flops, t - TIME_ROUNDING_S, gpus, A100_BF16)
    return low - PCT_ROUNDING <= reported <= high + PCT_ROUNDING


@pytest.mark.parametrize(("L", "h", "heads", "B", "gpus", "t", "mfu_pct", "hfu_pct"), TABLE5)
def test_korthikanti_table5_utilization(L, h, heads, B, gpus, t, mfu_pct, hfu_pct):
    """Sequence parallelism + selective recomputation on A100s, global batch B, no data parallelism."""
    s = count_flops(_megatron(L, h, heads), Workload(seq_len=2048, batch_size=B))
    assert _within_rounding(s.total, t, gpus, mfu_pct)
    # The HFU column follows eq. (8) as printed, not the one recomputed forward tcalc counts.
    eq8 = korthikanti_selective(B, 2048, L, h, 51200)
    assert eq8.denominator == 1
    assert _within_rounding(int(eq8), t, gpus, hfu_pct)
    ours = hfu(s.hardware(Recompute.selective), t, gpus, A100_BF16)
    assert mfu(s.total, t, gpus, A100_BF16) < ours < hfu_pct


def palm_540b() -> ModelConfig:
    """PaLM 540B (Chowdhery et al. 2022, Table 1 and sec. 2): L=118, D=18432, 48 heads of 256,
    multi-query, SwiGLU d_ff = 4D, parallel layers, no biases, shared embeddings, V = 256k."""
    spec = {"L": 118, "D": 18432, "A": 48, "n_kv_heads": 1, "head_dim": 256, "d_ff": 73728,
            "mlp": "swiglu", "V": 256000, "K": 2048, "positional": "rotary", "bias": False,
            "norm_bias": False, "norms_per_layer": 1, "parallel_attn": True}  # fmt: skip
    return ModelConfig.model_validate(spec)


def test_palm_540b_parameter_count():
    assert count_params(palm_540b()).total == 540_356_474_880  # "540.35B" (PaLM Table 1)


def test_palm_540b_mfu():
    """PaLM Table 3: 238.3K tokens/s on 6144 TPU v4 chips (275 TFLOP/s bf16 each), 46.2 % MFU,
    counting 6N + 12LHQT FLOPs per token (App. B) with N = all 540.35B parameters."""
    m, tokens_s, chips = palm_540b(), 238.3e3, 6144
    per_token = palm_flops_per_token(m, 2048)
    assert per_token == 6 * 540_356_474_880 + 12 * 118 * 48 * 256 * 2048
    low = mfu_from_throughput(per_token, tokens_s - 50, chips, TPU_V4_BF16)  # printed to 0.1K
    high = mfu_from_throughput(per_token, tokens_s + 50, chips, TPU_V4_BF16)
    assert low - PCT_ROUNDING <= 0.462 <= high + PCT_ROUNDING
    # The exact count differs from 6N + 12LHQT only by the norms' 6 x 2.2M: the same 46.2 %.
    exact = count_flops(m, Workload(seq_len=2048)).per_token
    assert per_token - exact == 6 * (count_params(m).layer.norms * 118 + 18432)
    assert round(mfu_from_throughput(exact, tokens_s, chips, TPU_V4_BF16), 3) == 0.462
    # N without the 4.7B embedding would give 45.8 %: PaLM counts it.
    non_embedding = 6 * count_params(m).non_embedding + 12 * 118 * 48 * 256 * 2048
    assert round(mfu_from_throughput(non_embedding, tokens_s, chips, TPU_V4_BF16), 3) == 0.458


# ============================================================================ invariants
@given(model_configs(), st.integers(1, 64), st.integers(1, 4), st.integers(1, 5))
def test_linear_in_batch(m, S, B, k):
    one = count_flops(m, Workload(seq_len=S, batch_size=B))
    many = count_flops(m, Workload(seq_len=S, batch_size=k * B))
    assert many.total == k * one.total
    assert many.per_token == one.per_token


@given(model_configs(), st.integers(1, 64), st.integers(1, 5))
def test_linear_in_layers_minus_head(m, S, k):
    w = Workload(seq_len=S, batch_size=2)
    base = count_flops(m, w)
    deep = count_flops(m.with_overrides({"n_layers": m.n_layers * k}), w)
    outside = 3 * (base.lm_head + base.embedding_projection)
    assert deep.total - outside == k * (base.total - outside)


@given(model_configs(), st.integers(1, 64), st.integers(1, 4))
def test_causal_halves_exactly_the_attention_core(m, S, B):
    w = Workload(seq_len=S, batch_size=B)
    full, causal = count_flops(m, w), count_flops(m, w, causal=True)
    assert 2 * causal.layer.scores == full.layer.scores and 2 * causal.layer.reweight == full.layer.reweight
    assert full.total - causal.total == 3 * m.n_layers * full.layer.attention_core // 2
    others = ("qkv", "attn_out", "mlp", "router")
    assert all(getattr(full.layer, f) == getattr(causal.layer, f) for f in others)
    assert causal.lm_head == full.lm_head


@given(model_configs(), st.integers(1, 64))
def test_gqa_with_all_heads_equals_mha(m, S):
    full = m.with_overrides({"n_kv_heads": m.n_heads})
    mha = ModelConfig.model_validate({**full.given, "n_kv_heads": None})
    w = Workload(seq_len=S, batch_size=2)
    assert count_flops(full, w) == count_flops(mha, w)


@given(model_configs(), st.integers(1, 64), st.integers(1, 4), st.booleans())
def test_backward_is_twice_forward_and_all_ints(m, S, B, causal):
    s = count_flops(m, Workload(seq_len=S, batch_size=B), causal=causal)
    assert s.backward == BACKWARD_PER_FORWARD * s.forward
    assert s.total == s.forward + s.backward
    assert s.per_token * s.tokens == s.total  # every term carries B·S: per-token is exact
    d = s.as_dict()
    assert all(type(v) is int for k, v in d.items() if k not in ("attention_share", "causal", "windowed"))
    assert 0 <= s.attention_share < 1
    assert s.hardware(Recompute.none) <= s.hardware(Recompute.selective) <= s.hardware(Recompute.full)


@given(model_configs(), st.integers(1, 64))
def test_moe_counts_active_experts_only(m, S):
    w = Workload(seq_len=S, batch_size=1)
    base = layer_flops(m, w)
    more_experts = m.with_overrides({"n_experts": 2 * m.n_experts, "router": True})
    wider = layer_flops(more_experts, w)
    assert wider.mlp == base.mlp  # idle experts cost nothing
    assert wider.router == FLOPS_PER_MAC * S * m.d_model * 2 * m.n_experts
    dense = layer_flops(m.with_overrides({"n_experts": 1, "experts_per_token": 1, "router": False}), w)
    assert base.mlp == m.experts_per_token * dense.mlp


@given(model_configs(), st.integers(1, 64))
def test_parallel_attention_does_not_change_the_count(m, S):
    w = Workload(seq_len=S, batch_size=2)
    flipped = m.with_overrides({"parallel_attn": not m.parallel_attn})
    assert count_flops(m, w) == count_flops(flipped, w)


# ============================================================================ rules of thumb
def test_six_n_rules_of_thumb():
    gpt2 = preset_model("gpt2")
    assert six_n_flops_per_token(gpt2) == 6 * 124_439_808
    assert six_n_flops_per_token(gpt2, include_embeddings=False) == 6 * (124_439_808 - 38_597_376 - 786_432)
    moe = tiny(n_experts=4, experts_per_token=2, mlp="swiglu", bias=False, d_ff=12)
    assert six_n_flops_per_token(moe) == 6 * count_params(moe).active  # top-k experts only
    # PaLM's form adds the non-causal attention core: 12·L·H·Q·T = 3 passes x 2·2·L·A·h_d·S
    s = count_flops(gpt2, Workload(seq_len=1024))
    assert palm_flops_per_token(gpt2, 1024) - six_n_flops_per_token(gpt2) == 12 * 12 * 12 * 64 * 1024
    assert 12 * 12 * 12 * 64 * 1024 == 3 * gpt2.n_layers * s.layer.attention_core // 1024


def test_train_flops_for_tokens():
    gpt2 = preset_model("gpt2")
    per_token = count_flops(gpt2, Workload(seq_len=1024, batch_size=1)).per_token
    assert train_flops_for_tokens(gpt2, 1024, 10**9) == per_token * 10**9
    assert train_flops_for_tokens(gpt2, 1024, 10**9, exact=False) == 6 * 124_439_808 * 10**9
    step = count_flops(gpt2, Workload(seq_len=1024, batch_size=1))
    full = train_flops_for_tokens(gpt2, 1024, 1024, recompute=Recompute.full)
    assert full == step.hardware(Recompute.full)
    causal = train_flops_for_tokens(gpt2, 1024, 1024, causal=True)
    assert causal == count_flops(gpt2, Workload(seq_len=1024), causal=True).total
    with pytest.raises(ValueError, match="use exact=True"):
        train_flops_for_tokens(gpt2, 1024, 10**9, exact=False, recompute=Recompute.full)
    with pytest.raises(ValueError, match=r"tokens \(0\) must be a whole number >= 1"):
        train_flops_for_tokens(gpt2, 1024, 0)


# ============================================================================ time, MFU round trips
@given(
    st.integers(1, 10**25), st.integers(1, 10_000), st.sampled_from([125e12, 312e12, 989.4e12]),
    st.floats(0.01, 1.0),
)  # fmt: skip
def test_training_time_and_mfu_round_trip(total, gpus, peak, u):
    t = training_time_s(total, gpus, peak, u)
    assert mfu(total, t, gpus, peak) == pytest.approx(u, rel=1e-12)
    assert achieved_flops_per_gpu(total, t, gpus) == pytest.approx(u * peak, rel=1e-12)
    assert hfu(total, t, gpus, peak) == mfu(total, t, gpus, peak)
    assert gpu_hours(t, gpus) == pytest.approx(t * gpus / 3600, rel=1e-12)


@given(model_configs(), st.integers(1, 64), st.integers(1, 8), st.floats(0.01, 100.0))
def test_throughput_form_equals_step_form(m, S, B, t):
    """MFU = flops per token x tokens/s / (GPUs x peak) = step FLOPs / (t x GPUs x peak)."""
    s = count_flops(m, Workload(seq_len=S, batch_size=B))
    by_step = mfu(s.total, t, 8, A100_BF16)
    by_rate = mfu_from_throughput(s.per_token, s.tokens / t, 8, A100_BF16)
    assert by_rate == pytest.approx(by_step, rel=1e-12)
    # The seed's printed form (errata FLOP-5) multiplies the whole batch's FLOPs by tokens/s:
    # off by the factor B·S.
    seed_form = mfu_from_throughput(s.total, s.tokens / t, 8, A100_BF16)
    assert seed_form == pytest.approx(by_step * s.tokens, rel=1e-12)


def test_training_time_worked_example():
    """GPT-3 175B on 300B tokens at 2048, 1024 A100s at 40 % MFU: the 6N rule vs the exact count."""
    gpt3 = preset_model("gpt3")
    rule = train_flops_for_tokens(gpt3, 2048, 300 * 10**9, exact=False)
    exact = train_flops_for_tokens(gpt3, 2048, 300 * 10**9)
    assert rule == 6 * 174_604_259_328 * 300 * 10**9
    per_token = count_flops(gpt3, Workload(seq_len=2048)).per_token
    assert per_token == 1_076_373_430_272 and exact == per_token * 300 * 10**9
    assert round(exact / rule, 4) == 1.0274  # the attention core, S/(6D) = 2.8 %, less norms/positions
    days = training_time_s(exact, 1024, A100_BF16, 0.4) / flops_module.SECONDS_PER_DAY
    assert round(days, 2) == 29.25


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: mfu(10**15, 0, 8, A100_BF16), r"step_time_s \(0\) must be a positive number"),
        (lambda: mfu(10**15, -1.0, 8, A100_BF16), r"step_time_s \(-1.0\)"),
        (lambda: mfu(10**15, 1.0, 0, A100_BF16), r"n_gpus \(0\) must be a whole number >= 1"),
        (lambda: mfu(10**15, 1.0, 2.5, A100_BF16), r"n_gpus \(2.5\)"),
        (lambda: mfu(10**15, 1.0, True, A100_BF16), r"n_gpus \(True\)"),
        (lambda: mfu(10**15, 1.0, 8, 0), r"peak_flops_per_gpu \(0\) must be a positive number"),
        (lambda: mfu(-1, 1.0, 8, A100_BF16), r"flops_per_step \(-1\) must be a number >= 0"),
        (lambda: mfu(10**15, math.nan, 8, A100_BF16), r"step_time_s \(nan\)"),
        (lambda: mfu_from_throughput(10**9, 0.0, 8, A100_BF16), r"tokens_per_s \(0.0\)"),
        (lambda: training_time_s(10**20, 8, A100_BF16, 0), r"mfu \(0\) must be in \(0, 1\]"),
        (lambda: training_time_s(10**20, 8, A100_BF16, 46.2), r"mfu \(46.2\).*0.4 for 40 %"),
        (lambda: gpu_hours(-5.0, 8), r"time_s \(-5.0\)"),
        (lambda: chinchilla_for_params(0), r"n_params \(0\)"),
        (lambda: chinchilla_for_flops(100), r"flop_budget \(100\) is below 120 FLOPs"),
        (lambda: chinchilla_for_flops(-1e20), r"flop_budget \(-1e\+20\) must be a positive number"),
    ],
)
def test_bad_inputs_name_the_value_and_the_fix(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ============================================================================ Chinchilla
def test_chinchilla_from_params():
    """Hoffmann et al. 2022: Chinchilla, 70B parameters on 1.4T tokens (20 tokens per parameter)."""
    c = chinchilla_for_params(70 * 10**9)
    assert c.tokens == 1_400 * 10**9
    assert c.flops == 6 * 70 * 10**9 * 1_400 * 10**9 == 588 * 10**21


def test_chinchilla_from_flops():
    c = chinchilla_for_flops(5.88e23)  # the budget of Chinchilla itself
    assert c.params == 70 * 10**9 and c.tokens == TOKENS_PER_PARAM_CHINCHILLA * c.params


@given(st.integers(1, 10**13), st.integers(0, 10**6))
def test_chinchilla_round_trip(n, slack):
    budget = chinchilla_for_params(n).flops
    assert chinchilla_for_flops(budget).params == n
    slack %= 120 * (2 * n + 1)  # stay below the next size's budget, 120·(n+1)²
    assert chinchilla_for_flops(budget + slack).params == n  # rounds down: the run fits the budget
    assert chinchilla_for_flops(budget + slack).flops <= budget + slack


# ============================================================================ purity
def test_module_is_a_pure_estimator():
    tree = ast.parse(Path(flops_module.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    imported.discard("transformer_calc.estimators.support_table")  # a block's refusal line (issue 35's one table)
    allowed = {"__future__", "math", "dataclasses", "decimal", "typing"}
    allowed |= {f"transformer_calc.{m}" for m in ("model.config", "model.units", "estimators.params", "estimators.mixers",
                                                  "estimators.shared_block", "estimators.deepseek_v4", "estimators.gemma_layers", "estimators.mla", "estimators.attention", "estimators.kind_attention", "estimators.counts", "devices.hardware",
                                                  "errors")}
    assert imported <= allowed, imported - allowed
    assert "print(" not in Path(flops_module.__file__).read_text()


@pytest.mark.parametrize(("L", "h", "heads", "B", "gpus", "t", "mfu_pct", "hfu_pct"), TABLE5)
def test_hfu_paper_convention_reproduces_table5(capsys, L, h, heads, B, gpus, t, mfu_pct, hfu_pct):
    """`tcalc mfu --hfu-convention paper`: Korthikanti's eq. (8) as printed (the core three times)
    gives their HFU column (43.7, 52.8, 57.0, 57.0 %) from their times, within the printing."""
    import json

    from transformer_calc.cli import run

    argv = ["mfu", "--L", str(L), "--D", str(h), "--A", str(heads), "--V", "51200", "--K", "2048", "--S", "2048",
            "--gpus", str(gpus), "--gpu", "a100-80gb", "--recompute", "selective", "--hfu-convention", "paper",
            "--global-batch", str(B), "-f", "json"]
    for dt in (-TIME_ROUNDING_S, TIME_ROUNDING_S):
        assert run([*argv, "--step-time", str(t + dt)]) == 0
        d = json.loads(capsys.readouterr().out)
        if dt < 0:
            high = d["hfu"]
        else:
            low = d["hfu"]
    assert low - PCT_ROUNDING <= hfu_pct <= high + PCT_ROUNDING
