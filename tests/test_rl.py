"""`tcalc rl` (issue 41): an RL step's phases, time and memory per GPU, composed from serve's and
train's models. CLI `-f json` contracts, the API, and properties of the estimator over random
steps: phase shares sum to 1, the peak is the largest phase, a colocated GPU's generation phase
holds at least the engine's pool, the long tail never beats the steady state."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transformer_calc.cli import run
from transformer_calc.estimators.rl import LengthDistribution

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _json(*argv: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["rl", *argv, "-f", "json"]) == 0
    return json.loads(out.getvalue())


def test_defaults_are_verls_grpo_example_and_said():
    r = _json("--preset", "qwen2.5-7b")
    s = r["rl"]
    assert (s["algorithm"], s["group_size"], s["prompts_per_step"], s["samples_per_step"]) == ("grpo", 5, 1024, 5120)
    assert (s["prompt_len"], s["max_response_len"], s["placement"], s["gpus"]) == (512, 1024, "colocated", 8)
    assert r["rollout"]["tensor"] == 2 and r["rollout"]["replicas"] == 4
    assert r["rollout"]["engine"]["memory_utilization"] == 0.6
    said = {d["option"] for d in r["assumptions"]["defaults"]}
    assert {"algorithm", "group_size", "prompts_per_step", "memory_utilization", "framework", "gpu"} <= said
    phases = {p["phase"]: p for p in r["phases"]}
    assert phases["critic_values"]["time_s"] == 0 and phases["reference_log_prob"]["time_s"] > 0
    assert abs(sum(p["share"] for p in r["phases"]) - 1) < 1e-9
    assert abs(sum(p["time_s"] for p in r["phases"]) - r["step_time_s"]) < 1e-9 * r["step_time_s"]
    mem = r["memory"]
    assert mem["peak_bytes"] == max(p["total_bytes"] for p in mem["phases"])
    assert mem["peak_phase"] in {p["phase"] for p in mem["phases"]}


def test_ppo_adds_the_critic_and_its_memory():
    grpo = _json("--preset", "qwen2.5-7b", "--gpus", "16")
    ppo = _json("--preset", "qwen2.5-7b", "--gpus", "16", "--algorithm", "ppo", "--group-size", "5")
    t = {p["phase"]: p["time_s"] for p in ppo["phases"]}
    assert t["critic_values"] > 0 and t["critic_update"] == pytest.approx(t["policy_update"])
    assert ppo["step_time_s"] > grpo["step_time_s"]
    assert all(row["critic_bytes"] > 0 for row in ppo["memory"]["phases"])
    assert ppo["memory"]["peak_bytes"] > grpo["memory"]["peak_bytes"]


def test_split_pools_and_one_step_off_policy():
    on = _json("--preset", "llama-3.1-8b", "--gpus", "16", "--placement", "split", "--rollout-gpus", "8",
               "--rollout-tensor", "1")
    off = _json("--preset", "llama-3.1-8b", "--gpus", "16", "--placement", "split", "--rollout-gpus", "8",
                "--rollout-tensor", "1", "--off-policy-steps", "1")
    assert {row["pool"] for row in on["memory"]["phases"]} == {"trainer", "engine"}
    assert on["rl"]["trainer_gpus"] == 8 and on["rl"]["sleep"] is None
    assert off["step_time_s"] < on["step_time_s"]
    t = {p["phase"]: p["time_s"] for p in off["phases"]}
    trainer = sum(t.values()) - t["generation"] - t["weight_sync"] - t["offload"]
    late = (off["rollout"]["drain_s"] + trainer) / 2  # without partial rollouts the drain is the generation
    assert off["rollout"]["drain_s"] == pytest.approx(t["generation"])
    assert off["step_time_s"] == pytest.approx(max(t["generation"], trainer, late) + t["weight_sync"] + t["offload"])


def test_one_step_off_policy_is_nemo_rls_async_schedule():
    """step = max(generation, trainer, (drain + trainer) / 2) + sync (estimators.rl.off_policy_step_s):
    bound by the engine's throughput, by the trainer, or by the latency of a batch that starts only
    after the previous refit and must end before the trainer's next step."""
    from transformer_calc.estimators.rl import off_policy_step_s

    assert off_policy_step_s(60.0, 80.0, 10.0, 2.0) == 62.0  # the engine's throughput
    assert off_policy_step_s(30.0, 40.0, 50.0, 2.0) == 52.0  # the trainer
    assert off_policy_step_s(30.0, 90.0, 40.0, 2.0) == 67.0  # the batch's latency: (90 + 40) / 2 + 2
    base = ("--preset", "llama-3.1-8b", "--gpus", "16", "--placement", "split", "--rollout-gpus", "8",
            "--rollout-tensor", "1", "--off-policy-steps", "1", "--prompts-per-step", "64", "--group-size", "32",
            "--max-response-len", "4096", "--response-len-mean", "1000")
    full = _json(*base, "--partial-rollouts")  # in-flight weight updates: the engine kept full
    waits = _json(*base)  # the refit waits for the running samples: each batch drains to its longest
    assert full["rollout"]["drain_s"] == pytest.approx(waits["rollout"]["generation_s"])
    assert full["rollout"]["generation_s"] < full["rollout"]["drain_s"]
    assert full["step_time_s"] <= waits["step_time_s"]
    t = {p["phase"]: p["time_s"] for p in full["phases"]}
    trainer = sum(t.values()) - t["generation"] - t["weight_sync"] - t["offload"]
    assert full["step_time_s"] >= (full["rollout"]["drain_s"] + trainer) / 2 + t["weight_sync"]


