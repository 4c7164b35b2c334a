"""`tcalc flops` and `tcalc mfu`: `--format json` byte for byte as captured before the results were
typed (issue 21), one command line per optional section or key. Regenerate a file only for an
intended change of the JSON: `PYTHONPATH=$PWD python tests/test_json_golden_flops.py`."""

from __future__ import annotations


import pytest

from golden import GOLDEN, json_output, regenerate
from transformer_calc.cli import run

JOB = str(GOLDEN / "flops-job.yaml")

CASES: dict[str, list[str]] = {
    # flops: no training section, no for_budget
    "flops-1": ["flops", "gpt2"],
    # training with a time estimate (gpus, gpu, mfu), compute_optimal.for_budget, causal, recompute
    "flops-2": ["flops", "--preset", "gpt3", "--tokens", "300e9", "--gpus", "1024", "--gpu", "a100-80gb",
                "--mfu", "0.45", "--budget", "1e24", "--recompute", "selective", "--causal"],
    # training without a time estimate; MoE with a router, windowed
    "flops-3": ["flops", "mixtral-8x7b", "--S", "4096", "--B", "4", "--tokens", "1T", "--windowed"],
    # S, B, recompute from a job file's training: section; a GPU with its dtype's peak
    "flops-4": ["flops", "--config", JOB, "--tokens", "2e12", "--gpus", "8", "--gpu", "h100", "--dtype", "fp8"],
    # mfu: global batch and step time (per_step keys, global_batch, step_time_s)
    "mfu-1": ["mfu", "--preset", "gpt3", "--V", "51200", "--global-batch", "64", "--step-time", "13.75",
              "--gpus", "64", "--gpu", "a100-80gb"],
    # mfu: throughput only, selective recompute at the paper's HFU convention, causal
    "mfu-2": ["mfu", "llama-3-8b", "--tokens-per-s", "40000", "--gpus", "8", "--gpu", "h100",
              "--recompute", "selective", "--hfu-convention", "paper", "--causal"],
    # mfu: global batch in tokens; S and recompute from a job file
    "mfu-3": ["mfu", "--config", JOB, "--global-batch-tokens", "4M", "--step-time", "6.5", "--gpus", "64",
              "--gpu", "h100"],
}



@pytest.mark.parametrize("name", sorted(CASES))
def test_json_unchanged(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert json_output(CASES[name]) == (GOLDEN / f"{name}.json").read_text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_table_renders(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every optional section read by the table (render reads the typed result's attributes)."""
    code = run(CASES[name])
    out, err = capsys.readouterr()
    assert code == 0 and out.strip(), err


def test_training_time_in_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The table's training-time line (days, GPU-hours) with --gpus, --gpu and --mfu."""
    assert run(CASES["flops-2"]) == 0
    out = capsys.readouterr().out
    assert "25.65 days" in out and "GPU-hours" in out


def test_api_returns_the_typed_result(capsys: pytest.CaptureFixture[str]) -> None:
    import transformer_calc.api as tc
    from transformer_calc.results.flops import FlopsResult, MfuResult

    f = tc.flops("gpt3", tokens=300 * 10**9, gpus=1024, gpu="a100-80gb", mfu=0.45, budget=1e24)
    assert isinstance(f, FlopsResult) and f.training is not None and f.compute_optimal.for_budget is not None
    assert f.training.flops == f.flops.per_token * 300 * 10**9
    assert f.compute_optimal.for_budget.budget == 10**24  # an int FLOP count, as the CLI reads "1e24"
    m = tc.mfu("gpt2", S=1024, tokens_per_s=4e5, gpus=8, gpu="h100")
    assert isinstance(m, MfuResult) and m.flops.per_step is None and "global_batch" not in m.model_dump()


if __name__ == "__main__":  # regenerate the golden files
    regenerate(CASES)
