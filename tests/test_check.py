"""`tcalc check` (a CI gate) and job files: one YAML for every command, flags override the file."""

from __future__ import annotations

import json

import pytest

from transformer_calc.cli import run
from transformer_calc.model.config import parse_bytes
from transformer_calc.estimators.training.timeline import peak_memory
from transformer_calc.model.config import Parallelism, Training, Workload
from transformer_calc.sources.presets import preset_model

OK = """\
model:
  preset: llama-2-7b
training:
  S: 4096
  T: 8
  sp: true
  recompute: selective
  flash: true
"""
BIG = "model: {preset: gpt3}\ntraining: {seq_len: 2048, batch_size: 1}\n"


def write(tmp_path, name, text):
    f = tmp_path / name
    f.write_text(text)
    return str(f)


def call(capsys, *argv):
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ok_total():
    m = preset_model("llama-2-7b")
    tr = Training(recompute="selective", flash=True, framework="megatron")  # tcalc memory's default framework
    # the step's peak (docs/formulas.md §2.5), not the sum of everything ever allocated
    return peak_memory(m, Workload(seq_len=4096), tr, Parallelism(tensor=8, sequence_parallel=True, zero=1)).peak_bytes


def test_all_pass_exit_0(tmp_path, capsys):
    f = write(tmp_path, "ok.yaml", OK)
    code, out, err = call(capsys, "check", f, "--gpu", "a100-80gb")
    assert code == 0 and err == ""
    assert out.splitlines()[0].startswith(f"PASS  {f}: training") and "fits A100-SXM4-80GB" in out
    assert out.splitlines()[-1] == "1 passed, 0 failed, 0 invalid"


def test_a_failed_check_exits_1(tmp_path, capsys):
    ok, big = write(tmp_path, "ok.yaml", OK), write(tmp_path, "big.yaml", BIG)
    code, out, _ = call(capsys, "check", ok, big, "--gpu", "a100-80gb")
    assert code == 1
    assert out.splitlines()[1].startswith(f"FAIL  {big}: training") and "exceeds" in out


def test_an_invalid_file_exits_2_and_others_still_run(tmp_path, capsys):
    ok = write(tmp_path, "ok.yaml", OK)
    bad = write(tmp_path, "bad.yaml", "model: {preset: gpt3}\ntrainig: {S: 2048}\n")
    code, out, _ = call(capsys, "check", bad, ok, "--max-memory", "70GiB")
    assert code == 2
    lines = out.splitlines()
    assert lines[0] == f"INVALID {bad}: unknown section 'trainig'; did you mean 'training'?"
    assert lines[1].startswith(f"PASS  {ok}")


def test_json_report(tmp_path, capsys):
    ok, big = write(tmp_path, "ok.yaml", OK), write(tmp_path, "big.yaml", BIG)
    code, out, _ = call(capsys, "check", ok, big, "--max-memory", "70GiB", "--format", "json")
    data = json.loads(out)
    assert code == 1
    assert (data["passed"], data["failed"], data["invalid"]) == (1, 1, 0)
    first = data["files"][0]
    assert first["status"] == "pass"
    assert first["checks"] == [{"check": "training_max_memory", "ok": True, "value": ok_total(), "limit": 70 * 2**30}]


def test_limits_from_the_file(tmp_path, capsys):
    f = write(tmp_path, "c.yaml", OK + "checks:\n  max_memory: 10GB\n  gpu: h100\n")
    code, out, _ = call(capsys, "check", f, "-f", "json")
    checks = {c["check"]: c for c in json.loads(out)["files"][0]["checks"]}
    assert checks["training_max_memory"]["limit"] == 10 * 10**9
    assert checks["training_fits_gpu"]["gpu"] == "H100-SXM5-80GB"
    assert code == (0 if ok_total() <= 10 * 10**9 else 1)


