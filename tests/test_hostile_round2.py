"""Hostile input, round 2 (issue 26): one validation per concept for every door (flags, job files,
`tcalc check`, the Python API), orphan options, cross-field nonsense, results that are physically
possible by construction, streams and signals, and a seeded property test per command."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import transformer_calc.api as tc
from transformer_calc.cli import run
from transformer_calc.errors import ImpossibleResult, TcalcError

from conftest import REPO


def _run(capsys, *argv):
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _error(capsys, *argv) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2, (argv, code, err)
    assert out == "" and err.startswith("Error: ") and err.count("\n") == 1, err
    return err


# ---------------------------------------------------------------------------- job files = flags
@pytest.mark.parametrize("section, key, value", [
    ("inference", "ttft_s", 0), ("inference", "gpus", 0), ("inference", "memory_utilization", 1.5),
    ("inference", "block_size", 0), ("inference", "matmul_efficiency", 7), ("inference", "new_tokens", -1),
    ("training", "B", 0), ("training", "zero", 4), ("training", "S", "lots"), ("checks", "max_ttft_s", 0),
])
def test_check_refuses_the_job_file_values_the_commands_refuse(tmp_path, capsys, section, key, value):
    """`tcalc check` passed files whose sections `tcalc serve` or `tcalc train` refuse: a job file's
    value is now read by the parser of the flag of the same name, in every command and in check."""
    job = tmp_path / "job.yaml"
    job.write_text(f"model: {{preset: llama-3-8b}}\n{section}: {{{key}: {json.dumps(value)}}}\n")
    code, out, err = _run(capsys, "check", str(job), "-f", "json")
    assert code == 2
    assert json.loads(out)["files"][0]["status"] == "invalid"
    canon = {"B": "batch_size", "S": "seq_len"}.get(key, key)
    assert f"{section}: {canon} (" in json.loads(out)["files"][0]["error"]


def test_a_job_files_numbers_are_read_as_flags_are(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: gpt2}\ntraining: {S: 512}\n")
    via_file = json.loads(_run(capsys, "memory", "--config", str(job), "-f", "json")[1])
    via_flag = json.loads(_run(capsys, "memory", "gpt2", "--S", "512", "-f", "json")[1])
    assert via_file["workload"] == via_flag["workload"] == {"seq_len": 512, "batch_size": 1}
    job.write_text("model: {preset: gpt2}\ntraining: {S: 1k}\n")  # 1k = 1024, as --S 1k
    assert json.loads(_run(capsys, "memory", "--config", str(job), "-f", "json")[1])["workload"]["seq_len"] == 1024


# ---------------------------------------------------------------------------- orphans and cross-field rules
@pytest.mark.parametrize("argv, names", [
    (["memory", "llama-3-8b", "--lora-rank", "8"], "lora_rank"),
    (["memory", "llama-3-8b", "--lora-targets", "q,v"], "lora_targets"),
    (["train", "llama-3-8b", "--global-batch", "8", "--train-head"], "train_head"),
    (["memory", "llama-3-8b", "--offload-device", "nvme"], "offload_device"),
    (["inference", "llama-3-8b", "--S", "128", "--speculative-tokens", "3"], "--speculative-tokens"),
    (["inference", "llama-3-8b", "--S", "128", "--acceptance-rate", "0.5"], "--acceptance-rate"),
    (["train", "llama-3-8b", "--global-batch", "8", "--price-per-gpu-hour", "2"], "--price-per-gpu-hour"),
    (["memory", "llama-3-8b", "--fp8-recipe", "mxfp8", "--gpu", "h100"], "mxfp8"),
    (["memory", "llama-3-8b", "--fp8-recipe", "delayed", "--gpu", "a100-80gb"], "no FP8"),
    (["train", "llama-3-8b", "--global-batch", "8", "--fp8-recipe", "tensorwise", "--gpu", "v100"], "no FP8"),
    (["memory", "llama-3-8b", "--set", "experts_per_token=2"], "experts_per_token"),
    (["inference", "llama-3-8b", "--S", "128", "--mla-cache", "decompressed"], "no MLA"),
    (["memory", "llama-3-8b", "--ep", "2"], "dense"),
    (["memory", "llama-3-8b", "--etp", "2"], "dense"),
    (["train", "llama-3-8b", "--global-batch", "8", "--etp", "2"], "dense"),
    (["plan", "llama-3-8b", "--global-batch", "8", "--node-size", "1000000000"], "NVLink domain"),
    (["memory", "llama-3-8b", "--set", "attention_pattern=[[1]]"], "attention_pattern"),
])
def test_an_option_that_means_nothing_here_is_an_error_naming_it(capsys, argv, names):
    assert names in _error(capsys, *argv)


def test_the_orphan_rules_hold_in_job_files_and_the_api(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: llama-3-8b}\ntraining: {lora_rank: 8}\n")
    assert "lora_rank" in _error(capsys, "memory", "--config", str(job))
    code, out, _ = _run(capsys, "check", str(job), "-f", "json")
    assert code == 2 and "lora_rank" in json.loads(out)["files"][0]["error"]
    with pytest.raises(TcalcError, match="speculative decoding"):
        tc.inference("llama-3-8b", S=128, speculative_tokens=3)
    with pytest.raises(TcalcError, match="--tokens"):
        tc.train("llama-3-8b", global_batch=8, price_per_gpu_hour=2)
    # with what they need, the same options are fine
    assert tc.memory("llama-3-8b", finetune="lora", lora_rank=8, S=128).finetune.lora_rank == 8


def test_hf_layer_types_holding_containers_is_an_error(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gemma2", "layer_types": [["a"], {"b": 1}], "hidden_size": 64,
                               "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128,
                               "vocab_size": 100, "head_dim": 32, "num_key_value_heads": 1}))
    assert "layer_types" in _error(capsys, "params", "--hf-config", str(cfg))


def test_plan_with_absurd_sizes_answers_or_refuses_quickly(capsys):
    """No loop runs a user's number of times: plan enumerated T up to --node-size (and the heads)."""
    start = time.perf_counter()
    code, _, _ = _run(capsys, "plan", "--L", "2", "--D", "1000000000", "--A", "1000000000", "--V", "1000",
                      "--node-size", "1024", "--global-batch", "8", "--gpus", "1000000")
    assert code in (0, 2) and time.perf_counter() - start < 10


