"""`tcalc train` and `tcalc plan`: `--format json` byte for byte as captured before the results were
typed (issue 21), one command line per optional section or key. Regenerate a file only for an
intended change of the JSON: `PYTHONPATH=$PWD python tests/test_json_golden_train.py`."""

from __future__ import annotations


import pytest

from golden import GOLDEN, json_output, regenerate
from transformer_calc.cli import run


CASES: dict[str, list[str]] = {
    # train: the micro-batch given (nothing tried), no budget
    "train-1": ["train", "--preset", "gpt3", "--gpus", "64", "--gpu", "a100-80gb", "--T", "8", "--P", "8", "--sp",
                "--recompute", "selective", "--global-batch", "64", "--micro-batch", "1", "--S", "2048"],
    # the micro-batch chosen (batch.tried), a budget with its cost
    "train-2": ["train", "llama-3-8b", "--gpus", "8", "--gpu", "h100", "--global-batch", "64", "--S", "4096",
                "--tokens", "15T", "--price-per-gpu-hour", "2.5"],
    # offload (memory's offload keys, the offload assumptions), a budget without a cost
    "train-3": ["train", "--preset", "llama-3.1-70b", "--gpus", "8", "--gpu", "a100-80gb", "--global-batch", "64",
                "--S", "4096", "--zero", "3", "--offload", "optimizer", "--micro-batch", "1", "--tokens", "1e9"],
    # a MoE with EP and CP, an FP8 recipe, a given network and matmul efficiency
    "train-4": ["train", "mixtral-8x7b", "--gpus", "32", "--gpu", "h100", "--T", "2", "--cp", "2", "--ep", "8",
                "--global-batch", "32", "--S", "8192", "--fp8-recipe", "delayed", "--node-size", "4",
                "--inter-node-gb-s", "40", "--matmul-efficiency", "0.5", "--zero", "3"],
    # LoRA (the training section's adapter keys)
    "train-5": ["train", "--preset", "llama-3.1-8b", "--gpus", "8", "--gpu", "a100-80gb", "--global-batch", "64",
                "--S", "4096", "--finetune", "qlora", "--lora-rank", "8", "--lora-targets", "q,v"],
    # plan: a preset (best_command names it), the batch in tokens, the top 3
    "plan-1": ["plan", "--preset", "llama-3-8b", "--gpus", "64", "--gpu", "h100", "--global-batch-tokens", "4M",
               "--S", "8192", "--top", "3"],
    # nothing fits: no plans, best_command null
    "plan-2": ["plan", "llama-3.1-405b", "--gpus", "8", "--gpu", "a100-40gb", "--global-batch", "8", "--S", "8192"],
    # LoRA, no flash, a model given as MODEL (best_command says <model>)
    "plan-3": ["plan", "mixtral-8x7b", "--gpus", "16", "--global-batch", "32", "--S", "4096", "--finetune", "lora",
               "--lora-rank", "8", "--no-flash", "--top", "2"],
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


def test_api_returns_the_typed_result() -> None:
    import transformer_calc.api as tc
    from transformer_calc.results.train import PlanResult, TrainResult

    t = tc.train("gpt2", gpus=8, global_batch=64, S=1024, tokens=10**9, price_per_gpu_hour=2.0)
    assert isinstance(t, TrainResult) and t.budget is not None and t.budget.cost is not None
    assert t.budget.cost == pytest.approx(2.0 * t.budget.gpu_hours)
    assert sum(seconds for _, seconds in t.breakdown) == pytest.approx(t.step_time_s)
    assert t.memory.offload_device is None and "offload_device" not in t.model_dump()["memory"]
    p = tc.plan("gpt2", gpus=8, global_batch=64, S=1024, top=2)
    assert isinstance(p, PlanResult) and len(p.plans) == 2 and p.plans[0].step_time_s <= p.plans[1].step_time_s


if __name__ == "__main__":  # regenerate the golden files
    regenerate(CASES)
