"""The Python API (transformer_calc.api): each function's typed result dumps to exactly the
command's `--format json` output."""

from __future__ import annotations

import json

import pytest

from transformer_calc.errors import TcalcError

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
     ["plan", "llama-3.1-8b", "--gpus", "8", "--global-batch", "32", "--S", "2048", "--finetune", "lora",
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
     ["plan", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024"]),
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
    """As the command line says it (one resolver, sources.resolve.load_source)."""
    with pytest.raises(TcalcError, match="one model source"):
        tc.params("gpt2", preset="gpt2")
    with pytest.raises(TcalcError, match="no model given"):
        tc.memory()


# ---------------------------------------------------------------------------- keywords (issue 21)
EVERY_FUNCTION = {
    "params": (tc.params, ("gpt2",), {}),
    "memory": (tc.memory, ("gpt2",), {}),
    "flops": (tc.flops, ("gpt2",), {}),
    "mfu": (tc.mfu, ("gpt2",), {"tokens_per_s": 1e5}),
    "inference": (tc.inference, ("gpt2",), {}),
    "serve": (tc.serve, ("gpt2",), {"prompt_len": 100, "output_len": 10}),
    "train": (tc.train, ("gpt2",), {"global_batch": 8}),
    "plan": (tc.plan, ("gpt2",), {"global_batch": 8}),
    "sweep": (tc.sweep, ("gpt2",), {}),
    "check": (tc.check, (), {}),
    "presets": (tc.presets, (), {}),
    "hardware": (tc.hardware, (), {}),
    "load": (tc.load, ("gpt2",), {}),
}


@pytest.mark.parametrize("name", sorted(EVERY_FUNCTION))
def test_an_unknown_keyword_is_a_type_error_naming_it(name):
    fn, args, kwargs = EVERY_FUNCTION[name]
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument 'frobnicate'"):
        fn(*args, **kwargs, frobnicate=5)


@pytest.mark.parametrize("call, message", [
    (lambda: tc.train("gpt2", gpus=8, global_batch=8, dtyp="fp8"), "'dtyp'; did you mean 'dtype'"),
    (lambda: tc.memory("gpt2", typo=3), "'typo'"),  # was a raw KeyError
    (lambda: tc.memory("gpt2", recompte="full"), "did you mean 'recompute'"),
    (lambda: tc.inference("gpt2", unknown=5), "'unknown'"),  # was ignored
    (lambda: tc.sweep(preset="gpt2", cache_kv_head=8), "'cache_kv_head'; did you mean 'cache_kv_heads'"),
    (lambda: tc.flops("gpt2", seq_len=512, S=512), "'S' and 'seq_len'"),  # one option, two names
    (lambda: tc.params("gpt2", T=2, tensor=2), "'T' and 'tensor'"),
])
def test_keyword_errors_name_the_keyword(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_model_overrides_are_keywords_as_they_are_flags(capsys):
    """`tcalc params gpt2 --L 24` is `tc.params("gpt2", L=24)` (it kept 12 layers before: the keyword
    was dropped); `--set` is `set={...}`; plan's best_command repeats them."""
    assert tc.params("gpt2", L=24).model_dump(mode="json") == (run(["params", "gpt2", "--L", "24", "-f", "json"]), json.loads(capsys.readouterr().out))[1]
    assert tc.params("gpt2", set={"mlp": "swiglu"}).params.total == tc.params("gpt2", d_ff=3072, set={"mlp": "swiglu"}).params.total
    assert tc.sweep("gpt2", kv_heads=4, B=1).points[0]["peak_bytes"] > 0  # gpt2 with 4 K/V heads (GQA)
    assert "--L 6" in tc.plan("gpt2", L=6, gpus=8, global_batch=8).best_command
    # set= takes the CLI's KEY=VALUE text too (one or a list), or a dict; anything else names set=
    assert tc.params("gpt2", set="mlp=swiglu") == tc.params("gpt2", set={"mlp": "swiglu"})
    assert tc.params("gpt2", set=["mlp=swiglu", "d_ff=3072"]) == tc.params("gpt2", set={"mlp": "swiglu"})
    with pytest.raises(TcalcError, match="set=3: takes a dict"):
        tc.params("gpt2", set=3)


def test_descriptive_names_are_the_letters():
    """docs/notation.md's names work wherever the seed's letter does (flops ran S=1024 for seq_len=512)."""
    assert tc.flops("gpt2", seq_len=512).workload.seq_len == 512
    assert tc.train("gpt2", global_batch=8, tensor=2).layout.tensor == 2
    assert tc.train("gpt2", global_batch=16, batch_size=2).batch.micro_batch == 2  # train's B is the micro-batch
    assert tc.memory("gpt2", head=False).training.head_activations is False


CLI_OPTIONS = [  # an option the CLI command has, given to the API function: the same JSON
    (lambda: tc.train("gpt2", gpus=8, global_batch=8, dtype="fp8"),
     ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "8", "--dtype", "fp8"]),
    (lambda: tc.train("gpt2", gpus=32, global_batch=32, P=4, node_size=16, inter_node_gb_s=5),
     ["train", "--preset", "gpt2", "--gpus", "32", "--global-batch", "32", "--P", "4", "--node-size", "16",
      "--inter-node-gb-s", "5"]),
    (lambda: tc.train("gpt2", global_batch_tokens=8192, p=4),
     ["train", "--preset", "gpt2", "--global-batch-tokens", "8192", "--p", "4"]),
    (lambda: tc.plan("gpt2", gpus=32, global_batch=64, node_size=4, inter_node_gb_s=5),
     ["plan", "gpt2", "--gpus", "32", "--global-batch", "64", "--node-size", "4", "--inter-node-gb-s", "5"]),
    (lambda: tc.params("gpt2", dtype="fp32"), ["params", "--preset", "gpt2", "--dtype", "fp32"]),
    (lambda: tc.memory("gpt2", dtype="fp32", gpu="h100"), ["memory", "--preset", "gpt2", "--dtype", "fp32", "--gpu", "h100"]),
    (lambda: tc.flops("gpt2", tokens=10**9, gpus=8, gpu="h100", p=1),
     ["flops", "--preset", "gpt2", "--tokens", "1e9", "--gpus", "8", "--gpu", "h100", "--p", "1"]),
    (lambda: tc.mfu("gpt2", tokens_per_s=1e5, gpus=8, gpu="h100", p=4),
     ["mfu", "--preset", "gpt2", "--tokens-per-s", "1e5", "--gpus", "8", "--gpu", "h100", "--p", "4"]),
    (lambda: tc.inference("llama-3-70b", T=16, gpu="h100", S=1024, node_size=4, inter_node_gb_s=5),
     ["inference", "--preset", "llama-3-70b", "--T", "16", "--gpu", "h100", "--S", "1024", "--node-size", "4",
      "--inter-node-gb-s", "5"]),
    (lambda: tc.serve("llama-3-70b", gpu="h100", gpus=16, prompt_len=1000, output_len=100, T=16, node_size=4),
     ["serve", "--preset", "llama-3-70b", "--gpu", "h100", "--gpus", "16", "--prompt-len", "1000", "--output-len",
      "100", "--T", "16", "--node-size", "4"]),
    (lambda: tc.sweep("gpt2", B=[1, 2], finetune="lora", lora_rank=8, head=False),
     ["sweep", "--preset", "gpt2", "--B", "1,2", "--finetune", "lora", "--lora-rank", "8", "--no-head"]),
]


@pytest.mark.parametrize("call, argv", CLI_OPTIONS)
def test_the_api_takes_the_commands_options(capsys, call, argv):
    result = call()
    assert run([*argv, "-f", "json"]) == 0
    assert result.model_dump(mode="json") == json.loads(capsys.readouterr().out)


def test_dtype_changes_the_step_as_the_flag_does():
    """tc.train(..., dtype="fp8") priced bf16 before: the fp8 peak makes the step faster."""
    bf16 = tc.train("gpt2", gpus=8, global_batch=8)
    fp8 = tc.train("gpt2", gpus=8, global_batch=8, dtype="fp8")
    assert fp8.step_time_s < bf16.step_time_s and fp8.training.p == 1


def test_serve_reads_the_job_file_as_the_command(tmp_path, capsys):
    """Prompt and output lengths, targets, T and the GPU count from the inference: section."""
    job = tmp_path / "serve.yaml"
    job.write_text("model: {preset: llama-3-8b}\ninference: {S: 1000, new_tokens: 100, ttft_s: 1, tpot_s: 0.05, "
                   "T: 2, gpus: 4, gpu: h100}\n")
    result = tc.serve(str(job))
    assert run(["serve", "--config", str(job), "-f", "json"]) == 0
    assert result.model_dump(mode="json") == json.loads(capsys.readouterr().out)
    assert result.serve.targets.ttft_s == 1 and result.serve.targets.tpot_s == 0.05 and result.serve.gpus == 4