# ---------------------------------------------------------------------------- physically possible results
def test_a_utilization_above_one_is_an_impossible_result():
    from transformer_calc.results.base import Section

    class Probe(Section):
        mfu: float

    assert Probe(mfu=0.5).mfu == 0.5
    with pytest.raises(ImpossibleResult, match="mfu"):
        Probe(mfu=1.07)


def test_an_impossible_result_is_an_internal_error_with_the_command(capsys, monkeypatch):
    import transformer_calc.results.params as params

    def broken(req):
        raise ImpossibleResult("ParamsResult.mfu = 1.5 is not a fraction of the peak")

    monkeypatch.setattr(params, "run_params", broken)
    code, out, err = _run(capsys, "params", "gpt2")
    assert code == 3 and out == ""
    assert err.startswith("Error: internal error") and "tcalc params gpt2" in err and err.count("\n") == 1


def test_expected_latency_is_never_below_the_bound_with_expert_parallelism():
    """qwen3-30b-a3b at T 1, ep 8: the expected time left out the all-to-alls the bound counts."""
    r = tc.inference("qwen3-30b-a3b", T=1, ep=8, B=256, gpu="h100", S=4096, new_tokens=16)
    assert r.expected.time_to_first_token_s >= r.time_to_first_token_s
    assert r.expected.total_s >= r.total_s


# ---------------------------------------------------------------------------- the Python API
def test_a_changed_model_config_is_validated_where_it_enters():
    m, _ = tc.load("gpt2")
    assert tc.params(m.model_copy(update={"n_layers": 24})).params.total == tc.params("gpt2", L=24).params.total
    with pytest.raises(TcalcError, match="n_layers"):
        tc.params(m.model_copy(update={"n_layers": -12}))


@pytest.mark.parametrize("call, keyword", [
    (lambda: tc.serve("gpt2", prompt_len=100, output_len=10, ttft_s=0), "ttft_s=0"),
    (lambda: tc.train("gpt2", global_batch=8, S=0), "S=0"),
    (lambda: tc.flops("gpt2", tokens=-5, gpus=1, gpu="h100"), "tokens=-5"),
    (lambda: tc.plan("gpt2", global_batch=8, top=-1), "top=-1"),
    (lambda: tc.memory("gpt2", S=True), "S=True"),
    (lambda: tc.memory("gpt2", gpu=3), "gpu=3"),
])
def test_the_api_names_the_keyword_and_the_value(call, keyword):
    with pytest.raises(TcalcError) as info:
        call()
    assert str(info.value).startswith(keyword), str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------- streams and signals
