"""`tcalc calibrate` (issue 37): the fit on published runs, the log readers on the example logs,
bad input as one Error line, and a calibrated `tcalc train`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from transformer_calc.cli import run
from transformer_calc.estimators import calibrate as cal
from transformer_calc.results.calibrate import _train_run, calibrate_report
from transformer_calc.sources.files import parse_yaml
from transformer_calc.sources.runlogs import read_log, read_runs

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "examples" / "calibrate"
TRAIN_RUNS = REPO / "tools" / "validation" / "train_runs.yaml"
LAYOUT_KEYS = ("model", "gpu", "gpus", "seq_len", "global_batch", "micro_batch", "tensor", "pipeline", "virtual_stages",
               "context", "sequence_parallel", "recompute", "flash", "zero", "precision", "fp8_recipe", "framework",
               "compile", "tp_comm_overlap", "first_stage_layers", "last_stage_layers", "expert", "expert_tensor")


def call(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def published(prefix: str, precision: str) -> list[dict]:
    """tools/validation/train_runs.yaml's rows of one source and precision as calibrate runs."""
    rows = parse_yaml(TRAIN_RUNS.read_text(encoding="utf-8"), "train_runs.yaml")["rows"]
    out = []
    for r in rows:
        if r["id"].startswith(prefix) and r["precision"] == precision:
            run_ = {k: r[k] for k in LAYOUT_KEYS if k in r}
            run_.update(id=r["id"], where=r["id"], kind="train", measured={r["compare"]: r["measured"][r["compare"]]})
            out.append(run_)
    return out


# ---------------------------------------------------------------------------- the acceptance
def test_three_published_runs_predict_the_sources_other_run_within_5_percent():
    """torchtitan's December 2024 H100 benchmark (500 W power-capped HBM2e parts; at the cap's
    sustained clock still 13-19 % optimistic with the default profile), its four BF16 runs: fitted on any three,
    the fourth is predicted within 5 % (issue 37's acceptance: fit on three runs of one source,
    predict that source's other runs within 5 % median)."""
    runs = published("torchtitan-h100-8b", "mixed")
    assert len(runs) == 4
    priced = [_train_run(r) for r in runs]
    held_out_before, held_out_after = [], []
    for left in range(4):
        fit_runs = [r for i, r in enumerate(runs) if i != left]
        report = calibrate_report(fit_runs, ["train_runs.yaml"])
        assert [c.name for c in report.constants] == ["gemm_efficiency_bf16"]
        terms, measured, _ = priced[left]
        held_out_before.append(cal.error(terms, measured, {}))
        held_out_after.append(cal.error(terms, measured, report.profile.constants))
    assert min(abs(e) for e in held_out_before) > 0.10  # what calibration fixes
    assert max(abs(e) for e in held_out_after) <= 0.05
    assert cal.median_abs(held_out_after) <= 0.05


