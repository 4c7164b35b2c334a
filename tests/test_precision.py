"""Precision recipes for the step time (estimators/training/precision.py; docs/formulas.md §6,
"Precision recipes for time"): which GEMMs run at which peak, the cast traffic, the fitted ratio."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.cli import run
from transformer_calc.estimators.training import precision
from transformer_calc.estimators.training.train import estimate_step
from transformer_calc.model.config import FP8Recipe, Parallelism, Training, Workload
from transformer_calc.sources.presets import gpu, preset_model

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- cast bytes, by hand
# Llama-3-8B (D 4096, A 32, n_kv 8, h_d 128, F 14336, SwiGLU), T = 1, p = 2. Values quantized per token
# and block: attention D (QKV input) + A·h_v (W_O input) + (A + 2·n_kv)·h_d (QKV output gradient) + D
# (W_O output gradient) = 18,432; MLP D + F (inputs) + 2F + D (output gradients) = 51,200.
# Bytes per value: read p (twice with an amax pass) + 2 usages x the recipe's bytes (TE user guide,
# "Handling transposes"; DeepSeek-V3 §3.3.1; arXiv:2509.25149 §2).
VALUES = 18432 + 51200
CASES = [
    ("delayed: 2 + 2·1", "delayed", VALUES * (2 + 2 * 1)),
    ("tensorwise (current scaling): 2·2 + 2·1", "tensorwise", VALUES * (4 + 2)),
    ("rowwise: 2 + 2·1", "rowwise", VALUES * (2 + 2)),
    ("blockwise: 2 + 2·(1 + 4/128)", "blockwise", VALUES * (2 + 2 * (1 + 4 / 128))),
    ("mxfp8: 2 + 2·(1 + 1/32)", "mxfp8", VALUES * (2 + 2 * (1 + 1 / 32))),
    ("nvfp4: 2·2 + 2·(1/2 + 1/16)", "nvfp4", VALUES * (4 + 2 * (0.5 + 1 / 16))),
]


@pytest.mark.parametrize("label, recipe, expected", CASES, ids=[c[0] for c in CASES])
def test_activation_cast_bytes_by_hand(label, recipe, expected):
    m = preset_model("llama-3-8b")
    got = precision.activation_quantize_bytes(m, Training(fp8_recipe=recipe), Parallelism(), moe=False)
    assert got == pytest.approx(expected, rel=1e-12)


def test_moe_block_casts_count_the_routed_copies_k_times():
    """Qwen3-30B-A3B (D 2048, k 8, F_e 768, no shared expert), etp 1: per routed copy D + F_e + 2F_e + D."""
    m = preset_model("qwen3-30b-a3b")
    tr = Training(fp8_recipe="delayed")
    attn = m.d_model + m.n_heads * m.v_dim + (m.n_heads + 2 * m.n_kv_heads) * m.head_dim + m.d_model
    mlp = m.experts_per_token * (2 * m.d_model + 3 * m.moe_d_ff)
    got = precision.activation_quantize_bytes(m, tr, Parallelism(expert=8, data=8, expert_tensor=1), moe=True)
    assert got == (attn + mlp) * 4


def test_weight_casts_read_p_and_write_both_usages():
    assert precision.weight_quantize_bytes(1000, Training(fp8_recipe="delayed")) == 1000 * (2 + 2)
    assert precision.weight_quantize_bytes(1000, Training(fp8_recipe="nvfp4")) == 1000 * (4 + 2 * 0.5625)


def test_compute_by_hand():
    """1e15 FLOPs, 1e14 of them at bf16 (989.4 TFLOP/s) and the rest at fp8 (1978.9) with η = 0.5."""
    got = precision.compute_s(10**15, 10**14, 989.4e12, 1978.9e12, 0.5, FP8Recipe.delayed)
    assert got == pytest.approx(1e14 / (989.4e12 * 0.5) + 9e14 / (1978.9e12 * 0.5 * 0.747), rel=1e-12)


def test_nvfp4_keeps_the_papers_share_of_blocks_in_bf16():
    """arXiv:2509.25149 §4: about 15 % of the linear layers in high precision; FP8 recipes keep none."""
    assert precision.bf16_block_count(preset_model("llama-3-70b"), FP8Recipe.nvfp4) == 12  # round(0.15·80)
    assert precision.bf16_block_count(preset_model("llama-3.1-405b"), FP8Recipe.nvfp4) == 19  # round(18.9)
    for r in ("delayed", "tensorwise", "rowwise", "blockwise", "mxfp8"):
        assert precision.bf16_block_count(preset_model("llama-3-70b"), FP8Recipe(r)) == 0


def test_high_precision_flops_are_the_cores_head_and_router():
    m = preset_model("qwen3-30b-a3b")
    from transformer_calc.estimators.flops import count_flops

    step = count_flops(m, Workload(seq_len=4096, batch_size=8), causal=True)
    got = precision.high_precision_flops(m, step, Training(fp8_recipe="mxfp8"), linear_layer_flops=0)
    assert got == 3 * step.attention_cores + 3 * (step.lm_head + step.embedding_projection) + 3 * step.layer.router * 48


@settings(max_examples=60, deadline=None)
@given(executed=st.integers(10**9, 10**18), share=st.floats(0, 1), eff=st.floats(0.05, 1))
def test_more_bf16_flops_never_speed_a_step(executed, share, eff):
    """The recipe's peak·ρ beats bf16 on every part tcalc lists (fp8 2x, fp4 4-6x the bf16 peak, ρ = 0.747)."""
    high = int(executed * share)
    for recipe, low_peak in ((FP8Recipe.delayed, 2 * 989.4e12), (FP8Recipe.nvfp4, 4 * 2250e12)):
        t = precision.compute_s(executed, high, 989.4e12, low_peak, eff, recipe)
        assert precision.compute_s(executed, 0, 989.4e12, low_peak, eff, recipe) <= t * (1 + 1e-12)
        assert t <= executed / (989.4e12 * eff) * (1 + 1e-12)