def _shell(command: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


TCALC = f"{sys.executable} -m transformer_calc"


def test_stderr_closed_still_exits_2():
    assert _shell(f"{TCALC} memory --preset nope 2>&-").returncode == 2


def test_help_into_a_pipe_that_closes_early_is_not_an_error():
    for argv in ("memory --help", "--help"):
        done = _shell(f"set -o pipefail; {TCALC} {argv} | head -1 >/dev/null")
        assert done.returncode == 0, (argv, done.stderr)


@pytest.mark.parametrize("columns", ["0", "5"])
def test_a_narrow_or_zero_terminal_width_still_prints_the_numbers(columns):
    done = _shell(f"{TCALC} params --preset gpt2", COLUMNS=columns)
    assert done.returncode == 0 and "124,439,808" in done.stdout


def test_ctrl_c_inside_a_command_prints_one_line(capsys, monkeypatch):
    import transformer_calc.results.params as params

    def interrupted(req):
        raise KeyboardInterrupt

    monkeypatch.setattr(params, "run_params", interrupted)
    code, out, err = _run(capsys, "params", "gpt2")
    assert code == 130 and err == "Error: interrupted\n"


def test_a_note_never_precedes_an_error(capsys):
    code, _, err = _run(capsys, "train", "llama-3-8b", "--S", "8192", "--global-batch-tokens", "4M", "--gpu", "nope")
    assert code == 2 and err.count("\n") == 1 and err.startswith("Error: ")
    code, _, err = _run(capsys, "train", "llama-3-8b", "--S", "8192", "--global-batch-tokens", "4M", "-f", "json")
    assert code == 0 and err.startswith("note: --global-batch-tokens 4M read as 4,194,304")


# ---------------------------------------------------------------------------- YAML merge keys
def test_yaml_merge_keys_are_read_as_yaml_defines_them(tmp_path, capsys):
    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: gpt2}\ntraining:\n  <<: {S: 512, B: 2}\n  B: 4\n")
    assert json.loads(_run(capsys, "memory", "--config", str(job), "-f", "json")[1])["workload"] == \
        {"seq_len": 512, "batch_size": 4}  # its own key wins over the merged one
    job.write_text("model: {preset: gpt2}\ntraining:\n  <<: 3\n")
    assert "merge key" in _error(capsys, "memory", "--config", str(job))
    job.write_text("model: {preset: gpt2}\ntraining:\n  B: 4\n  B: 5\n")
    assert "given twice" in _error(capsys, "memory", "--config", str(job))


# ---------------------------------------------------------------------------- a property test per command
HOSTILE = ["", "0", "-1", "1e400", "1e999999999", "nan", "inf", "-inf", "true", "[1]", "{a: 1}", "x" * 90, "8k",
           "0.5", "2", "64", "1.5", "null", "h100", "a100-80gb", "lora", "full"]
COMMAND_ARGS = {
    "params": ["gpt2"], "memory": ["gpt2"], "flops": ["gpt2"], "mfu": ["gpt2", "--tokens-per-s", "1e5"],
    "inference": ["gpt2", "--S", "256"], "serve": ["gpt2", "--prompt-len", "256", "--output-len", "16", "--gpus", "2"],
    "train": ["gpt2", "--global-batch", "16", "--gpus", "2"], "plan": ["gpt2", "--global-batch", "16", "--gpus", "2"],
    "sweep": ["gpt2", "--B", "1,2"],
}