def test_no_limits_just_validates(tmp_path, capsys):
    f = write(tmp_path, "m.yaml", "model: {preset: gpt2}\n")
    code, out, _ = call(capsys, "check", f)
    assert code == 0 and out.startswith(f"PASS  {f}: valid")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "FILE", "--max-memory", "70 GiBs"], "--max-memory ('70 GiBs') is not a size"),
        (["check", "FILE", "--gpu", "a100-80g"], "did you mean 'a100-80gb'"),
    ],
)
def test_bad_flags_are_usage_errors(tmp_path, capsys, argv, message):
    f = write(tmp_path, "ok.yaml", OK)
    code, out, err = call(capsys, *[f if a == "FILE" else a for a in argv])
    assert (code, out) == (2, "") and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model: {preset: gpt3}\ntraining: {S: 2048, T: 5}\n", "n_heads (96) must be divisible by T (5)"),
        ("model: {preset: gpt3}\ntraining: {batchsize: 2}\n", "unknown key 'batchsize'; did you mean 'batch_size'"),
        ("model: {preset: gpt3}\ntraining: {zero: 7}\n", "zero (7)"),
        ("training: {S: 1}\n", "has training: but no model: section"),
        ("model: {preset: gpt3}\ntraining: {S: 2048, S: 1024}\n", "key 'S' is given twice"),  # issue 13: no silent last-wins
        ("model: {preset: gpt3}\ninference: {new_tokns: 5}\n", "unknown key 'new_tokns'; did you mean 'new_tokens'"),
        ("model: {preset: gpt3}\nchecks: {max_memory: lots}\n", "checks.max_memory ('lots') is not a size"),
        ("model: !!python/object/apply:os.system ['true']\n", "plain YAML values only"),
    ],
)
def test_invalid_job_files(tmp_path, capsys, text, message):
    f = write(tmp_path, "j.yaml", text)
    code, out, _ = call(capsys, "check", f, "--max-memory", "1TiB")
    if message:
        assert code == 2 and message in out, out
    else:
        assert code in (0, 1)


def test_memory_reads_the_job_file_and_flags_override(tmp_path, capsys):
    f = write(tmp_path, "ok.yaml", OK)
    code, out, _ = call(capsys, "memory", "--config", f, "--B", "2", "-f", "json")
    data = json.loads(out)
    assert code == 0
    assert data["workload"] == {"seq_len": 4096, "batch_size": 2}  # S from the file, B from the flag
    assert data["parallelism"]["tensor"] == 8 and data["parallelism"]["sequence_parallel"] is True
    assert data["training"]["recompute"] == "selective" and data["training"]["flash"] is True
    code, out, _ = call(capsys, "memory", "--config", f, "--T", "4", "--no-sp", "-f", "json")
    data = json.loads(out)
    assert data["parallelism"]["tensor"] == 4 and data["parallelism"]["sequence_parallel"] is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [("70GiB", 70 * 2**30), ("80GB", 80 * 10**9), ("80 gb", 80 * 10**9), ("1.5TiB", 3 * 2**39), ("4096", 4096), ("8e10", 8 * 10**10), ("512MiB", 2**29)],
)
def test_parse_bytes_gb_and_gib_explicit(text, expected):
    assert parse_bytes(text) == expected


INF = "model: {preset: llama-2-13b}\ninference: {B: 16, S: 4096, new_tokens: 256, T: 2, gpu: a100-80gb}\n"