def test_the_example_runs_file_is_those_published_runs(capsys, tmp_path):
    """docs/examples/calibrate/runs.yaml (three of those runs) fits, writes a profile, and `tcalc
    train --profile` then predicts the fourth (Table 3, FSDP + torch.compile: 6,514 tokens/s/GPU)
    within 5 %, saying it is calibrated and on what."""
    profile = tmp_path / "h100.yaml"
    code, out, err = call(capsys, "calibrate", str(EXAMPLES / "runs.yaml"), "--output", str(profile), "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["profile_file"] == str(profile)
    assert data["median_abs_error_default"] > 0.1 and data["median_abs_error_left_out"] < 0.05
    (c,) = data["constants"]
    assert c["name"] == "gemm_efficiency_bf16" and 0.4 < c["value"] < 0.6 and 0 < c["uncertainty"] < 0.05
    argv = ["train", "llama-3-8b", "--gpu", "h100-96gb-hbm2e", "--gpus", "128", "--S", "8192", "--global-batch", "256",
            "--micro-batch", "2", "--framework", "torchtitan", "--recompute", "op", "--zero", "3", "--compile"]
    code, out, err = call(capsys, *argv, "--profile", str(profile), "-f", "json")
    assert code == 0, err
    calibrated = json.loads(out)
    assert abs(6514 / calibrated["tokens_per_s_per_gpu"] - 1) <= 0.05
    assert calibrated["calibration"]["matches"] and calibrated["calibration"]["fitted_on"]["runs"] == 3
    assert math.isclose(calibrated["step_time_s"], sum(calibrated["breakdown"].values())
                        + calibrated["calibration"]["step_overhead_s"], rel_tol=1e-9)
    code, out, err = call(capsys, *argv, "-f", "json")
    default = json.loads(out)
    assert "calibration" not in default and default["tokens_per_s_per_gpu"] > 1.1 * 6514
    code, out, err = call(capsys, *argv, "--profile", str(profile))
    assert code == 0 and "calibrated" in out


def test_csv_runs_file_matches_yaml():
    yaml_runs = read_runs(EXAMPLES / "runs.yaml")
    csv_runs = read_runs(EXAMPLES / "runs.csv")
    a = calibrate_report(yaml_runs, ["runs.yaml"]).profile.constants
    b = calibrate_report(csv_runs, ["runs.csv"]).profile.constants
    assert a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-6) for k in a)


# ---------------------------------------------------------------------------- the fitter
def test_the_fit_recovers_known_constants():
    """Runs priced with known constants (GEMM efficiency 0.5 of a default 0.7, communication 1.6x,
    0.3 s per step) are fitted back to them within the prior's pull (estimators/calibrate.py), and
    every error nearly vanishes; left out, the run that pins the overhead is off by a few per cent."""
    truth = {"gemm_efficiency_bf16": 0.5, "exposed_comm_factor": 1.6, "step_overhead_s": 0.3}
    terms = [cal.StepTerms(gemm_s=g, fixed_s=f, comm_s=x, bubble_s=b, dtype="bf16", default_gemm_efficiency=0.7)
             for g, f, x, b in [(4, 1, 1, 0), (2, 0.5, 2, 0.3), (8, 1, 0.5, 1), (1, 1, 1, 0), (3, 0.2, 3, 0.5),
                                (6, 2, 1.5, 0), (0.5, 0.1, 0.2, 0)]]
    measured = [cal.step_time(t, truth) for t in terms]
    constants = cal.free_constants(terms, measured)
    assert [c.name for c in constants] == ["gemm_efficiency_bf16", "step_overhead_s", "exposed_comm_factor"]
    result = cal.calibrate(terms, measured, constants)
    for c in result.constants:
        assert math.isclose(c.value, truth[c.name], rel_tol=3e-2), c
    assert max(abs(e) for e in result.errors_after) < 1e-2
    assert max(abs(e) for e in result.loo_errors) < 5e-2


def test_the_default_constants_reproduce_the_estimate():
    (terms, measured, _), = [_train_run(r) for r in published("torchtitan-h100-8b-8gpu-fsdp", "mixed")[:1]]
    assert math.isclose(cal.step_time(terms, {}), terms.step_time_s, rel_tol=1e-12)


# ---------------------------------------------------------------------------- the logs
def test_megatron_log():
    kind, found = read_log(EXAMPLES / "megatron.log")
    assert kind == "megatron"
    # the first iteration (warm-up) dropped; the median of 8612.4, 8598.1, 8605.9, 8601.0 ms
    assert found == {"step_time_s": pytest.approx((8601.0 + 8605.9) / 2 / 1e3), "steps": 5, "global_batch": 128}


def test_torchtitan_log():
    kind, found = read_log(EXAMPLES / "torchtitan.log")
    assert kind == "torchtitan"
    assert found == {"tokens_per_s_per_gpu": 5762.0, "steps": 4}  # ANSI colours stripped, step 1 dropped


