"""Speculative decoding (transformer_calc/estimators/inference/speculative.py): Leviathan et al.'s expected tokens worked
by hand, the break-even acceptance rate, monotonicity, MTP drafts, and the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transformer_calc.estimators.inference.expected import default_efficiency
from transformer_calc.estimators.inference.roofline import InferenceSpec
from transformer_calc.sources.presets import gpu, preset_model
from transformer_calc.estimators.inference.speculative import expected_tokens_per_step, mtp_draft, speculate


@pytest.mark.parametrize("alpha, k, tokens", [
    (0.0, 4, 1.0),  # every draft rejected: the target's own token only
    (1.0, 4, 5.0),  # every draft accepted: k + 1
    (0.5, 3, 1.875),  # (1 - 0.5^4) / 0.5
    (0.8, 4, 3.3616),  # (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2
])
def test_expected_tokens_by_hand(alpha, k, tokens):
    assert expected_tokens_per_step(alpha, k) == pytest.approx(tokens)


@given(st.floats(0, 1), st.floats(0, 1), st.integers(1, 16))
def test_expected_tokens_grow_with_alpha(a, b, k):
    lo, hi = sorted((a, b))
    assert 1 <= expected_tokens_per_step(lo, k) <= expected_tokens_per_step(hi, k) + 1e-12 <= k + 1 + 1e-9


H100 = gpu("h100")
TARGET = preset_model("llama-3.1-70b")
DRAFT = preset_model("llama-3.2-1b")
SPEC = InferenceSpec(batch_size=1, prompt_len=1000, new_tokens=200, tensor_parallel=8)


def test_draft_model_speedup_and_break_even():
    eff = default_efficiency(H100)
    x = speculate(TARGET, H100, SPEC, eff, draft=DRAFT, speculative_tokens=4, acceptance_rate=0.7)
    assert x.step_s == pytest.approx(4 * x.draft_step_s + x.verify_step_s)
    assert x.time_per_output_token_s == pytest.approx(x.step_s / expected_tokens_per_step(0.7, 4))
    assert x.speedup == pytest.approx(x.baseline_time_per_output_token_s / x.time_per_output_token_s)
    assert x.speedup > 1
    # At the break-even α the expected tokens equal the step's cost in plain decode steps.
    be = x.break_even_acceptance_rate
    assert 0 < be < 0.7
    assert expected_tokens_per_step(be, 4) == pytest.approx(x.step_s / x.baseline_time_per_output_token_s, rel=1e-9)
    at_be = speculate(TARGET, H100, SPEC, eff, draft=DRAFT, speculative_tokens=4, acceptance_rate=be)
    assert at_be.speedup == pytest.approx(1.0, rel=1e-9)
    # With nothing accepted speculation only costs: the verification alone is a longer step.
    none = speculate(TARGET, H100, SPEC, eff, draft=DRAFT, speculative_tokens=4, acceptance_rate=0.0)
    assert none.speedup < 1 and none.verify_step_s >= none.baseline_time_per_output_token_s


def test_a_draft_as_big_as_the_target_never_pays():
    eff = default_efficiency(H100)
    x = speculate(TARGET, H100, SPEC, eff, draft=TARGET, speculative_tokens=2, acceptance_rate=1.0)
    assert x.break_even_acceptance_rate is None and x.speedup < 1


def test_mtp_draft_is_the_models_own_module():
    m = preset_model("deepseek-v3")
    d = mtp_draft(m)
    assert d.n_layers == 1 and d.d_model == m.d_model and d.n_experts == m.n_experts
    h200 = gpu("h200")
    spec = InferenceSpec(batch_size=1, prompt_len=1000, new_tokens=200, tensor_parallel=8, weight_dtype="fp8")
    x = speculate(m, h200, spec, default_efficiency(h200), draft=None, speculative_tokens=1, acceptance_rate=0.85)
    # DeepSeek-V3 (§5.4.3): the second token is accepted 85-90 % of the time, 1.8x the tokens per
    # second; here E = 1.85 tokens per step and the expected speed-up is below that E (costs).
    assert x.expected_tokens_per_step == pytest.approx(1.85)
    assert 1 < x.speedup < 1.85
    from transformer_calc.estimators.params import count_params

    assert x.draft_weights_bytes == count_params(m).mtp // 8  # fp8: 1 byte per parameter, / T = 8
    with pytest.raises(ValueError, match="mtp_layers = 0"):
        mtp_draft(TARGET)


def test_draft_vocabulary_must_match():
    with pytest.raises(ValueError, match="vocabulary"):
        speculate(TARGET, H100, SPEC, default_efficiency(H100), draft=preset_model("gpt2"), speculative_tokens=4,
                  acceptance_rate=0.5)


def test_cli(capsys):
    from transformer_calc.cli import run

    base = ["inference", "--preset", "llama-3.1-70b", "--gpu", "h100", "--T", "8", "--S", "1000", "--new-tokens", "200"]
    assert run([*base, "--draft", "llama-3.2-1b", "--speculative-tokens", "4", "--acceptance-rate", "0.7", "-f", "json"]) == 0
    sp = json.loads(capsys.readouterr().out)["speculative"]
    assert sp["kind"] == "draft" and sp["speculative_tokens"] == 4 and sp["speedup"] > 1
    assert run([*base, "-f", "json"]) == 0 and "speculative" not in json.loads(capsys.readouterr().out)
    assert run([*base, "--draft", "llama-3.2-1b", "--mtp"]) == 2
    assert "not both" in capsys.readouterr().err
    assert run([*base, "--draft", "gpt2"]) == 2
    assert "vocabulary" in capsys.readouterr().err
    assert run([*base, "--draft", "llama-3.2-1b", "--acceptance-rate", "1.5"]) == 2
    assert "--acceptance-rate" in capsys.readouterr().err