# ---------------------------------------------------------------------------- the step
def _step(model: str, gpu_name: str, recipe: str, **par):
    m = preset_model(model)
    tr = Training(precision="mixed", fp8_recipe=recipe, framework="megatron", flash=True)
    p = Parallelism(**{"tensor": 1, "pipeline": 1, "data": 8, "zero": 1, **par})  # tcalc train's defaults
    return estimate_step(m, Workload(seq_len=8192, batch_size=1), tr, p, gpu(gpu_name), global_batch=64)


def test_recipes_order_their_step_times():
    """Low precision beats bf16; current scaling's amax pass costs a little over delayed; nvfp4 beats mxfp8."""
    none, delayed, tensorwise = (_step("llama-3-8b", "h100", r).step_time_s for r in ("none", "delayed", "tensorwise"))
    assert delayed < none and delayed < tensorwise < delayed * 1.05
    mx, fp4 = (_step("llama-3-8b", "b200", r).step_time_s for r in ("mxfp8", "nvfp4"))
    assert fp4 < mx


@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4"])
def test_blackwell_recipes_are_refused_on_hopper(recipe):
    with pytest.raises(ValueError, match=recipe):
        _step("llama-3-8b", "h100", recipe)


def test_cli_refuses_nvfp4_on_h100_in_one_line(capsys):
    code = run(["train", "llama-3-8b", "--gpus", "8", "--gpu", "h100", "--S", "4096", "--global-batch", "64",
                "--fp8-recipe", "nvfp4"])
    out, err = capsys.readouterr()
    assert code == 2 and not out and err.count("\n") == 1 and "nvfp4" in err and "Traceback" not in err


def test_cli_json_matches_the_estimator(capsys):
    code = run(["train", "llama-3-8b", "--gpus", "8", "--gpu", "h100", "--S", "8192", "--global-batch", "64",
                "--micro-batch", "1", "--fp8-recipe", "blockwise", "--zero", "3", "-f", "json"])  # ZeRO-1: 105 GiB, no fit
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)
    assert d["training"]["fp8_recipe"] == "blockwise"
    assert d["step_time_s"] == pytest.approx(_step("llama-3-8b", "h100", "blockwise", zero=3).step_time_s, rel=1e-12)


# ---------------------------------------------------------------------------- the fit and its validation
def _results():
    sys.path.insert(0, str(REPO))
    from tools.validation import train_runs

    return [train_runs.evaluate(r) for r in train_runs.load_rows()]


