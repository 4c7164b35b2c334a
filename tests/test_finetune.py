"""Fine-tuning (LoRA, QLoRA, DoRA) and ZeRO-Offload: trainable parameters, NF4 bytes, memory terms.

The trainable counts are checked against PEFT itself by tools/crosscheck/peft_params.py (run in
CI); the golden rows here are PEFT outputs published by others, or small cases checkable by hand.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.cli import run
from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload
from transformer_calc.estimators.training.finetune import (
    block_linears,
    nf4_bytes,
    trainable_params,
)
from transformer_calc.estimators.training.memory import training_memory
from transformer_calc.estimators.params import count_params
from transformer_calc.sources.presets import preset_model
from transformer_calc.estimators.training.timeline import peak_memory

LLAMA8 = preset_model("llama-3.1-8b")
W = Workload(seq_len=2048, batch_size=1)


@pytest.mark.parametrize(
    ("preset", "targets", "r", "expected"),
    [
        # PEFT print_trainable_parameters() for Llama-3(.1)-8B, r=16 on q,k,v,o,gate,up,down (all-linear),
        # "trainable params: 41,943,040 || all params: 8,072,204,288" (the 4-bit model's numel); the same
        # in many published notebooks; tools/crosscheck/peft_params.py reproduces it with PEFT 0.21.2.
        pytest.param("llama-3.1-8b", "all-linear", 16, 41_943_040, id="peft-llama3-8b-r16-all-linear"),
        pytest.param("llama-3.1-8b", "q,k,v,o,gate,up,down", 16, 41_943_040, id="peft-llama3-8b-r16-named"),
        # Hu et al. 2021 setting on the hand: r=8 on q,v of Llama-3.1-8B: 32 layers x 8 x ((4096+4096) + (4096+1024))
        pytest.param("llama-3.1-8b", "q,v", 8, 32 * 8 * (8192 + 5120), id="by-hand-llama3-8b-r8-qv"),
        # GPT-2: c_attn is one Conv1D 768 -> 2304, so q alone adapts all of it: 12 x 4 x (768 + 2304)
        pytest.param("gpt2", "q", 4, 12 * 4 * (768 + 2304), id="by-hand-gpt2-fused-c_attn"),
    ],
)
def test_trainable_params(preset, targets, r, expected):
    tr = Training(finetune="lora", lora_rank=r, lora_targets=targets)
    assert trainable_params(preset_model(preset), tr).total == expected


def test_dora_adds_one_magnitude_per_output_feature():
    lora = trainable_params(LLAMA8, Training(finetune="lora", lora_rank=16)).total
    dora = trainable_params(LLAMA8, Training(finetune="dora", lora_rank=16)).total
    # per layer: q 4096, k 1024, v 1024, o 4096, gate 14336, up 14336, down 4096
    assert dora - lora == 32 * (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096)


def test_nf4_double_quantization_bytes():
    """Dettmers et al. 2023 sec. 3: 4 bits + 8/64 + 32/(64·256) bits per weight = 4.127 bits."""
    n = 4096 * 14336
    assert nf4_bytes(n) == n // 2 + n // 64 + 4 * (n // 64 // 256)
    assert abs(8 * nf4_bytes(n) / n - (4 + 8 / 64 + 32 / (64 * 256))) < 1e-12
    assert nf4_bytes(1) == 1 + 1 + 4  # partial blocks round up


def test_lora_alpha_has_no_memory_effect():
    a = peak_memory(LLAMA8, W, Training(finetune="lora", lora_alpha=16))
    b = peak_memory(LLAMA8, W, Training(finetune="lora", lora_alpha=64))
    assert a.peak_bytes == b.peak_bytes


def test_qlora_states_and_weights_by_hand():
    tr = Training(finetune="qlora", lora_rank=16)
    (st,) = training_memory(LLAMA8, W, tr)
    trainable = 41_943_040
    assert st.trainable_params == trainable
    assert st.gradients == 4 * trainable  # fp32 adapter gradients (mixed precision)
    assert st.optimizer == 8 * trainable  # two fp32 moments, no separate master copy
    assert st.adapter_weights == 4 * trainable
    counts = count_params(LLAMA8)
    blocks = counts.layers - 32 * counts.layer.norms
    assert st.quantized_weights == 32 * sum(nf4_bytes(n) for n in (
        4096 * 4096, 4096 * 1024, 4096 * 1024, 4096 * 4096, 4096 * 14336, 4096 * 14336, 14336 * 4096))
    unquantized = counts.total - blocks  # embeddings, LM head, norms stay bf16
    assert st.weights == st.quantized_weights + 2 * unquantized + st.adapter_weights


def test_frozen_layers_keep_less_than_full_training():
    """q,v adapters only: W_O, MLP and head inputs are not kept (frozen weights need no input).
    Pure bf16 (adapters in the base dtype): lora_A keeps the same tensor the base q/v read."""
    full = training_memory(LLAMA8, W, Training(flash=True, precision="bf16"))[0]
    lora = training_memory(LLAMA8, W, Training(flash=True, precision="bf16", finetune="lora", lora_targets="q,v"))[0]
    B, S, D, F, r = 1, 2048, 4096, 14336, 16
    # per layer: MLP input (D) and W_down's input (F) dropped; two rank-r intermediates added
    assert full.mlp - lora.mlp == 32 * 2 * B * S * (D + F)
    assert lora.attention - full.attention == 32 * 2 * B * S * 2 * r
    assert full.other - lora.other == 2 * B * S * D  # the LM head's input


def test_mixed_precision_adapters_keep_their_own_input_copies():
    """fp32 adapters under autocast (PEFT's default): each adapted module keeps its own bf16 copy of
    its input and autocast's bf16 copies of A and B (tools/crosscheck/lora_activations.py)."""
    bf16 = training_memory(LLAMA8, W, Training(flash=True, precision="bf16", finetune="lora", lora_targets="q,v"))[0]
    mixed = training_memory(LLAMA8, W, Training(flash=True, finetune="lora", lora_targets="q,v"))[0]
    B, S, D, r = 1, 2048, 4096, 16
    # two copies instead of one shared input, plus r·(d_in + d_out) of A and B per module, 2 bytes each
    assert mixed.attention - bf16.attention == 32 * 2 * (B * S * D + r * ((D + D) + (D + 1024)))


@settings(max_examples=25, deadline=None)
@given(r=st.integers(1, 256))
def test_lora_params_linear_in_rank(r):
    one = trainable_params(LLAMA8, Training(finetune="lora", lora_rank=1)).total
    assert trainable_params(LLAMA8, Training(finetune="lora", lora_rank=r)).total == r * one


@settings(max_examples=20, deadline=None)
@given(T=st.sampled_from([1, 2, 4, 8]))
def test_tensor_parallel_adapter_shards_sum(T):
    """Column-parallel modules split lora_B, row-parallel split lora_A: per rank ≤ total, and
    T = 1 gives the whole-model count."""
    per = sum(x.d_in + x.d_out for x in block_linears(LLAMA8, False, T))
    whole = sum(x.d_in + x.d_out for x in block_linears(LLAMA8, False, 1))
    assert per <= whole and (T > 1 or per == whole)


def test_targets_that_select_nothing_are_an_error(capsys):
    code = run(["memory", "--preset", "gpt2", "--finetune", "lora", "--lora-targets", "gate", "--S", "128"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("Error: ") and "lora_targets" in err


def test_unknown_target_is_an_error(capsys):
    code = run(["memory", "--preset", "gpt2", "--finetune", "lora", "--lora-targets", "q,zz"])
    err = capsys.readouterr().err
    assert code == 2 and "lora_targets" in err and "Traceback" not in err


def test_acceptance_qlora_llama_8b_rtx_4090(capsys):
    code = run(["memory", "--preset", "llama-3.1-8b", "--finetune", "qlora", "--lora-rank", "16", "--lora-targets",
                "all-linear", "--S", "2048", "--B", "1", "--gpu", "rtx-4090", "-f", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["params"]["trainable"] == out["finetune"]["trainable_params"] == 41_943_040
    assert out["memory"]["weights_detail"]["quantized_bytes"] > 0
    assert set(out["memory"]["peak"]) >= {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes"}
    assert isinstance(out["fits"], bool) and "max_micro_batch" in out["fit"]


def test_acceptance_offload_70b(capsys):
    code = run(["memory", "--preset", "llama-3.1-70b", "--finetune", "full", "--zero", "3", "--offload", "optimizer",
                "--dp", "8", "--gpu", "a100-80gb", "--S", "4096", "-f", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    off = out["offload"]
    N = count_params(preset_model("llama-3.1-70b")).total
    assert out["memory"]["peak"]["optimizer_bytes"] == 0
    assert off["host_optimizer_bytes"] == -(-N // 8) * 12  # Adam + fp32 master, the ZeRO partition
    assert off["host_gradients_bytes"] == -(-N // 8) * 4
    assert off["host_bytes_per_node"] == 8 * off["host_bytes_per_gpu"]
    assert off["gpu_bytes"] == out["memory"]["peak_bytes"]


def test_nvme_offload_counts_nvme_not_host():
    par = Parallelism(data=8, zero=3)
    st = training_memory(LLAMA8, W, Training(offload="optimizer+params", offload_device="nvme"), par)[0]
    assert st.weights == 0 and st.optimizer == 0 and st.host_weights > 0


@pytest.mark.parametrize(("zero", "offload"), [(0, "optimizer"), (2, "optimizer+params")])
def test_offload_needs_zero(capsys, zero, offload):
    code = run(["memory", "--preset", "gpt2", "--zero", str(zero), "--dp", "2", "--offload", offload])
    err = capsys.readouterr().err
    assert code == 2 and "ZeRO" in err


def test_job_file_training_keys(tmp_path):
    from transformer_calc.results.check import check_job

    path = tmp_path / "job.yaml"
    path.write_text("model: {preset: llama-3.1-8b}\ntraining: {S: 2048, finetune: qlora, lora_rank: 16, "
                    "lora_targets: [q, v], flash: true}\nchecks: {gpu: rtx-4090}\n")
    out = check_job(path)
    assert out.checks[0].check == "training_fits_gpu"
    value = out.checks[0].value
    full = check_job_value(tmp_path, "training: {S: 2048, flash: true}")
    assert value < full


def check_job_value(tmp_path, training: str) -> int:
    from transformer_calc.results.check import check_job

    path = tmp_path / "full.yaml"
    path.write_text(f"model: {{preset: llama-3.1-8b}}\n{training}\n")
    return check_job(path).checks[0].value


def test_model_config_fused_flags_from_presets():
    assert preset_model("gpt2").fused_qkv and not preset_model("llama-3.1-8b").fused_qkv
    assert preset_model("phi-3-mini").fused_gate_up
    assert ModelConfig.model_validate({"L": 1, "D": 8, "A": 2, "V": 10}).fused_qkv is False


# ---------------------------------------------------------------------------- tcalc train
def roofline_step(tr, par=Parallelism(data=8, zero=1), m=LLAMA8, gpu="a100-80gb"):
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.estimators.training.train import estimate_step

    return estimate_step(m, Workload(seq_len=4096, batch_size=1), tr, par, find_gpu(gpu), global_batch=64)


def test_adapters_skip_frozen_weight_gradients():
    """Frozen matmuls run forward + input gradient (2 forwards, not 3); adapters add 3 forwards."""
    from transformer_calc.estimators.training.finetune import adapter_flops_per_token
    from transformer_calc.estimators.flops import count_flops

    full, lora = roofline_step(Training(flash=True)), roofline_step(Training(flash=True, finetune="lora"))
    f = count_flops(LLAMA8, Workload(seq_len=4096, batch_size=64))
    skipped = f.forward - f.attention_cores
    added = 3 * adapter_flops_per_token(LLAMA8, Training(finetune="lora")) * 64 * 4096
    assert lora.model_flops == full.model_flops - skipped + added
    assert lora.compute_s < full.compute_s


def test_qlora_pays_for_dequantization():
    assert roofline_step(Training(finetune="qlora")).memory_bound_s > roofline_step(Training(finetune="lora")).memory_bound_s


def test_offload_pcie_time_by_hand():
    from transformer_calc.sources.presets import gpu as find_gpu

    m70 = preset_model("llama-3.1-70b")
    par = Parallelism(data=8, zero=3)
    est = roofline_step(Training(offload="optimizer"), par, m70)
    N = count_params(m70).total
    pcie = find_gpu("a100-80gb").pcie_bytes_s / 2  # Gen4 x16, one direction
    assert est.offload_pcie_s == pytest.approx(N / 8 * (4 + 2) / pcie)  # fp32-counted grads down, bf16 params up
    assert est.optimizer_s == 0.0
    both = roofline_step(Training(offload="optimizer+params"), par, m70)
    assert both.offload_pcie_s == pytest.approx(est.offload_pcie_s + 2 * 8 * N / 8 * 2 / pcie)  # mb = 8


@pytest.mark.parametrize(("gpu", "link", "bytes_s"), [
    ("a100-80gb", "PCIe x16", 64 * 10**9),  # PCIe Gen4 x16, bidirectional (A100 datasheet)
    ("h100", "PCIe x16", 128 * 10**9),  # PCIe Gen5 x16
    ("gb200", "NVLink-C2C", 450 * 10**9),  # the superchip's 900 GB/s C2C shared by two GPUs (stated split)
    ("tpu-v5p", None, None),
])
def test_host_link_per_gpu(gpu, link, bytes_s):
    from transformer_calc.devices.hardware import host_bandwidth
    from transformer_calc.sources.presets import gpu as find_gpu

    assert host_bandwidth(find_gpu(gpu)) == (link, bytes_s)


def test_offload_on_a_part_without_a_host_link_is_an_error(capsys):
    code = run(["train", "--preset", "gpt2", "--gpu", "tpu-v5p", "--gpus", "8", "--global-batch", "64", "--S", "1024",
                "--zero", "1", "--offload", "optimizer"])
    err = capsys.readouterr().err
    assert code == 2 and "host-link" in err


def test_validation_section_is_current():
    """docs/validation.md's fine-tuning section is what tools/validation/published_finetune.py writes."""
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("published_finetune", REPO / "tools/validation/published_finetune.py")
    pf = importlib.util.module_from_spec(spec)
    import sys

    sys.modules["published_finetune"] = pf  # dataclasses look their module up
    spec.loader.exec_module(pf)
    data, rows = pf.load()
    results = [pf.evaluate(row, data) for row in rows]
    assert pf.docs_section(results, data) in (REPO / "docs/validation.md").read_text(encoding="utf-8")
    ctx = {r.row["id"]: r for r in results if r.row["kind"] == "max_context"}
    assert all(r.tcalc > r.measured for r in ctx.values())  # as documented: tcalc over-predicts the context


# ---------------------------------------------------------------------------- FP8 recipes
def test_fp8_weight_copies_and_scaling_state_by_hand():
    """TE keeps each GEMM weight in FP8 twice (rowwise and transposed); delayed scaling keeps an
    fp32 amax history of 1024 (+ scale, scale_inv) for 5 FP8 tensors per GEMM."""
    W4 = Workload(seq_len=4096)
    E = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)  # Llama-3.1-8B GEMM weights
    delayed = training_memory(LLAMA8, W4, Training(fp8_recipe="delayed", flash=True))[0]
    assert delayed.fp8_weights == 2 * E + 32 * 7 * 5 * (1024 + 2) * 4
    mx = training_memory(LLAMA8, W4, Training(fp8_recipe="mxfp8", flash=True))[0]
    assert mx.fp8_weights == 2 * (E + E // 32)  # E8M0 scale per 32 values, both usages
    base = training_memory(LLAMA8, W4, Training(flash=True))[0]
    assert delayed.weights - base.weights == delayed.fp8_weights
    assert delayed.optimizer == base.optimizer and delayed.gradients == base.gradients  # master etc. unchanged


def test_fp8_saves_gemm_inputs_in_one_byte():
    W4 = Workload(seq_len=4096)
    base = training_memory(LLAMA8, W4, Training(flash=True))[0]
    fp8 = training_memory(LLAMA8, W4, Training(fp8_recipe="tensorwise", flash=True))[0]
    # MLP input (D) and W_down's input (F) from 2 bytes to 1; attention: the QKV input saves D, and
    # W_O's FP8 copy adds A·h_d = D beside FlashAttention's bf16 output
    assert base.mlp - fp8.mlp == 32 * 4096 * (4096 + 14336)
    assert fp8.attention == base.attention


@pytest.mark.parametrize(("args", "says"), [
    (["--fp8-recipe", "delayed", "--precision", "fp32"], "fp8_recipe"),
    (["--fp8-recipe", "delayed", "--activations", "torch-eager"], "torch-eager"),
    (["--fp8-recipe", "mxfp8", "--finetune", "lora"], "full training"),
    (["--fp8-recipe", "fp4"], "fp8_recipe"),
])
def test_fp8_refusals(capsys, args, says):
    code = run(["memory", "--preset", "gpt2", "--S", "128", *args])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err


def test_fp8_train_runs_gemms_at_the_fp8_peak_and_mxfp8_needs_blackwell(capsys):
    plain = roofline_step(Training(flash=True), gpu="h100")
    fp8 = roofline_step(Training(flash=True, fp8_recipe="delayed"), gpu="h100")
    assert fp8.compute_s < plain.compute_s and fp8.peak_flops_s == pytest.approx(2 * plain.peak_flops_s, rel=1e-3)
    assert roofline_step(Training(flash=True, fp8_recipe="mxfp8"), gpu="b200").compute_s > 0
    code = run(["train", "--preset", "gpt2", "--gpu", "h100", "--gpus", "8", "--global-batch", "64", "--S", "1024",
                "--fp8-recipe", "mxfp8"])
    assert code == 2 and "microscaling" in capsys.readouterr().err


def test_sweep_takes_the_fine_tuning_settings(capsys):
    argv = ["sweep", "--preset", "llama-3.1-8b", "--S", "1024", "--gpu", "rtx-4090", "--flash", "true", "-f", "json"]
    assert run(argv) == 0
    full = json.loads(capsys.readouterr().out)["points"][0]
    assert run([*argv, "--finetune", "qlora", "--lora-rank", "16"]) == 0
    qlora = json.loads(capsys.readouterr().out)["points"][0]
    expected = peak_memory(LLAMA8, Workload(seq_len=1024), Training(finetune="qlora", lora_rank=16, flash=True, framework="megatron")).peak_bytes
    assert qlora["peak_bytes"] == expected < full["peak_bytes"]
    assert qlora["fits"] and not full["fits"]


# ---------------------------------------------------------------------------- properties
from conftest import model_configs  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(m=model_configs(), r=st.integers(1, 64))
def test_random_models_lora_linear_in_rank_and_dora_adds_d_out(m, r):
    one = trainable_params(m, Training(finetune="lora", lora_rank=1)).adapters
    assert trainable_params(m, Training(finetune="lora", lora_rank=r)).adapters == r * one
    dora = trainable_params(m, Training(finetune="dora", lora_rank=r)).adapters
    assert dora > r * one


@settings(max_examples=30, deadline=None)
@given(m=model_configs())
def test_random_models_qlora_stores_less_than_lora_and_states_are_for_trainables_only(m):
    w = Workload(seq_len=64)
    lora = training_memory(m, w, Training(finetune="lora"))[0]
    qlora = training_memory(m, w, Training(finetune="qlora"))[0]
    assert qlora.weights < lora.weights
    assert qlora.gradients == lora.gradients == 4 * lora.trainable_params
    assert lora.trainable_params == trainable_params(m, Training(finetune="lora")).total


@settings(max_examples=30, deadline=None)
@given(m=model_configs())
def test_random_models_offload_moves_states_not_weights(m):
    from transformer_calc.model.config import Parallelism

    par = Parallelism(data=4, zero=1)
    w = Workload(seq_len=64)
    on = training_memory(m, w, Training(), par)[0]
    off = training_memory(m, w, Training(offload="optimizer"), par)[0]
    assert off.optimizer == 0 and off.host_optimizer == on.optimizer and off.weights == on.weights


def test_fp32_unquantized_upcasts_what_qlora_leaves():
    """PEFT's prepare_model_for_kbit_training casts every non-Params4bit parameter to fp32."""
    a = training_memory(LLAMA8, W, Training(finetune="qlora"))[0]
    b = training_memory(LLAMA8, W, Training(finetune="qlora", fp32_unquantized=True))[0]
    counts = count_params(LLAMA8)
    unquantized = counts.total - (counts.layers - 32 * counts.layer.norms)
    assert b.weights - a.weights == 2 * unquantized and b.quantized_weights == a.quantized_weights
    with pytest.raises(Exception, match="needs --finetune qlora"):
        Training(finetune="lora", fp32_unquantized=True)


def test_foreach_adamw_temporary_is_one_per_trainable_parameter():
    """PyTorch's foreach AdamW keeps one fp32 temporary per (trainable) parameter in its step."""
    tl = peak_memory(LLAMA8, W, Training(finetune="lora", lora_rank=16))
    step = next(ph for ph in tl.phases if ph.name == "optimizer step")
    assert step.transient == 4 * 41_943_040


def test_experts_and_router_targets_by_hand():
    """PEFT target_parameters on transformers 5's stacked experts: per expert r·(D + 2F) on gate_up
    and r·(F + D) on down; the router weight r·(D + n_experts)."""
    m = preset_model("mixtral-8x7b")
    D, F, E, r = 4096, 14336, 8, 4
    got = trainable_params(m, Training(finetune="lora", lora_rank=r, lora_targets="experts,router")).total
    assert got == 32 * (E * r * (2 * D + 3 * F) + r * (D + E))
    # PEFT 0.21 converts all-linear on Mixtral to its transformers-4 targets: attention, the router,
    # and the experts' w1 and w3 (rank r each) fused into gate_up at rank 2r (config all_linear_experts)
    attn = trainable_params(m, Training(finetune="lora", lora_rank=r, lora_targets="q,k,v,o")).total
    every = trainable_params(m, Training(finetune="lora", lora_rank=r, lora_targets="all-linear")).total
    assert every == attn + 32 * (E * (2 * r * (D + 2 * F) + r * (F + D)) + r * (D + E))
    both = trainable_params(m, Training(finetune="lora", lora_rank=r, lora_targets="all-linear,experts,router")).total
    assert both == every
    plain = m.model_copy(update={"all_linear_experts": False})  # a family PEFT does not convert
    assert trainable_params(plain, Training(finetune="lora", lora_rank=r, lora_targets="all-linear")).total == attn


def test_adapted_experts_keep_their_routed_inputs():
    m = preset_model("mixtral-8x7b")
    w = Workload(seq_len=512)
    frozen = training_memory(m, w, Training(flash=True, precision="bf16", finetune="lora", lora_targets="q,v"))[0]
    experts = training_memory(m, w, Training(flash=True, precision="bf16", finetune="lora", lora_targets="q,v,experts"))[0]
    B, S, D, F, k, r = 1, 512, 4096, 14336, 2, 16
    # the routed copies (D) and W_down's inputs (F) of the k experts a token visits come back, plus
    # the rank-r intermediates of gate_up and down over k·B·S tokens
    assert experts.mlp - frozen.mlp == 32 * 2 * k * B * S * (D + F + 2 * r)


def test_dora_on_expert_parameters_is_refused(capsys):
    code = run(["memory", "--preset", "mixtral-8x7b", "--S", "128", "--finetune", "dora", "--lora-targets", "experts"])
    assert code == 2 and "DoRA" in capsys.readouterr().err


def test_dora_all_linear_on_converted_moe_is_refused_as_peft_does(capsys):
    """PEFT 0.21 raises for DoRA on the experts' parameters its all-linear conversion targets."""
    code = run(["memory", "--preset", "mixtral-8x7b", "--S", "128", "--finetune", "dora", "--lora-targets", "all-linear"])
    assert code == 2 and "DoRA" in capsys.readouterr().err
    assert run(["memory", "--preset", "llama-3-8b", "--S", "128", "--finetune", "dora", "--lora-targets", "all-linear",
                "-f", "json"]) == 0
