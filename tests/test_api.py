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
    (lambda: tc.flops("gpt2", S=1024, B=4), ["flops", "--preset", "gpt2", "--S", "1024", "--B", "4"]),
    (lambda: tc.flops("gpt3", tokens=300 * 10**9, gpus=1024, gpu="a100-80gb", mfu=0.45),
     ["flops", "--preset", "gpt3", "--tokens", "300e9", "--gpus", "1024", "--gpu", "a100-80gb", "--mfu", "0.45"]),
    (lambda: tc.inference("llama-2-13b", S=8192), ["inference", "--preset", "llama-2-13b", "--S", "8192"]),
    (lambda: tc.inference("deepseek-v3", T=8, gpu="h200", S=32768, weight_dtype="fp8"),
     ["inference", "--preset", "deepseek-v3", "--T", "8", "--gpu", "h200", "--S", "32768", "--weight-dtype", "fp8"]),
    (lambda: tc.train("gpt2", gpus=8, global_batch=64, S=1024),
     ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024"]),
    (lambda: tc.plan("gpt2", gpus=8, global_batch=64, S=1024),
     ["plan", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024"]),
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
    from transformer_calc.config import ModelConfig

    a = tc.params({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6}).params["total"]
    b = tc.params(ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6})).params["total"]
    job = tmp_path / "m.yaml"
    job.write_text("model: {L: 2, D: 8, A: 2, V: 10, K: 6}\n")
    assert a == b == tc.params(str(job)).params["total"] == 1888
    hf = tmp_path / "config.json"
    hf.write_text('{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, '
                  '"vocab_size": 100, "intermediate_size": 128}')
    assert tc.params(hf).params["total"] > 0