def test_vllm_bench_serve_json():
    kind, found = read_log(EXAMPLES / "vllm_bench.json")
    assert kind == "vllm"
    assert found == {"ttft_s": pytest.approx(0.0618), "tpot_s": pytest.approx(0.00502), "output_tokens_per_s": 3031.0,
                     "prompt_len": 1000, "output_len": 250, "concurrency": 16}


def test_trtllm_bench_json():
    kind, found = read_log(EXAMPLES / "trtllm_bench.json")
    assert kind == "trtllm"
    assert found == {"ttft_s": pytest.approx(0.1846), "tpot_s": pytest.approx(0.0149),
                     "output_tokens_per_s": pytest.approx(4082.7), "prompt_len": 1000, "output_len": 250,
                     "concurrency": 64, "tensor": 1}


@pytest.mark.parametrize("name", ["logs.yaml", "serving.yaml"])
def test_the_example_runs_files_naming_logs_calibrate(capsys, name):
    code, out, err = call(capsys, "calibrate", str(EXAMPLES / name), "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["runs"] and all(math.isfinite(r["error_left_out"]) for r in data["runs"])
    if name == "serving.yaml":
        assert {c["name"] for c in data["constants"]} == {"gpu_time_factor", "request_overhead_s"}
        assert {r["metric"] for r in data["runs"]} == {"ttft_s", "tpot_s", "output_tokens_per_s"}


# ---------------------------------------------------------------------------- bad input
RUN = "  - {model: llama-3-8b, gpu: h100, gpus: 8, seq_len: 4096, global_batch: 64, step_time_s: 2.0}\n"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"r.yaml": "runs:\n  - {model: llama-3-8b, gpus: 8, seq_len: 4096, global_batch: 64, step_time_s: 2}\n"},
         "missing gpu"),
        ({"r.yaml": "runs:\n  - {model: llama-3-8b, gpu: h100, gpus: 8, seq_len: 4096, global_batch: 64}\n"},
         "no measurement"),
        ({"r.yaml": RUN}, "a mapping with a `runs:` list"),
        ({"r.yaml": "runs:\n" + RUN}, "at least 2 runs"),
        ({"r.yaml": "runs:\n" + RUN * 2, "--fit": "gemm_efficiency_bf16,exposed_comm_factor,step_overhead_s"},
         "2 measurements for 3 constants"),
        ({"r.yaml": "runs:\n" + RUN.replace("step_time_s: 2.0", "step_time_s: fast")}, "step_time_s is 'fast', not a number"),
        ({"r.yaml": "runs:\n" + RUN.replace("gpus: 8", "gpus: 8, gpuz: 8")}, "unknown key 'gpuz'"),
        ({"r.yaml": "runs:\n" + RUN.replace("step_time_s: 2.0", "log: m.log"),
          "m.log": " iteration 1/ 10 | consumed samples: 64 | elapsed time per iteration (ms): 2000 |\n"
                   " iteration 2/ 10 | consumed samples: 128 | learning rate: 1E-5 |\n"}, "m.log, line 2: a Megatron iteration line without"),
        ({"r.yaml": "runs:\n" + RUN.replace("step_time_s: 2.0", "log: t.log"),
          "t.log": "step: 1  loss: 10.1  memory: 3GiB\n"}, "t.log, line 1: a torchtitan step line without 'tps: X'"),
        ({"r.yaml": "runs:\n" + RUN.replace("step_time_s: 2.0", "log: v.json"), "v.json": '{"duration": 3}'},
         "no mean_ttft_ms, mean_tpot_ms or output_throughput"),
        ({"r.yaml": "runs:\n" + RUN.replace("global_batch: 64", "global_batch: 32").replace("step_time_s: 2.0", "log: m.log"),
          "m.log": " iteration 1/ 10 | elapsed time per iteration (ms): 2000 | global batch size: 64 |\n"},
         "global_batch is 32 but the log says 64"),
        ({"m.log": " iteration 1/ 10 | elapsed time per iteration (ms): 2000 |\n"}, "a log holds the measurement, not the run"),
        ({"r.csv": "model,gpu,gpus\nllama-3-8b,h100\n"}, "r.csv, row 2: 2 cells for 3 columns"),
        ({"r.yaml": "runs:\n" + RUN.replace("gpus: 8", "gpus: true")}, "gpus is 'True'; give a whole number"),
        ({"r.yaml": "runs:\n" + RUN.replace("gpus: 8", "gpus: 8, flash: 1")}, "flash is '1'; give true or false"),
        ({"r.yaml": "runs:\n" + RUN.replace("seq_len: 4096", "seq_len: 4096.5")}, "seq_len is '4096.5'"),
    ],
)
def test_bad_input_is_one_error_line(capsys, tmp_path, files, message):
    files = dict(files)
    extra = ["--fit", files.pop("--fit")] if "--fit" in files else []
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    first = next(iter(files))
    code, out, err = call(capsys, "calibrate", str(tmp_path / first), *extra)
    assert (code, out) == (2, ""), err
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert message in err