def test_inference_checks_from_the_file_and_flags(tmp_path, capsys):
    """Throughput, TTFT and TPOT on `tcalc serve`'s model: one replica with B = 16 in flight."""
    from transformer_calc.estimators.inference.expected import default_efficiency
    from transformer_calc.estimators.inference.roofline import InferenceSpec, estimate_inference
    from transformer_calc.sources.presets import gpu
    from transformer_calc.estimators.inference.serving import engine_serving, load_point

    m, a100 = preset_model("llama-2-13b"), gpu("a100-80gb")
    spec = InferenceSpec(batch_size=16, prompt_len=4096, new_tokens=256, tensor_parallel=2)
    est = estimate_inference(m, a100, spec)
    vllm = engine_serving("vllm", a100, 2)  # the default engine's profile on an A100 (2048 tokens per step)
    point = load_point(m, a100, spec, default_efficiency(a100), vllm, 4096, 256, 16)
    f = write(tmp_path, "i.yaml", INF + f"checks: {{min_tokens_per_s: {point.output_tokens_per_s * 0.9}, "
              f"max_ttft_s: 100, max_tpot_s: {point.tpot_s * 1.01}}}\n")
    code, out, _ = call(capsys, "check", f, "-f", "json")
    checks = {c["check"]: c for c in json.loads(out)["files"][0]["checks"]}
    assert code == 0
    assert checks["inference_fits_gpu"]["value"] == est.memory.total_bytes
    assert checks["inference_min_tokens_per_s"]["value"] == point.output_tokens_per_s
    assert checks["inference_max_ttft_s"]["value"] == point.ttft_s
    assert checks["inference_max_tpot_s"]["value"] == point.tpot_s
    assert point.tpot_s > est.decode.seconds_per_token  # the expected model, above the bound
    code, out, _ = call(capsys, "check", f, "--min-tokens-per-s", str(point.output_tokens_per_s * 2))
    assert code == 1 and "decode tokens/s" in out and " < " in out
    g = write(tmp_path, "j.yaml", INF + f"checks: {{max_tpot_s: {point.tpot_s * 0.5}}}\n")
    code, out, _ = call(capsys, "check", g)
    assert code == 1 and "time per output token (s)" in out and " > " in out


def test_flops_and_mfu_read_the_job_files_training_section(tmp_path, capsys):
    f = write(tmp_path, "j.yaml", "model: {preset: gpt2}\ntraining: {S: 512, B: 4, recompute: full}\n")
    code, out, _ = call(capsys, "flops", "--config", f, "-f", "json")
    data = json.loads(out)
    assert code == 0 and data["workload"] == {"seq_len": 512, "batch_size": 4}
    assert data["conventions"]["recompute"] == "full"
    code, out, _ = call(capsys, "flops", "--config", f, "--B", "2", "--recompute", "none", "-f", "json")
    data = json.loads(out)
    assert data["workload"]["batch_size"] == 2 and data["conventions"]["recompute"] == "none"
    code, out, _ = call(capsys, "mfu", "--config", f, "--tokens-per-s", "1e5", "-f", "json")
    data = json.loads(out)
    assert code == 0 and data["seq_len"] == 512 and data["flops"]["recompute"] == "full"


def test_a_check_that_cannot_run_is_invalid_not_pass(tmp_path, capsys):
    # --min-tokens-per-s on a file without an inference: section: nothing to measure it on
    f = write(tmp_path, "ok.yaml", OK)
    code, out, _ = call(capsys, "check", f, "--min-tokens-per-s", "10")
    assert code == 2 and out.startswith(f"INVALID {f}: --min-tokens-per-s is an inference check")


def test_every_file_is_reported_invalid_ones_too(tmp_path, capsys):
    ok = write(tmp_path, "a.yaml", OK)
    bad = write(tmp_path, "b.yaml", "model: {preset: gpt3}\ntraining: {S: 2048, S: 1024}\n")
    nan = write(tmp_path, "c.yaml", "model: {preset: gpt3}\ninference: {B: 1}\nchecks: {max_ttft_s: .nan}\n")
    code, out, _ = call(capsys, "check", ok, bad, nan, "--gpu", "a100-80gb")
    lines = out.splitlines()
    assert code == 2  # an invalid file wins over pass and fail
    assert lines[0].startswith(f"PASS  {ok}") and lines[1].startswith(f"INVALID {bad}")
    assert lines[2].startswith(f"INVALID {nan}") and "non-finite" in lines[2]
    assert lines[-1] == "1 passed, 0 failed, 2 invalid"