def test_rollout_gpus_auto_prices_every_split_and_keeps_the_fastest_that_fits():
    r = _json("--preset", "llama-3.1-8b", "--gpus", "16", "--placement", "split", "--rollout-gpus", "auto",
              "--rollout-tensor", "2", "--off-policy-steps", "1")
    plan = r["split_plan"]
    assert [x["rollout_gpus"] for x in plan] == list(range(2, 16, 2))
    assert all(x["rollout_gpus"] + x["trainer_gpus"] == 16 for x in plan)
    best = min((x for x in plan if x["fits"]), key=lambda x: x["step_time_s"])
    assert r["rl"]["rollout_gpus"] == best["rollout_gpus"]
    assert r["step_time_s"] == pytest.approx(best["step_time_s"])
    gens = [x["generation_s"] for x in plan]
    assert gens == sorted(gens, reverse=True)  # more engine GPUs, a shorter generation
    assert "split_plan" not in _json("--preset", "llama-3.1-8b", "--gpus", "16", "--placement", "split")


def test_the_long_tail_and_partial_rollouts():
    base = ("--preset", "llama-3.1-8b", "--gpus", "8", "--rollout-tensor", "1", "--prompts-per-step", "64",
            "--group-size", "8", "--max-response-len", "8192", "--response-len-mean", "2000")
    tail = _json(*base)
    fixed = _json(*base, "--response-len-dist", "fixed")
    partial = _json(*base, "--partial-rollouts")
    assert tail["rollout"]["longest_response_len"] == 8192  # the clipped mass reaches the cap
    assert tail["rollout"]["generation_s"] > fixed["rollout"]["generation_s"]
    assert partial["rollout"]["generation_s"] < tail["rollout"]["generation_s"]
    assert partial["rollout"]["tail_s"] == 0


def test_sleep_frees_the_engine_while_the_trainer_works():
    awake = _json("--preset", "qwen2.5-7b", "--no-sleep")
    asleep = _json("--preset", "qwen2.5-7b")
    train = lambda r: next(p for p in r["memory"]["phases"] if p["phase"] == "training")  # noqa: E731
    assert train(asleep)["kv_cache_bytes"] == 0 and train(awake)["kv_cache_bytes"] > 0
    offload = _json("--preset", "qwen2.5-7b", "--offload-idle")
    gen = next(p for p in offload["memory"]["phases"] if p["phase"] == "generation")
    assert gen["trainer_bytes"] == 0