def test_ratio_is_fitted_on_nemo_and_validated_on_megatron_bridge():
    """LOW_PRECISION_GEMM_RATIO: median error 0 (within 1 %) on NeMo 24.07's seven H100 FP8 runs; the
    Megatron-Bridge FP8-CS / MXFP8 / NVFP4 dense runs (not fitted) stay within ±25 %."""
    res = _results()
    nemo = [r.error for r in res if r.row["id"].startswith("nemo-")]
    assert len(nemo) == 7 and abs(statistics.median(nemo)) < 0.01
    checked = [r for r in res if r.row["id"].startswith("mbridge") and r.row.get("fp8_recipe") and not r.model.is_moe]
    assert len(checked) == 29  # 26.02: 14, 25.11: 15
    assert all(abs(r.error) <= 0.25 for r in checked), [(r.row["id"], round(r.error, 3)) for r in checked]


def test_fp8_ratio_moves_with_each_gpus_measured_fp8_mamf():
    """The fp8 ratio is fitted on H100 (0.747) and moves with each GPU's measured FP8/BF16 MAMF
    efficiency (ml-engineering's table): B200 0.763/0.776 over H100 0.709/0.803; GB300 takes the
    B300's; an unlisted GPU and fp4 keep the fit."""
    from transformer_calc.estimators.training.precision import low_precision_ratio

    assert low_precision_ratio("fp8", "H100-SXM5-80GB") == pytest.approx(0.747)
    assert low_precision_ratio("fp8", "B200-HGX") == pytest.approx(0.747 * (0.763 / 0.776) / (0.709 / 0.803))
    assert low_precision_ratio("fp8", "GB300-NVL72") == low_precision_ratio("fp8", "B300-HGX")
    assert low_precision_ratio("fp8", "GB200-NVL72") > low_precision_ratio("fp8", "H200") > 0.747
    assert low_precision_ratio("fp8", "MI300X") == pytest.approx(0.747)
    assert low_precision_ratio("fp4", "B200-HGX") == 0.747


def test_fp8_on_mamba2_layers_priced_layer_by_layer():
    """Megatron-core's MambaMixer runs in_proj and out_proj as TE linears (FP8 under the recipe), the
    conv and SSD scan in bf16: Granite-4.0-H-Small (40 layers, 4 attention, 36 Mamba-2; D 4096,
    in_proj 4096 -> 16768, out_proj 8192 -> 4096) casts those linears' inputs and output gradients,
    keeps their FP8 weight copies and in_proj's FP8 input, and prices the scans at the bf16 peak."""
    from transformer_calc.estimators.mixers import MIXERS
    from transformer_calc.estimators.training.fp8 import mixer_activation_delta
    from transformer_calc.estimators.training.train import estimate_step
    from transformer_calc.model.config import Workload
    from transformer_calc.sources.presets import gpu, preset_model

    m = preset_model("granite-4.0-h-small")
    kind = m.mixer_kinds[0]
    assert precision.mixer_quantize_values(m, kind, 1) == (4096 + 16768) + (8192 + 4096)
    tr, par = Training(fp8_recipe="tensorwise"), Parallelism(data=8)
    # in_proj's input (B·S·D) kept in FP8 instead of bf16; the fused kernel keeps no out_proj input
    assert mixer_activation_delta(m, kind, 1, 4096, 4096, tr, par, fused=True) == -(2 - 1) * 4096 * 4096
    assert mixer_activation_delta(m, kind, 1, 4096, 4096, tr, par, fused=False) == -4096 * (4096 + 8192)
    w = Workload(seq_len=4096, batch_size=1)
    from transformer_calc.estimators.flops import count_flops

    flops = count_flops(m, Workload(seq_len=4096, batch_size=8), causal=True)
    f = MIXERS[kind].forward_flops(m, 8, 4096)
    assert precision.mixer_high_precision_flops(m, flops, tr) == 3 * 36 * (f.total - f.projections)
    bf16 = estimate_step(m, w, Training(), par, gpu("b200"), global_batch=8)
    fp8 = estimate_step(m, w, tr, par, gpu("b200"), global_batch=8)
    assert fp8.compute_s < bf16.compute_s and fp8.memory_bound_s > bf16.memory_bound_s  # faster GEMMs, casts added
    from transformer_calc.cli import run

    assert run(["train", "granite-4.0-h-small", "--gpu", "b200", "--gpus", "8", "--S", "4096", "--global-batch", "8",
                "--fp8-recipe", "tensorwise", "-f", "json"]) == 0  # was refused: FP8 on Mamba-2 layers
