"""The Python API (transformer_calc.api): each function's typed result dumps to exactly the
command's `--format json` output."""

from __future__ import annotations

import json

import pytest

import transformer_calc.api as tc
from transformer_calc.cli import run

CASES = [
    (lambda: tc.params("gpt2"), ["params", "--preset", "gpt2"]),
    (lambda: tc.params("gpt3", p=4, T=8), ["params", "--preset", "gpt3", "--p", "4", "--T", "8"]),
    (lambda: tc.memory("gpt3"), ["memory", "--preset", "gpt3"]),
    (lambda: tc.memory("llama-3-8b", S=8192, B=2, recompute="full", dp=64, zero=3, gpu="h100"),
     ["memory", "--preset", "llama-3-8b", "--S", "8192", "--B", "2", "--recompute", "full", "--dp", "64",
      "--zero", "3", "--gpu", "h100"]),
    (lambda: tc.memory("qwen3-30b-a3b", S=4096, ep=8, dp=8, flash=True),
     ["memory", "--preset", "qwen3-30b-a3b", "--S", "4096", "--ep", "8", "--dp", "8", "--flash"]),
    (lambda: tc.memory("llama-3.1-8b", finetune="qlora", lora_rank=16, lora_targets="all-linear", S=2048, B=1,
                       gpu="rtx-4090"),
     ["memory", "--preset", "llama-3.1-8b", "--finetune", "qlora", "--lora-rank", "16", "--lora-targets",
      "all-linear", "--S", "2048", "--B", "1", "--gpu", "rtx-4090"]),
    (lambda: tc.memory("llama-3.1-70b", S=4096, zero=3, offload="optimizer", dp=8, gpu="a100-80gb"),
     ["memory", "--preset", "llama-3.1-70b", "--S", "4096", "--zero", "3", "--offload", "optimizer", "--dp", "8",
      "--gpu", "a100-80gb"]),
    (lambda: tc.train("llama-3.1-8b", gpus=8, gpu="a100-80gb", global_batch=64, S=4096, finetune="qlora", zero=1),
     ["train", "--preset", "llama-3.1-8b", "--gpus", "8", "--gpu", "a100-80gb", "--global-batch", "64", "--S", "4096",
      "--finetune", "qlora", "--zero", "1"]),
    (lambda: tc.train("llama-3.1-70b", gpus=8, gpu="a100-80gb", global_batch=64, S=4096, zero=3, offload="optimizer",
                      recompute="full"),
     ["train", "--preset", "llama-3.1-70b", "--gpus", "8", "--gpu", "a100-80gb", "--global-batch", "64", "--S", "4096",
      "--zero", "3", "--offload", "optimizer", "--recompute", "full"]),
    (lambda: tc.plan("llama-3.1-8b", gpus=8, global_batch=32, S=2048, finetune="lora", lora_rank=8),
     ["plan", "--preset", "llama-3.1-8b", "--gpus", "8", "--global-batch", "32", "--S", "2048", "--finetune", "lora",
      "--lora-rank", "8"]),
    (lambda: tc.flops("gpt2", S=1024, B=4), ["flops", "--preset", "gpt2", "--S", "1024", "--B", "4"]),
    (lambda: tc.flops("gpt3", tokens=300 * 10**9, gpus=1024, gpu="a100-80gb", mfu=0.45),
     ["flops", "--preset", "gpt3", "--tokens", "300e9", "--gpus", "1024", "--gpu", "a100-80gb", "--mfu", "0.45"]),
    (lambda: tc.inference("llama-2-13b", S=8192), ["inference", "--preset", "llama-2-13b", "--S", "8192"]),
    (lambda: tc.inference("deepseek-v3", T=8, gpu="h200", S=32768, weight_dtype="fp8"),
     ["inference", "--preset", "deepseek-v3", "--T", "8", "--gpu", "h200", "--S", "32768", "--weight-dtype", "fp8"]),
    (lambda: tc.inference("gpt-oss-20b", S=4096, memory_utilization=0.8, block_size=32),
     ["inference", "--preset", "gpt-oss-20b", "--S", "4096", "--memory-utilization", "0.8", "--block-size", "32"]),
    (lambda: tc.serve("llama-3.1-70b", gpu="h100", gpus=8, prompt_len=2000, output_len=500, ttft_s=1, tpot_s=0.05),
     ["serve", "--preset", "llama-3.1-70b", "--gpu", "h100", "--gpus", "8", "--prompt-len", "2000", "--output-len",
      "500", "--ttft", "1", "--tpot", "0.05"]),
    (lambda: tc.train("gpt2", gpus=8, global_batch=64, S=1024),
     ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024"]),
    (lambda: tc.plan("gpt2", gpus=8, global_batch=64, S=1024),
     ["plan", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024"]),
    (lambda: tc.mfu("gpt3", S=2048, global_batch=1536, step_time=20.0, gpus=1024, gpu="a100-80gb"),
     ["mfu", "--preset", "gpt3", "--S", "2048", "--global-batch", "1536", "--step-time", "20", "--gpus", "1024",
      "--gpu", "a100-80gb"]),
    (lambda: tc.mfu(preset="gpt2", S=1024, tokens_per_s=4e5, gpus=8, gpu="h100", recompute="full"),
     ["mfu", "--preset", "gpt2", "--S", "1024", "--tokens-per-s", "4e5", "--gpus", "8", "--gpu", "h100",
      "--recompute", "full"]),
    (lambda: tc.presets(), ["presets"]),
    (lambda: tc.hardware(), ["hardware"]),
    (lambda: tc.hardware("h100"), ["hardware", "h100"]),
    (lambda: tc.memory(preset="gpt3"), ["memory", "--preset", "gpt3"]),
    (lambda: tc.sweep("llama-2-7b", B="1,2,4..64", T=[1, 2, 3], gpu="a100-80gb", recompute="full"),
     ["sweep", "--preset", "llama-2-7b", "--B", "1,2,4..64", "--T", "1,2,3", "--gpu", "a100-80gb", "--recompute", "full"]),
    (lambda: tc.sweep(models=["llama-3-8b", "mistral-7b"], S=[2048, 8192], gpu="h100,a100", kv_dtype="fp8",
                      metrics=["kv_cache_bytes", "inference_fits", "tokens_per_s"], new_tokens=64, sort="-tokens_per_s"),
     ["sweep", "--preset", "llama-3-8b,mistral-7b", "--S", "2048,8192", "--gpu", "h100,a100", "--kv-dtype", "fp8",
      "--metrics", "kv_cache_bytes,inference_fits,tokens_per_s", "--new-tokens", "64", "--sort", "-tokens_per_s"]),
    (lambda: tc.sweep(preset="gpt2,llama-2-7b", B=[1, 2], T="1,3"),
     ["sweep", "--preset", "gpt2,llama-2-7b", "--B", "1,2", "--T", "1,3"]),
    (lambda: tc.sweep("gpt3", S=2048, T=8, P=[4, 8], sp=True, grad_bytes=2, flash=[True, False], gpu="h100",
                      metrics="peak_bytes,hardware_flops,train_days", tokens=300 * 10**9, dtype="fp8"),
     ["sweep", "--preset", "gpt3", "--S", "2048", "--T", "8", "--P", "4,8", "--sp", "--grad-bytes", "2",
      "--flash", "true,false", "--gpu", "h100", "--metrics", "peak_bytes,hardware_flops,train_days",
      "--tokens", "300e9", "--dtype", "fp8"]),
]


@pytest.mark.parametrize("call, argv", CASES)
def test_result_dumps_to_the_commands_json(capsys, call, argv):
    result = call()
    assert run([*argv, "-f", "json"]) == 0
    assert result.model_dump(mode="json") == json.loads(capsys.readouterr().out)


def test_models_from_every_source(tmp_path):
    from transformer_calc.model.config import ModelConfig

    a = tc.params({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6}).params.total
    b = tc.params(ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6})).params.total
    job = tmp_path / "m.yaml"
    job.write_text("model: {L: 2, D: 8, A: 2, V: 10, K: 6}\n")
    assert a == b == tc.params(str(job)).params.total == 1888
    hf = tmp_path / "config.json"
    hf.write_text('{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, '
                  '"vocab_size": 100, "intermediate_size": 128}')
    assert tc.params(hf).params.total > 0


def test_the_package_is_the_api():
    """`import transformer_calc as tc` gives the same functions (issue 12's acceptance form); the
    estimator modules live in their layer folders, never under an API function's name (issue 21)."""
    import transformer_calc

    assert transformer_calc.memory is tc.memory and transformer_calc.flops is tc.flops
    assert transformer_calc.memory(preset="gpt3").model_dump(mode="json") == tc.memory("gpt3").model_dump(mode="json")
    from transformer_calc.estimators.training.memory import training_memory  # the estimator module, by its path

    assert callable(training_memory) and transformer_calc.memory is tc.memory
    assert "memory" in dir(transformer_calc)


def test_check_matches_the_command(tmp_path, capsys):
    ok = tmp_path / "ok.yaml"
    ok.write_text("model: {preset: gpt2}\ntraining: {S: 1024, B: 1}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {preset: gpt2, n_layers: yes}\n")
    result = tc.check(ok, bad, gpu="a100-80gb")
    assert run(["check", str(ok), str(bad), "--gpu", "a100-80gb", "-f", "json"]) == 2
    assert result.model_dump(mode="json") == json.loads(capsys.readouterr().out)
    assert (result.passed, result.invalid) == (1, 1)


def test_model_given_twice_or_not_at_all_is_an_error():
    with pytest.raises(TypeError, match="once"):
        tc.params("gpt2", preset="gpt2")
    with pytest.raises(TypeError, match="once"):
        tc.memory()


def test_inference_and_serve_return_typed_sections():
    """`tc.inference` and `tc.serve` return their typed results: attributes all the way down,
    frozen, and the optional sections unset (absent from the JSON) when not produced."""
    from pydantic import ValidationError

    from transformer_calc.results.inference import InferenceResult
    from transformer_calc.results.serve import ServeResult

    r = tc.inference("llama-3-8b", S=2048, new_tokens=64, gpu="h100", draft="llama-3.2-1b")
    assert isinstance(r, InferenceResult)
    per = r.memory.per_gpu
    assert per.total_bytes == per.weights_bytes + per.kv_cache_bytes + per.workspace_bytes
    assert r.memory.headroom_bytes == r.memory.capacity_bytes - per.total_bytes
    assert r.expected.assumptions.kernels_per_step > 0 and r.serving.engine.block_size == 16
    assert r.speculative.kind == "draft" and r.speculative.draft == "llama-3.2-1b"
    assert r.kv_cache.layers_by_kind == {"full": 32}
    assert "checkpoint" not in r.model_dump() and r.checkpoint is None
    with pytest.raises(ValidationError):
        r.memory.fits = False
    naive = tc.inference("gpt2", kv_cache=False)
    assert naive.serving is None and "serving" not in naive.model_dump(mode="json")

    s = tc.serve("llama-3.1-70b", gpu="h100", gpus=8, prompt_len=2000, output_len=500, ttft_s=1, tpot_s=0.05)
    assert isinstance(s, ServeResult)
    assert s.best == s.layouts[0] and s.best.feasible and s.serve.targets.ttft_s == 1.0
    assert s.expected_assumptions.node_size == 8
    assert [row.reason is None for row in s.layouts] == [row.feasible for row in s.layouts]