def test_a_bad_profile_is_one_error_line(capsys, tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("tcalc_profile: 1\nconstants: {gemm_efficiency_bf16: 0.5}\n", encoding="utf-8")
    code, out, err = call(capsys, "train", "llama-3-8b", "--gpus", "8", "--global-batch", "64", "--profile", str(bad))
    assert (code, out) == (2, "") and err.startswith("Error: ") and err.count("\n") == 1, err
    assert "fitted_on" in err


def test_plan_serve_and_inference_take_a_profile(capsys, tmp_path):
    """--profile on plan (the plans ranked by the calibrated step), serve and inference (the GPU's
    time scaled, the request overhead added): each says it is calibrated, in the table and the JSON."""
    train_profile, serve_profile = tmp_path / "train.yaml", tmp_path / "serve.yaml"
    assert call(capsys, "calibrate", str(EXAMPLES / "runs.yaml"), "-o", str(train_profile))[0] == 0
    assert call(capsys, "calibrate", str(EXAMPLES / "serving.yaml"), "-o", str(serve_profile))[0] == 0
    plan = ["plan", "llama-3-8b", "--gpu", "h100-96gb-hbm2e", "--gpus", "8", "--global-batch", "16", "--S", "8192",
            "--framework", "torchtitan"]
    code, out, err = call(capsys, *plan, "--profile", str(train_profile), "-f", "json")
    assert code == 0, err
    calibrated = json.loads(out)
    default = json.loads(call(capsys, *plan, "-f", "json")[1])
    assert calibrated["calibration"]["constants"].keys() == {"gemm_efficiency_bf16"}
    assert calibrated["plans"][0]["step_time_s"] > 1.1 * default["plans"][0]["step_time_s"]
    assert calibrated["best_command"].endswith(f"--profile {train_profile}")
    serve = ["serve", "llama-3-8b", "--gpu", "h100", "--gpus", "1", "--prompt-len", "1000", "--output-len", "250", "--B", "16"]
    code, out, err = call(capsys, *serve, "--profile", str(serve_profile), "-f", "json")
    assert code == 0, err
    s_cal = json.loads(out)
    s_def = json.loads(call(capsys, *serve, "-f", "json")[1])
    o_req = s_cal["calibration"]["constants"]["request_overhead_s"]
    assert o_req > 0 and s_cal["best"]["ttft_s"] > s_def["best"]["ttft_s"]
    code, out, err = call(capsys, "inference", "llama-3-8b", "--gpu", "h100", "--S", "1000", "--new-tokens", "250",
                          "--profile", str(serve_profile))
    assert code == 0 and "calibrated with" in out, err
    # a training profile has no serving constant: serve's answer is the default one, and says nothing
    code, out, err = call(capsys, *serve, "--profile", str(train_profile), "-f", "json")
    assert code == 0 and "calibration" not in json.loads(out)


def test_an_uncalibrated_train_answer_carries_its_validation_error(capsys, tmp_path):
    """Without --profile the step time carries the built-in profile's median |error| on the published
    runs of its framework, GPU generation and dense/MoE (validation_errors.py, generated from
    train_runs.yaml); with one, the profile's leave-one-out error instead."""
    from transformer_calc.estimators.training.validation_errors import VALIDATION_ERRORS, validation_error

    argv = ["train", "llama-3-8b", "--gpus", "8", "--global-batch", "64", "--S", "4096", "--gpu", "h100"]
    code, out, err = call(capsys, *argv, "-f", "json")
    assert code == 0, err
    ve = json.loads(out)["validation_error"]
    runs, median, within = VALIDATION_ERRORS[("megatron", "Hopper", "dense")]
    assert ve == {"framework": "megatron", "generation": "Hopper", "kind": "dense", "runs": runs,
                  "median_abs_error": median, "within_25pct": within}
    code, out, err = call(capsys, *argv)
    assert f"±{100 * median:.0f} %" in out and "uncertainty" in out
    assert validation_error("megatron", "MI300X", False) is None  # no published run: no claim
    profile = tmp_path / "p.yaml"
    call(capsys, "calibrate", str(EXAMPLES / "runs.yaml"), "-o", str(profile))
    code, out, err = call(capsys, *argv, "--profile", str(profile), "-f", "json")
    data = json.loads(out)
    assert "validation_error" not in data and not data["calibration"]["matches"]  # fitted on torchtitan's runs


def test_a_long_log_is_read(tmp_path):
    """A real run's log is larger than the 1 MiB a runs file may be (here 2 MB of Megatron lines with
    a progress bar's stray bytes): read up to 64 MiB."""
    line = (" iteration {i}/ 99999 | consumed samples: 64 | elapsed time per iteration (ms): {t} | "
            "global batch size: 64 | lm loss: 2.0 |\n")
    body = "".join(line.format(i=i, t=2000 + i % 3) for i in range(1, 20_000))
    path = tmp_path / "long.log"
    path.write_bytes(b"\xff\xfe progress \x1b[2K\n" + body.encode())
    kind, found = read_log(path)
    assert path.stat().st_size > 2_000_000 and kind == "megatron"
    assert found["steps"] == 19_999 and found["step_time_s"] == pytest.approx(2.001)


def test_a_job_files_profile_key(capsys, tmp_path):
    """The job file's top-level `profile:` (relative to the file) is --profile's default; the flag wins."""
    code, _, err = call(capsys, "calibrate", str(EXAMPLES / "runs.yaml"), "-o", str(tmp_path / "h100.yaml"))
    assert code == 0, err
    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: llama-3-8b}\nprofile: h100.yaml\ntraining: {gpu: h100-96gb-hbm2e, S: 8192, B: 2, "
                   "framework: torchtitan, recompute: op, zero: 3}\n", encoding="utf-8")
    code, out, err = call(capsys, "train", "--config", str(job), "--gpus", "8", "--global-batch", "16", "-f", "json")
    assert code == 0, err
    assert json.loads(out)["calibration"]["profile_file"] == str(tmp_path / "h100.yaml")
    job.write_text("model: {preset: llama-3-8b}\nprofile: [h100.yaml]\n", encoding="utf-8")
    code, out, err = call(capsys, "train", "--config", str(job), "--gpus", "8", "--global-batch", "16")
    assert code == 2 and err.startswith("Error: ") and "profile: must be a file name" in err


def test_a_profile_without_this_steps_constants_changes_nothing(capsys, tmp_path):
    """A serving profile given to train: no constant applies, so no calibration is claimed and the
    answer carries the built-in profile's validation error."""
    profile = tmp_path / "serve.yaml"
    assert call(capsys, "calibrate", str(EXAMPLES / "serving.yaml"), "-o", str(profile))[0] == 0
    argv = ["train", "llama-3-8b", "--gpus", "8", "--global-batch", "64", "--S", "4096", "--gpu", "h100", "-f", "json"]
    with_profile = json.loads(call(capsys, *argv, "--profile", str(profile))[1])
    assert with_profile == json.loads(call(capsys, *argv)[1]) and "validation_error" in with_profile
