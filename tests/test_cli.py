"""CLI: JSON equals the library call; errors are one line on stderr with exit 2; every command works."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from transformer_calc.cli import full_app, run
from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.params import count_params
from transformer_calc.sources.presets import preset_model
from transformer_calc.results.params import params_report


def call(capsys, *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def call_json(capsys, *argv: str):
    code, out, err = call(capsys, *argv, "--format", "json")
    assert code == 0, err
    assert all(line.startswith(("note: ", "warning: ")) for line in err.splitlines()), err
    return json.loads(out)


def test_params_json_equals_library(capsys):
    data = call_json(capsys, "params", "--preset", "gpt2")
    assert data == params_report(preset_model("gpt2")).model_dump(mode="json")
    assert data["params"]["total"] == 124_439_808  # HF openai-community/gpt2
    assert type(data["params"]["total"]) is int
    assert data["model"]["n_layers"] == 12 and data["model"]["name"] == "gpt2"


def test_params_overrides_with_seed_letters(capsys):
    data = call_json(capsys, "params", "--preset", "gpt2", "--L", "24", "--D", "1024", "--A", "16")
    expected = preset_model("gpt2").with_overrides({"n_layers": 24, "d_model": 1024, "n_heads": 16})
    assert data["params"]["total"] == count_params(expected).total
    assert data["model"]["d_ff"] == 4096  # re-derived from E = 4


def test_params_long_names_equal_letters(capsys):
    a = call_json(capsys, "params", "--preset", "gpt2", "--n-layers", "6", "--expansion", "2")
    b = call_json(capsys, "params", "--preset", "gpt2", "--L", "6", "--E", "2")
    assert a == b and a["model"]["d_ff"] == 1536


def test_params_from_flags_alone(capsys):
    data = call_json(capsys, "params", "--L", "96", "--D", "12288", "--A", "96", "--V", "50257", "--K", "2048")
    assert data["params"]["total"] == 174_604_259_328  # the seed's GPT-3 (GPT-2 arch at 175B shape)


def test_params_set_and_tensor_parallel(capsys):
    data = call_json(capsys, "params", "--preset", "gpt2", "--set", "tied_embeddings=false", "--T", "4", "--p", "4")
    m = preset_model("gpt2").with_overrides({"tied_embeddings": False})
    assert data["params"]["total"] == count_params(m).total
    assert data["weights"]["bytes"] == 4 * count_params(m).total
    assert data["weights"]["tensor"] == 4
    assert data["weights"]["params_per_rank"] < data["params"]["total"]


def test_params_yaml_and_csv(capsys):
    import yaml

    code, out, _ = call(capsys, "params", "--preset", "gpt2", "-f", "yaml")
    assert code == 0 and yaml.safe_load(out)["params"]["total"] == 124_439_808
    code, out, _ = call(capsys, "params", "--preset", "gpt2", "-f", "csv")
    header, row = out.strip().splitlines()
    assert dict(zip(header.split(","), row.split(",")))["params.total"] == "124439808"


def test_config_file_with_preset_and_overrides(tmp_path, capsys):
    f = tmp_path / "m.yaml"
    f.write_text("model:\n  preset: llama-2-7b\n  n_kv_heads: 8\n")
    data = call_json(capsys, "params", "--config", str(f))
    m = preset_model("llama-2-7b").with_overrides({"n_kv_heads": 8})
    assert data["params"]["total"] == count_params(m).total


def test_config_file_with_inline_fields(tmp_path, capsys):
    f = tmp_path / "m.yaml"
    f.write_text("L: 2\nD: 8\nA: 2\nV: 10\nK: 6\n")
    data = call_json(capsys, "params", "--config", str(f))
    assert data["params"]["total"] == 1888  # hand count in tests/test_params.py


def test_hf_config_file(tmp_path, capsys):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}))
    assert call_json(capsys, "params", "--hf-config", str(f))["params"]["total"] == 124_439_808


def test_presets_command(capsys):
    rows = call_json(capsys, "presets")
    assert len(rows) >= 25
    by_name = {r["name"]: r for r in rows}
    assert by_name["gpt2"]["params"] == 124_439_808
    assert all(r["source"] for r in rows)


def test_hardware_command(capsys):
    rows = call_json(capsys, "hardware")
    names = {r["name"] for r in rows}
    assert len(rows) >= 17
    a100 = next(r for r in rows if "a100-80gb" in r["aliases"])
    assert a100["memory_bytes"] == 81920 * 2**20  # nvidia-smi 'NVIDIA A100-SXM4-80GB, 81920 MiB' (hardware.yaml)
    assert a100["marketed_memory_bytes"] == 80 * 10**9  # the datasheet's 80 GB
    assert a100["math_bandwidth"]["bf16"] == pytest.approx(a100["peak_flops"]["bf16"] / a100["memory_bw_bytes_s"])
    assert any("MI300X" in n for n in names)


@pytest.mark.parametrize("cmd", [["params", "--preset", "llama-2-7b"], ["params", "--preset", "mixtral-8x7b", "--T", "8"], ["presets"], ["hardware"]])
def test_tables_render(capsys, cmd):
    code, out, err = call(capsys, *cmd)
    assert code == 0 and err == "" and out.strip()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["params", "--preset", "gtp2"], "unknown preset 'gtp2'; did you mean 'gpt2'"),
        (["params", "--preset", "gpt2", "--A", "7"], "d_model (768) must be divisible by n_heads (7)"),
        (["params", "--preset", "gpt2", "--L", "0"], "--L / --n-layers ('0'): 0 is out of range"),
        (["params", "--preset", "gpt2", "--L", "abc"], "'abc'"),
        (["params", "--preset", "gpt2", "--set", "n_layer=3"], "unknown field 'n_layer'; did you mean 'n_layers'"),
        (["params", "--preset", "gpt2", "--set", "oops"], "expected KEY=VALUE"),
        (["params", "--preset", "gpt2", "--T", "5"], "n_heads (12) must be divisible by T (5)"),
        (["params"], "no model given"),
        (["params", "--preset", "gpt2", "--config", "x.yaml"], "give one model source"),
        (["params", "--config", "/nonexistent/m.yaml"], "does not exist"),
        (["params", "--preset", "gpt2", "--format", "xml"], "'xml'"),
        (["params", "--bogus"], "No such option"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, argv, message):
    code, out, err = call(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    assert message in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("L: [1, 2\n", "invalid YAML at line"),
        ("!!python/object:os.system {}\n", "plain YAML values only"),
        ("", "is empty"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("model: 3\n", "model: must be a mapping"),
    ],
)
def test_bad_config_files(tmp_path, capsys, content, message):
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    code, out, err = call(capsys, "params", "--config", str(f))
    assert (code, out) == (2, "") and message in err and err.count("\n") == 1


def test_bad_hf_json_reports_line_and_column(tmp_path, capsys):
    f = tmp_path / "config.json"
    f.write_text('{"model_type": "llama",\n "hidden_size": }')
    code, out, err = call(capsys, "params", "--hf-config", str(f))
    assert (code, out) == (2, "") and "invalid JSON at line 2, column" in err


def test_directory_and_binary_paths(tmp_path, capsys):
    code, _, err = call(capsys, "params", "--config", str(tmp_path))
    assert code == 2 and "is a directory" in err
    b = tmp_path / "b.yaml"
    b.write_bytes(b"\x00\x01\x02")
    code, _, err = call(capsys, "params", "--config", str(b))
    assert code == 2 and "binary" in err


def test_version(capsys):
    from transformer_calc import __version__

    code, out, _ = call(capsys, "--version")
    assert code == 0 and out.strip() == f"tcalc {__version__}"


def test_no_args_shows_help(capsys):
    code, out, _ = call(capsys)
    assert code == 0 and "params" in out


def test_every_command_is_documented():
    """docs/cli.md has a section for every command (simonw/llm-style docs test)."""
    from conftest import REPO

    text = (REPO / "docs" / "cli.md").read_text()
    for command in full_app().registered_commands:
        name = command.name or command.callback.__name__
        assert f"## `tcalc {name}`" in text, name


def test_module_entry_point_runs():
    out = subprocess.run(
        [sys.executable, "-m", "transformer_calc", "params", "--preset", "gpt2", "-f", "json"],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(out.stdout)["params"]["total"] == 124_439_808


def test_no_traceback_on_absurd_sizes(capsys):
    data = call_json(capsys, "params", "--L", "1000000", "--D", "65536", "--A", "512", "--V", "10000000", "--K", "10000000")
    m = ModelConfig.model_validate({"L": 10**6, "D": 65536, "A": 512, "V": 10**7, "K": 10**7})
    assert data["params"]["total"] == count_params(m).total


def test_hardware_one_gpu_by_alias(capsys):
    data = call_json(capsys, "hardware", "a100-80gb")
    assert data["name"] == "A100-SXM4-80GB"
    assert data["memory_bw_bytes_s"] == 2_039_000_000_000  # NVIDIA A100 80GB datasheet
    assert data["math_bandwidth"]["bf16"] == pytest.approx(312e12 / 2039e9)


def test_hardware_unknown_gpu_did_you_mean(capsys):
    code, out, err = call(capsys, "hardware", "a100-80g")
    assert (code, out) == (2, "") and "did you mean 'a100-80gb'" in err


def test_memory_json_equals_library(capsys):
    from transformer_calc.model.config import Parallelism, Training, Workload
    from transformer_calc.results.memory import memory_report

    from transformer_calc.requests.defaults import training_defaults
    from transformer_calc.sources.presets import gpu

    data = call_json(capsys, "memory", "--preset", "gpt3", "--T", "8", "--sp", "--recompute", "selective")
    _, assumed = training_defaults(preset_model("gpt3"), {"tensor": 8, "sequence_parallel": True, "recompute": "selective"})
    expected = memory_report(  # the command's defaults: flash, megatron, its distributed optimizer, an H100
        preset_model("gpt3"), Workload(seq_len=2048), Training(recompute="selective", flash=True, framework="megatron"),
        Parallelism(tensor=8, sequence_parallel=True, zero=1), gpu("h100"), assumed=assumed,
    )
    assert data == expected.model_dump(mode="json")
    assert expected.memory.per_gpu.total_bytes == data["memory"]["per_gpu"]["total_bytes"]
    per = data["memory"]["per_gpu"]
    assert per["total_bytes"] == per["weights_bytes"] + per["gradients_bytes"] + per["optimizer_bytes"] + per["activations_bytes"]
    assert all(type(per[k]) is int for k in per)
    assert data["fits"] is False and data["gpu"]["name"] == "H100-SXM5-80GB"  # the default GPU, checked


def test_memory_with_gpu_reports_fit(capsys):
    data = call_json(capsys, "memory", "--preset", "llama-2-7b", "--S", "4096", "--gpu", "a100-80gb", "--recompute", "full")
    assert data["gpu"]["memory_bytes"] == 81920 * 2**20  # as the driver reports it (hardware.yaml)
    usable = 81920 * 2**20 - data["memory"]["cuda_context_bytes"]  # the CUDA context is not allocatable
    assert data["gpu"]["usable_bytes"] == usable
    assert data["fits"] is (data["memory"]["peak_bytes"] <= usable)
    assert data["gpu"]["headroom_bytes"] == usable - data["memory"]["peak_bytes"]
    assert data["memory"]["peak_bytes"] <= data["memory"]["sum_bytes"]
    fit = data["fit"]
    assert isinstance(fit["max_micro_batch"], int) and fit["min_tensor_parallel"] >= 1


def test_memory_seed_letters_and_profile(capsys):
    data = call_json(capsys, "memory", "--preset", "gpt3", "--S", "2048", "--B", "2", "--p", "2", "--activations", "seed")
    assert data["memory"]["per_gpu"]["activations_bytes"] == 2 * 2048 * (40_108_032 + 46_080 * 2048)  # errata GPT3-6


def test_memory_p4_means_fp32(capsys):
    data = call_json(capsys, "memory", "--preset", "gpt2", "--p", "4")
    assert data["training"]["precision"] == "fp32"
    assert data["memory"]["bytes_per_param"] == {"weights": 4, "gradients": 4, "optimizer": 8}


def test_memory_zero3_over_dp(capsys):
    a = call_json(capsys, "memory", "--preset", "gpt2", "--dp", "8", "--zero", "3", "--grad-bytes", "2")
    n = a["params"]["per_gpu"]
    assert a["memory"]["per_gpu"]["weights_bytes"] + a["memory"]["per_gpu"]["gradients_bytes"] + a["memory"]["per_gpu"]["optimizer_bytes"] == 16 * (-(-n // 8))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["memory", "--preset", "gpt2", "--optimizer", "adagrad"], "optimizer ('adagrad')"),
        (["memory", "--preset", "gpt2", "--zero", "4"], "--zero ('4'): 4 is out of range; use a whole number from 0 to 3"),
        (["memory", "--preset", "gpt2", "--precision", "fp32", "--p", "2"], "p (2) does not match precision fp32"),
        (["memory", "--preset", "gpt2", "--gpu", "a100-80g"], "did you mean 'a100-80gb'"),
        (["memory", "--preset", "gpt2", "--P", "13"], "pipeline stages P (13) exceed n_layers (12)"),
        (["memory", "--preset", "gpt2", "--T", "5"], "n_heads (12) must be divisible by T (5)"),
        (["memory", "--preset", "gpt2", "--S", "0"], "--S / --seq-len ('0'): 0 is out of range"),
        (["memory", "--preset", "gpt2", "--recompute", "some"], "recompute ('some')"),
    ],
)
def test_memory_bad_input(capsys, argv, message):
    code, out, err = call(capsys, *argv)
    assert (code, out) == (2, "") and err.startswith("Error: ") and err.count("\n") == 1
    assert message in err, err


def test_memory_absurd_sizes_stay_exact(capsys):
    """L = 10^6, S = 10^7, P at its bound (1024): exact integers, never inf or NaN (issue: no traceback, ever)."""
    code, out, err = call(
        capsys, "memory", "--L", "1000000", "--D", "65536", "--A", "512", "--V", "10000000",
        "--S", "10000000", "--B", "1000", "--P", "1024", "--gpu", "h100", "-f", "json",
    )
    assert code == 0, err
    assert "NaN" not in out and "Infinity" not in out
    data = json.loads(out)
    per = data["memory"]["per_gpu"]
    assert all(type(v) is int and v > 0 for v in per.values())
    assert per["total_bytes"] == sum(per[k] for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes"))
    assert data["fits"] is False and data["fit"]["max_micro_batch"] == 0


def test_flops_json_equals_library(capsys):
    from transformer_calc.model.config import Workload
    from transformer_calc.estimators.flops import count_flops

    data = call_json(capsys, "flops", "--preset", "gpt2", "--S", "1024", "--B", "4")
    step = count_flops(preset_model("gpt2"), Workload(seq_len=1024, batch_size=4))
    f = data["flops"]
    assert (f["forward"], f["backward"], f["total"]) == (step.forward, step.backward, step.total)
    assert f["total"] == 3_499_779_686_400  # = torch FlopCounterMode, eager GPT-2 (tests/test_flops.py)
    assert all(type(f[k]) is int for k in ("forward", "backward", "total", "per_token"))


def test_flops_causal_and_recompute(capsys):
    full = call_json(capsys, "flops", "--preset", "gpt2")
    causal = call_json(capsys, "flops", "--preset", "gpt2", "--causal", "--recompute", "full")
    core = full["flops"]["per_layer_scores"] + full["flops"]["per_layer_reweight"]
    assert full["flops"]["forward"] - causal["flops"]["forward"] == 12 * core // 2
    assert causal["flops"]["hardware"] == causal["flops"]["total"] + causal["flops"]["layers"]


def test_flops_training_time(capsys):
    data = call_json(capsys, "flops", "--preset", "gpt3", "--tokens", "300e9", "--gpus", "1024", "--gpu", "a100-80gb", "--mfu", "0.45")
    tr = data["training"]
    assert tr["tokens"] == 300 * 10**9
    assert tr["flops"] == data["flops"]["per_token"] * 300 * 10**9
    assert tr["time_s"] == pytest.approx(tr["flops"] / (1024 * 312e12 * 0.45))
    assert tr["days"] == pytest.approx(tr["time_s"] / 86400)
    assert tr["gpu_hours"] == pytest.approx(tr["time_s"] * 1024 / 3600)


def test_flops_compute_optimal(capsys):
    data = call_json(capsys, "flops", "--preset", "gpt2", "--budget", "5.88e23")
    assert data["compute_optimal"]["for_budget"]["params"] == 70 * 10**9  # Chinchilla 70B
    assert data["compute_optimal"]["for_params"]["tokens"] == 20 * 124_439_808


def test_mfu_reproduces_megatron_gpt3(capsys):
    """Korthikanti et al. 2022 Table 5: GPT-3 175B, 64 A100s, batch 64 x 2048, 13.75 s: MFU 51.4 %."""
    data = call_json(capsys, "mfu", "--preset", "gpt3", "--V", "51200", "--global-batch", "64",
                     "--step-time", "13.75", "--gpus", "64", "--gpu", "a100-80gb")
    assert data["mfu"] == pytest.approx(0.514, abs=0.0005)
    assert data["tokens_per_s"] == pytest.approx(64 * 2048 / 13.75)
    again = call_json(capsys, "mfu", "--preset", "gpt3", "--V", "51200", "--tokens-per-s", str(64 * 2048 / 13.75),
                      "--gpus", "64", "--gpu", "a100-80gb")
    assert again["mfu"] == pytest.approx(data["mfu"])


def test_mfu_hfu_with_recompute(capsys):
    data = call_json(capsys, "mfu", "--preset", "gpt2", "--tokens-per-s", "1e5", "--gpus", "8", "--recompute", "full")
    assert data["hfu"] > data["mfu"] > 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["flops", "--preset", "gpt2", "--tokens", "lots"], "--tokens ('lots'): not a number"),
        (["flops", "--preset", "gpt2", "--gpus", "8"], "give --tokens too"),
        (["flops", "--preset", "gpt2", "--tokens", "1e9", "--gpu", "h100"], "give --gpus N"),
        (["flops", "--preset", "gpt2", "--tokens", "1e9", "--gpus", "8", "--gpu", "h100", "--mfu", "1.5"], "--mfu ('1.5'): '1.5' is out of range"),
        (["flops", "--preset", "gpt2", "--recompute", "half"], "--recompute ('half')"),
        (["mfu", "--preset", "gpt2"], "give the measured speed"),
        (["mfu", "--preset", "gpt2", "--step-time", "0", "--global-batch", "8"], "--step-time ('0'): '0' is out of range"),
        (["mfu", "--preset", "gpt2", "--tokens-per-s", "1e5", "--gpu", "v100", "--dtype", "bf16"], "has no bf16"),
    ],
)
def test_flops_mfu_bad_input(capsys, argv, message):
    code, out, err = call(capsys, *argv)
    assert (code, out) == (2, "") and err.startswith("Error: ") and err.count("\n") == 1
    assert message in err, err


def test_inference_json_keys_and_library(capsys):
    from transformer_calc.estimators.inference.roofline import InferenceSpec, estimate_inference
    from transformer_calc.sources.presets import gpu

    data = call_json(capsys, "inference", "--preset", "llama-2-13b", "--S", "8192", "--B", "1")
    # Issue 5: Llama-2-13B, 8192 tokens, bf16: 2 x 2 bytes x 8192 x 40 layers x 40 heads x 128
    assert data["kv_cache"]["total_bytes"] == 6_710_886_400 == data["kv_cache"]["per_gpu_bytes"]
    est = estimate_inference(preset_model("llama-2-13b"), gpu("h100"), InferenceSpec(batch_size=1, prompt_len=8192))
    per = data["memory"]["per_gpu"]
    assert (per["weights_bytes"], per["kv_cache_bytes"], per["total_bytes"]) == (est.memory.weights_bytes, est.memory.kv_cache_bytes, est.memory.total_bytes)
    assert data["prefill"]["flops"] == est.prefill.flops and data["prefill"]["bound"] in ("compute", "memory")
    assert data["decode"]["time_per_output_token_s"] == est.decode.seconds_per_token
    assert data["decode"]["tokens_per_s"] == est.decode.tokens_per_s
    assert data["decode"]["bound"] == "memory"


def test_inference_seed_falcon_mha_and_real_gqa(capsys):
    """Seed "Case Study: Falcon-40B" (MHA pretense) vs the real 8 K/V heads: the cache is 16x smaller."""
    mha = call_json(capsys, "inference", "--preset", "falcon-40b", "--T", "4", "--B", "1", "--S", "2048", "--cache-kv-heads", "128")
    real = call_json(capsys, "inference", "--preset", "falcon-40b", "--T", "4", "--B", "1", "--S", "2048")
    assert mha["kv_cache"]["total_bytes"] == 4_026_531_840  # 2·p·S·D·L = 2·2·2048·8192·60 (errata FAL-2)
    assert mha["kv_cache"]["total_bytes"] == 16 * real["kv_cache"]["total_bytes"]
    assert mha["memory"]["per_gpu"]["weights_bytes"] == real["memory"]["per_gpu"]["weights_bytes"]


def test_inference_tensor_parallel_adds_communication(capsys):
    one = call_json(capsys, "inference", "--preset", "llama-2-7b", "--S", "1024", "--new-tokens", "64")
    four = call_json(capsys, "inference", "--preset", "llama-2-7b", "--S", "1024", "--new-tokens", "64", "--T", "4")
    assert one["prefill"]["communication_s"] == 0 and four["prefill"]["communication_s"] > 0
    assert four["memory"]["per_gpu"]["weights_bytes"] < one["memory"]["per_gpu"]["weights_bytes"]


def test_inference_naive_mode_and_dtypes(capsys):
    naive = call_json(capsys, "inference", "--preset", "gpt2", "--S", "512", "--new-tokens", "16", "--no-kv-cache")
    cached = call_json(capsys, "inference", "--preset", "gpt2", "--S", "512", "--new-tokens", "16")
    assert naive["decode"]["flops"] > 100 * cached["decode"]["flops"]
    int4 = call_json(capsys, "inference", "--preset", "llama-2-7b", "--weight-dtype", "int4")
    bf16 = call_json(capsys, "inference", "--preset", "llama-2-7b")
    assert int4["memory"]["per_gpu"]["weights_bytes"] == -(-bf16["memory"]["per_gpu"]["weights_bytes"] // 4)


def test_inference_from_job_file(tmp_path, capsys):
    f = tmp_path / "j.yaml"
    f.write_text("model: {preset: llama-2-13b}\ninference: {B: 4, S: 2048, new_tokens: 32, T: 2, gpu: h100}\n")
    data = call_json(capsys, "inference", "--config", str(f), "--B", "8")
    assert data["inference"]["batch_size"] == 8 and data["inference"]["tensor"] == 2
    assert data["inference"]["gpu"] == "H100-SXM5-80GB" and data["inference"]["new_tokens"] == 32


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["inference", "--preset", "gpt2", "--weight-dtype", "int3"], "weight_dtype ('int3')"),
        (["inference", "--preset", "gpt2", "--B", "0"], "--B / --batch-size ('0'): 0 is out of range"),
        (["inference", "--preset", "llama-2-70b", "--T", "3"], "3"),
        (["inference", "--preset", "gpt2", "--gpu", "a1000"], "unknown GPU 'a1000'"),
    ],
)
def test_inference_bad_input(capsys, argv, message):
    code, out, err = call(capsys, *argv)
    assert (code, out) == (2, "") and err.startswith("Error: ") and err.count("\n") == 1
    assert message in err, err


def test_memory_torch_eager_tells_gelu_variants_apart(tmp_path, capsys):
    """The torch-eager profile reads activation_impl from the HF config: gelu_new keeps 3·p·F
    more bytes per token and layer than exact GELU (docs/formulas.md §2.4, docs/validation.md)."""
    base = {"model_type": "gpt2", "n_layer": 2, "n_embd": 128, "n_head": 4, "vocab_size": 1000, "n_positions": 256}
    totals = {}
    for act in ("gelu_new", "gelu"):
        f = tmp_path / f"{act}.json"
        f.write_text(json.dumps({**base, "activation_function": act}))
        data = call_json(capsys, "memory", "--hf-config", str(f), "--S", "256", "--activations", "torch-eager", "--precision", "bf16")
        assert data["model"]["activation_impl"] == act
        totals[act] = data["memory"]["activations"]["mlp_bytes"]
    assert totals["gelu_new"] - totals["gelu"] == 2 * 3 * 2 * 256 * 512  # L · 3 · p · S · F


@pytest.mark.parametrize("command", ["params", "memory", "flops", "mfu", "inference", "sweep", "check", "train",
                                     "plan", "presets", "hardware"])
def test_help_never_swallows_a_written_default(command):
    """`[default: ...]` in help text is rich markup unless escaped; swallowed, it left ' .' behind."""
    import os
    import re

    env = {**os.environ, "COLUMNS": "250"}
    out = subprocess.run([sys.executable, "-m", "transformer_calc", command, "--help"], capture_output=True,
                         text=True, env=env, check=True).stdout
    assert not [line for line in out.splitlines() if re.search(r"\S\s+\.\s*│", line)], out
    assert "default" in out


def test_long_default_context_is_said_and_beyond_context_warned(capsys):
    code, out, err = call(capsys, "inference", "--preset", "llama-3.1-405b", "--format", "json")
    assert code == 0 and err.startswith("note: S = 131,072, the model's context window") and "--S" in err
    # training defaults to the pre-training length (Llama 3: 8K), never the 128K window: nothing to say
    code, out, err = call(capsys, "memory", "--preset", "llama-3.1-405b", "--format", "json")
    assert code == 0 and err == "" and json.loads(out)["workload"]["seq_len"] == 8192
    code, out, err = call(capsys, "sweep", "--preset", "llama-3.1-405b", "--format", "json")  # as memory prices it
    assert code == 0 and err == "" and json.loads(out)["points"][0]["seq_len"] == 8192
    code, out, err = call(capsys, "sweep", "--preset", "llama-3.1-405b", "--metrics", "kv_cache_bytes", "-f", "json")
    assert code == 0 and err.startswith("note: S = 131,072, the model's context window")  # as inference
    code, out, err = call(capsys, "memory", "--preset", "gemma-3-27b", "--format", "json")
    assert code == 0 and err.startswith("note: S = 32,768, the model's pre-training length")
    code, out, err = call(capsys, "inference", "--preset", "llama-2-13b", "--S", "8192", "--format", "json")
    assert code == 0 and err.startswith("warning: S = 8,192 exceeds the model's context window (4,096)")
    code, out, err = call(capsys, "memory", "--preset", "gpt2", "--format", "json")
    assert code == 0 and err == ""  # 1024: nothing to say


@pytest.mark.parametrize("command", ["presets", "hardware"])
def test_lookup_tables_fit_80_columns_and_never_cut_the_name(command):
    import os

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-m", "transformer_calc", command], capture_output=True, text=True,
                         env=env, check=True).stdout  # a pipe: rich and tcalc assume 80 columns
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    if command == "hardware":
        assert "a100-40gb-pcie" in out and "H100-SXM5-80GB" in out


def test_csv_cells_are_scalars_and_booleans_lowercase(capsys):
    code, out, _ = call(capsys, "memory", "--preset", "gpt2", "--gpu", "a100-80gb", "-f", "csv")
    import csv
    import io

    header, row = list(csv.reader(io.StringIO(out)))  # the assumptions' sources hold quoted commas
    cells = dict(zip(header, row))
    assert cells["fits"] == "true" and "memory.peak_bytes" in cells and cells["training.flash"] == "true"
    assert not any(v.startswith(("{", "[")) for v in cells.values())


@pytest.mark.parametrize("argv, field, value", [
    (["memory", "--preset", "gpt2", "--S", "8k"], "seq_len", 8192),
    (["memory", "--preset", "gpt2", "--S", "1_024"], "seq_len", 1024),
    (["memory", "--preset", "gpt2", "--B", "1e1"], "batch_size", 10),
])
def test_numbers_as_people_type_them(capsys, argv, field, value):
    assert call_json(capsys, *argv)["workload"][field] == value


def test_non_integral_flag_is_an_error_naming_it(capsys):
    code, out, err = call(capsys, "flops", "--preset", "gpt2", "--B", "2.5")
    assert code == 2 and out == "" and err.startswith("Error: --B / --batch-size ('2.5'): '2.5' is not a whole number")



def test_every_option_shows_its_default():
    """Issue 12: no option of any command hides its default: typer shows it, the help text writes
    `[default: ...]`, or the option is required."""
    import typer.main

    from transformer_calc.cli import full_app as _full

    app = _full()

    hidden = []
    for name, command in typer.main.get_command(app).commands.items():
        for p in command.params:
            if not p.opts or not p.opts[0].startswith("-") or p.name == "help":
                continue
            shown = "[default:" in (p.help or "") or p.required or (p.default is not None and p.show_default is not False)
            if not shown:
                hidden.append(f"{name} {p.opts[0]}")
    assert hidden == []