def _finite(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@pytest.mark.parametrize("command", sorted(COMMAND_ARGS))
def test_hostile_values_for_every_option_give_an_error_or_a_possible_answer(command, capsys):
    """Seeded: for each command, draws 1-3 of its options (from its request model) with hostile
    values; the contract is one `Error:` line and exit 2, or exit 0 with finite JSON whose
    utilizations are fractions; never an internal error, never longer than a few seconds."""
    from transformer_calc.cli import request_class

    flags = sorted({o.spellings()[0] for name, o in request_class(command).options().items()
                    if o.flags and o.api and name not in ("plot", "x", "y", "series", "config", "hf_config", "preset",
                                                          "revision", "draft", "model", "models")})

    @settings(max_examples=12, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(st.lists(st.tuples(st.sampled_from(flags), st.sampled_from(HOSTILE)), min_size=1, max_size=3))
    def check(options):
        argv = [command, *COMMAND_ARGS[command]]
        for flag, value in options:
            argv += [flag] if value in ("true",) and flag.startswith("--") and "/" in flag else [flag, value]
        start = time.perf_counter()
        code = run([*argv, "-f", "json"])
        out, err = capsys.readouterr()
        assert time.perf_counter() - start < 20, argv
        assert code in (0, 2), (argv, code, err)
        assert "internal error" not in err, (argv, err)
        if code == 2:
            lines = [line for line in err.splitlines() if line.startswith("Error: ")]
            assert len(lines) == 1 and err.splitlines()[-1] == lines[0], (argv, err)
        else:
            data = json.loads(out) if command != "sweep" else json.loads(out)
            assert _finite(data), argv

    check()


# ---------------------------------------------------------------------------- serve: feasible means within every limit
def test_a_feasible_layout_keeps_its_prefill_within_the_step_budget():
    """A steady state prefills B·P/O prompt tokens per step beside B decodes: B·(1 + P/O) must fit
    max_num_batched_tokens (serving.evaluate_layout). `--max-num-batched-tokens 1` was 'feasible'."""
    s = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=8000, output_len=500)
    for layout in s.layouts if hasattr(s, "layouts") else [s.best]:
        if layout.feasible:
            assert layout.concurrency * (1 + 8000 / 500) <= 8192
    tight = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=8000, output_len=500, max_num_batched_tokens=1)
    assert tight.best is None or not tight.best.feasible
    assert all("step budget" in layout.reason for layout in tight.layouts if layout.reason and "KV" not in layout.reason)
    fixed = tc.serve("llama-3.1-8b", gpu="h100", gpus=8, prompt_len=8000, output_len=500, B=256, T=8,
                     max_num_batched_tokens=2048)
    assert fixed.best is None or not fixed.best.feasible
    assert "max_num_batched_tokens" in fixed.layouts[0].reason


API_VALUES = [None, 0, -1, 1.5, float("nan"), float("inf"), 10**40, True, "", "x" * 90, "8k", [1, 2], {"a": 1},
              object(), b"bytes", (1,), "1e999999999", -0.0]
API_CALLS = {
    "params": ("gpt2",), "memory": ("gpt2",), "flops": ("gpt2",), "mfu": ("gpt2",), "inference": ("gpt2",),
    "serve": ("gpt2",), "train": ("gpt2",), "plan": ("gpt2",), "sweep": ("gpt2",),
}
API_BASE = {"mfu": {"tokens_per_s": 1e5}, "inference": {"S": 256}, "serve": {"prompt_len": 256, "output_len": 16,
            "gpus": 2}, "train": {"global_batch": 16, "gpus": 2}, "plan": {"global_batch": 16, "gpus": 2},
            "sweep": {"B": "1,2"}}


@pytest.mark.parametrize("command", sorted(API_CALLS))
def test_hostile_python_values_give_a_tcalc_error_or_an_answer(command):
    """The API's contract (docs/api.md): a value an option refuses is a TcalcError naming the keyword;
    no KeyError, ZeroDivisionError, AttributeError or raw pydantic error leaves it."""
    function = getattr(tc, command)
    keywords = sorted(k for k, field in function.request.keywords().items() if k == field
                      and k not in ("model", "models", "config", "hf_config", "preset", "revision", "draft"))

    @settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.tuples(st.sampled_from(keywords), st.sampled_from(API_VALUES)), min_size=1, max_size=2,
                    unique_by=lambda kv: kv[0]))
    def check(options):
        kwargs = {**API_BASE.get(command, {}), **dict(options)}
        kwargs = {k: v for k, v in kwargs.items()
                  if not any(function.request.keywords().get(k) == function.request.keywords().get(o)
                             and k != o for o, _ in options)}
        try:
            result = function(*API_CALLS[command], **kwargs)
        except TcalcError as exc:
            assert "\n" not in str(exc), (kwargs, str(exc))
            return
        assert _finite(result.model_dump(mode="json")), kwargs

    check()


def test_state_dtype_is_for_hybrid_models(capsys):
    assert "hybrid" in _error(capsys, "inference", "llama-3-8b", "--S", "128", "--state-dtype", "bf16")
    small = tc.inference("qwen3.6-35b-a3b", S=4096, gpu="h100", state_dtype="bf16")
    full = tc.inference("qwen3.6-35b-a3b", S=4096, gpu="h100")
    assert small.model_dump()["memory"]["per_gpu"]["state_bytes"] < full.model_dump()["memory"]["per_gpu"]["state_bytes"]


def test_zero_images_is_no_images(capsys):
    """--images says [default: 0] in --help: 0 is accepted and means none; -1 is refused."""
    assert tc.inference("qwen3-vl-8b", S=1024, images=0).inference.prompt_len == 1024
    assert "--images" in _error(capsys, "inference", "qwen3-vl-8b", "--S", "1024", "--images", "-1")