@pytest.mark.parametrize("argv, words", [
    (["--rollout-gpus", "4"], "--placement split"),
    (["--off-policy-steps", "1"], "split pools"),
    (["--placement", "split", "--sleep"], "colocated"),
    (["--response-len-mean", "5000"], "response_len_mean"),
    (["--rollout-tensor", "3"], "multiple"),
    (["--algorithm", "dpo"], "grpo, ppo"),
])
def test_bad_input_is_one_error_line(argv, words, capsys):
    assert run(["rl", "--preset", "qwen2.5-7b", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error:") and words in err and err.count("\n") == 1


def test_the_api_is_the_cli():
    import transformer_calc.api as tc

    r = tc.rl("qwen2.5-7b", gpus=16, group_size=8, prompts_per_step=256, T=2)
    assert r.model_dump(mode="json") == _json("--preset", "qwen2.5-7b", "--gpus", "16", "--group-size", "8",
                                              "--prompts-per-step", "256", "--T", "2") | {"model": r.model_dump(mode="json")["model"]}
    assert r.trainer.layout.tensor == 2 and r.rl.samples_per_step == 2048


# ---------------------------------------------------------------------------- properties
@st.composite
def steps(draw: st.DrawFn) -> list[str]:
    model = draw(st.sampled_from(["qwen2.5-7b", "llama-3.1-8b", "qwen3-4b"]))
    L = draw(st.sampled_from([256, 1024, 4096]))
    mu = draw(st.integers(1, L))
    argv = ["--preset", model, "--max-response-len", str(L), "--response-len-mean", str(mu),
            "--response-len-dist", draw(st.sampled_from(["exponential", "uniform", "fixed"])),
            "--group-size", str(draw(st.sampled_from([1, 4, 16]))),
            "--prompts-per-step", str(draw(st.sampled_from([8, 64, 512]))),
            "--algorithm", draw(st.sampled_from(["grpo", "ppo"])),
            "--mini-batches", str(draw(st.sampled_from([1, 2]))),
            "--rollout-tensor", str(draw(st.sampled_from([1, 2])))]
    if draw(st.booleans()):
        argv += ["--placement", "split", "--gpus", "16", "--rollout-gpus", "8"]
        if draw(st.booleans()):
            argv += ["--off-policy-steps", "1"]
    elif draw(st.booleans()):
        argv += ["--no-sleep"]
    if not draw(st.booleans()):
        argv += ["--no-kl-reference"]
    return argv


@FAST
@given(steps())
def test_shares_sum_to_one_and_the_peak_is_the_largest_phase(argv):
    r = _json(*argv)
    assert abs(sum(p["share"] for p in r["phases"]) - 1) < 1e-9
    assert all(p["time_s"] >= 0 for p in r["phases"])
    work = sum(p["time_s"] for p in r["phases"])
    gen = next(p["time_s"] for p in r["phases"] if p["phase"] == "generation")
    assert r["step_time_s"] <= (work + max(0.0, r["rollout"]["drain_s"] - gen)) * (1 + 1e-12)
    if not r["rl"]["off_policy_steps"]:
        assert r["step_time_s"] == pytest.approx(work, rel=1e-12)
    mem = r["memory"]
    assert mem["peak_bytes"] == max(p["total_bytes"] for p in mem["phases"])
    assert mem["fits"] == all(p["total_bytes"] <= mem["capacity_bytes"] for p in mem["phases"])
    for p in mem["phases"]:  # the total is the sum of its parts
        assert p["total_bytes"] == sum(v for k, v in p.items() if k.endswith("_bytes") and k != "total_bytes")
    if r["rl"]["placement"] == "colocated":  # the colocated peak holds at least every phase's engine or trainer
        gen = next(p for p in mem["phases"] if p["phase"] == "generation")
        assert mem["peak_bytes"] >= gen["engine_weights_bytes"] + gen["kv_cache_bytes"]
        assert all(mem["peak_bytes"] >= p["total_bytes"] for p in mem["phases"])
    ro = r["rollout"]
    assert ro["generation_s"] == pytest.approx(ro["queue_s"] + ro["prefill_s"] + ro["tail_s"], rel=1e-9)
    assert ro["longest_response_len"] <= r["rl"]["max_response_len"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["exponential", "uniform", "fixed"]), st.integers(1, 32768), st.floats(0.001, 1.0),
       st.integers(1, 4096))
def test_length_distributions_keep_their_mean_and_cap(kind, L, r, n):
    d = LengthDistribution(kind, max(1.0, r * L), L)
    assert 0 <= d.survival(0.5) <= 1 and d.survival(L) == 0 or kind == "fixed"
    assert d.longest(n) <= L
    assert d.longest(n) <= d.longest(2 * n) + 1e-9  # more samples, a longer longest
    if kind == "exponential" and d.rate > 0:  # the clipped exponential's mean is μ
        lam = d.rate
        assert -__import__("math").expm1(-lam * L) / lam == pytest.approx(d.mean, rel=1e-6)


def _rl_runs():
    """tools/validation/rl_runs.py, imported as a module."""
    import importlib.util
    import sys

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("rl_runs", REPO / "tools/validation/rl_runs.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["rl_runs"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod, REPO


def test_validation_section_is_current_and_its_summary_holds():
    """docs/validation.md's RL section is what tools/validation/rl_runs.py writes, and the numbers it
    states: the generation share within 10 points (median) over at least five runs, the fit runs
    within 5 %, tcalc's peak fitting on every published run (each ran)."""
    rr, REPO = _rl_runs()
    rows = rr.load_rows()
    results = [rr.evaluate(row) for row in rows]
    raw = [rr.evaluate(row, generation_efficiency=1, trainer_efficiency=1) for row in rows]
    assert rr.docs_section(results, raw) in (REPO / "docs/validation.md").read_text(encoding="utf-8")
    s = rr.summary(results)
    assert s["shares"] >= 5 and s["share_median"] <= rr.SHARE_AIM
    assert s["median_fit"] <= 0.05 and s["memory_fits"] == s["memory_rows"] == s["rows"]


def test_refit_terms_reproduce_their_fit_and_check_rows():
    """The weight sync is the link's time plus REFIT_FIXED_S + (W/T_e)/REFIT_LOAD_BYTES_S; on NeMo-RL's
    four measured refits (two fitted, two checks) tcalc lands within 25 % of the measured range."""
    import transformer_calc.api as tc
    from transformer_calc.estimators.rl import REFIT_FIXED_S, REFIT_LOAD_BYTES_S, refit_overhead_s

    rr, _ = _rl_runs()
    assert refit_overhead_s(0) == REFIT_FIXED_S
    assert refit_overhead_s(27 * 10**9) == pytest.approx(REFIT_FIXED_S + 27e9 / REFIT_LOAD_BYTES_S)
    for row, t, err in rr.sync_checks():
        lo, hi = row["measured_s"]
        assert err is None and 0.75 * lo <= t <= 1.25 * hi, (row["id"], t)
    r = tc.rl("qwen3-4b", gpus=16, placement="split", rollout_gpus=8, rollout_tensor=8, framework="megatron", T=1, zero=1)
    link = r.sync.bytes_per_engine_gpu / r.sync.link_bytes_s
    assert r.sync.time_s == pytest.approx(link + REFIT_FIXED_S + r.sync.bytes_per_engine_gpu / REFIT_LOAD_BYTES_S, rel=0.02)


def test_the_rollouts_log_prob_host_cost_is_per_sequence_and_step(monkeypatch):
    """Partial rollouts run every token at the steady rate: the log-prob host cost adds
    LOGPROB_SEQUENCE_S / g to each token's time, whatever the GPU."""
    import transformer_calc.api as tc
    import transformer_calc.estimators.rl as rl

    args = dict(gpus=8, prompts_per_step=64, group_size=8, max_response_len=2048, response_len_mean=700,
                rollout_tensor=1, partial_rollouts=True, generation_efficiency=0.5)
    with_cost = tc.rl("qwen2.5-7b", **args).rollout.steady_tokens_per_s_per_replica
    monkeypatch.setattr(rl, "LOGPROB_SEQUENCE_S", 0.0)
    without = tc.rl("qwen2.5-7b", **args).rollout.steady_tokens_per_s_per_replica
    assert 1 / with_cost - 1 / without == pytest.approx(20.0e-6 / 0.5, rel=0.02)


def test_training_memory_is_one_packed_micro_batch():
    """A packed micro-batch of b samples holds max(P + L, b·(P + μ)) tokens: raising b past
    (P + L)/(P + μ) grows training's memory, below it the longest sample sets it."""
    import transformer_calc.api as tc

    def work(b: int) -> int:
        r = tc.rl("llama-3.1-8b", gpus=8, prompts_per_step=64, group_size=32, prompt_len=150, max_response_len=3946,
                  response_len_mean=795, micro_batch=b, framework="megatron", T=1, P=2, zero=1, recompute="none")
        return next(p.trainer_work_bytes for p in r.memory.phases if p.phase == "training")

    assert work(1) == work(4)  # 4 · 945 < 4096: the longest sample's tokens
    assert work(8) > work(4)  # 8 · 945 > 4096
