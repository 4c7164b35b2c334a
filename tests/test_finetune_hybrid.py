"""Adapters (LoRA, QLoRA, DoRA) and quantized weight formats on hybrid models: the Linear modules of
each sequence-mixer kind (`Mixer.linears`), the `mixer` target, trainable parameters, NF4 and
GPTQ/AWQ/NVFP4 bytes, the adapters' activations on mixer layers (docs/formulas.md §2.6.1, §5.4.1).

The trainable counts are checked against PEFT by tools/crosscheck/peft_params.py (CI, every hybrid
family); the golden rows here are PEFT 0.21.2's get_nb_trainable_parameters() on transformers
5.23 models built from the tiny configs below (each also checkable by hand, as commented).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.cli import run
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.inference.quant import AWQ_INT4, INT4_ZERO_BITS, block_matrices, quantized_weights
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.params import count_params
from transformer_calc.estimators.training.finetune import (
    frozen_weight_bytes,
    layer_counts,
    layer_matrices,
    nf4_bytes,
    sequence_linears,
    trainable_params,
)
from transformer_calc.estimators.training.memory import mixer_activations, training_memory
from transformer_calc.model.config import LayerAttention, ModelConfig, Parallelism, Training, Workload
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import preset_model

_DELTANET = {"vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
             "linear_key_head_dim": 16, "linear_value_head_dim": 24, "linear_conv_kernel_dim": 4,
             "intermediate_size": 96}  # fmt: skip
HF = {
    # three Gated DeltaNet layers, then full attention (full_attention_interval 4)
    "qwen3_next": {"model_type": "qwen3_next", **_DELTANET, "num_experts": 0},
    "qwen3_5_text": {"model_type": "qwen3_5_text", **_DELTANET},
    # Mamba-2, then attention (docs/formulas.md §5.7's Bamba)
    "bamba": {"model_type": "bamba", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "mamba_n_heads": 8, "mamba_d_state": 16, "num_hidden_layers": 2, "attn_layer_indices": [1],
              "intermediate_size": 96, "vocab_size": 97},
    # a short-conv layer, then attention
    "lfm2": {"model_type": "lfm2", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 96, "block_auto_adjust_ff_dim": False,
             "layer_types": ["conv", "full_attention"], "conv_L_cache": 3},
    # a Mamba(-1) layer (d_inner 64, N 8, R 4), then attention
    "jamba": {"model_type": "jamba", "vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 64, "attn_layer_period": 2, "attn_layer_offset": 1,
              "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 1, "mamba_d_state": 8,
              "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 4},
}  # fmt: skip
MODELS = {k: ModelConfig.model_validate(from_hf_config(v)) for k, v in HF.items()}


@pytest.mark.parametrize(
    ("model", "targets", "expected"),
    [
        # r = 4; per DeltaNet layer in_proj_qkvz 4·(64 + 256) + in_proj_ba 4·(64 + 8) + out_proj 4·(96 + 64) = 2208, x 3
        pytest.param("qwen3_next", "mixer", 6624, id="peft-qwen3_next-mixer"),
        # the attention layer: q_proj 4·(64 + 2·64) (the output gate doubles it), k, v 4·(64 + 32), o 4·(64 + 64)
        pytest.param("qwen3_next", "q,k,v,o", 2048, id="peft-qwen3_next-qkvo"),
        pytest.param("qwen3_next", "q,k,v,o,mixer", 2048 + 6624, id="peft-qwen3_next-qkvo-mixer"),
        # Qwen3.5's four input projections: 4·(64+160) + 4·(64+96) + 2·4·(64+4) + out_proj 640 = 2720, x 3
        pytest.param("qwen3_5_text", "mixer", 8160, id="peft-qwen3_5-mixer"),
        pytest.param("qwen3_5_text", "all-linear", 17888, id="peft-qwen3_5-all-linear"),
        # Bamba: in_proj 4·(64 + 2·128 + 2·16 + 8) + out_proj 4·(128 + 64) = 2208
        pytest.param("bamba", "mixer", 2208, id="peft-bamba-mixer"),
        pytest.param("bamba", "q,k,v,o", 1792, id="peft-bamba-qkvo"),
        pytest.param("bamba", "all-linear", 7840, id="peft-bamba-all-linear"),
        # LFM2: in_proj 4·(64 + 192) + out_proj 4·(64 + 64) = 1536
        pytest.param("lfm2", "mixer", 1536, id="peft-lfm2-mixer"),
        pytest.param("lfm2", "all-linear", 7168, id="peft-lfm2-all-linear"),
        # Jamba: in_proj 4·(32 + 128), x_proj 4·(64 + 20), dt_proj 4·(4 + 64), out_proj 4·(64 + 32) = 1632
        pytest.param("jamba", "mixer", 1632, id="peft-jamba-mixer"),
        pytest.param("jamba", "q,k,v,o", 896, id="peft-jamba-qkvo"),
        pytest.param("jamba", "all-linear", 4832, id="peft-jamba-all-linear"),
    ],
)
def test_trainable_params_equal_peft(model, targets, expected):
    assert trainable_params(MODELS[model], Training(finetune="lora", lora_rank=4, lora_targets=targets)).total == expected


def test_worked_example_qwen3_6_27b():
    """docs/formulas.md §2.6.1: Qwen3.6-27B, r = 16 on the 48 Gated DeltaNet layers' five projections."""
    m = preset_model("qwen3.6-27b")
    D, kd, vd, Hv = 5120, 16 * 128, 48 * 128, 48
    per_layer = 16 * ((D + 2 * kd + vd) + (D + vd) + 2 * (D + Hv) + (vd + D))
    assert per_layer == 771_584
    assert trainable_params(m, Training(finetune="lora", lora_rank=16, lora_targets="mixer")).total == 48 * per_layer


ALL = [preset_model(n) for n in ("qwen3-next-80b-a3b", "qwen3.6-27b", "qwen3.6-35b-a3b", "granite-4.0-h-small",
                                  "nemotron-3-nano-30b-a3b", "lfm2-1.2b", "kimi-linear-48b-a3b")] + list(MODELS.values())


@pytest.mark.parametrize("m", ALL, ids=lambda m: m.name or "tiny")
@pytest.mark.parametrize("T", [1, 2])
def test_mixer_linears_are_the_matmul_weights(m, T):
    """Every kind's Linear modules sum to the weights its projections hold on a rank (params.py)."""
    for kind in m.mixer_kinds:
        try:
            linears = MIXERS[kind].linears(m, T)
        except ValueError:
            continue  # T does not split this layer (the estimators refuse it by name)
        assert sum(x.d_in * x.d_out for x in linears) == MIXERS[kind].matmul_params(m, T)


@settings(max_examples=30, deadline=None)
@given(m=st.sampled_from(ALL), r=st.integers(1, 64), targets=st.sampled_from(["mixer", "all-linear", "q,k,v,o,mixer"]))
def test_lora_is_linear_in_r_and_dora_adds_the_output_widths(m, r, targets):
    def count(method: str, rank: int) -> int:
        return trainable_params(m, Training(finetune=method, lora_rank=rank, lora_targets=targets)).adapters

    assert count("lora", r) == r * count("lora", 1)
    if not (m.all_linear_experts and targets == "all-linear"):  # there PEFT refuses DoRA (its experts' ParamWrapper)
        assert count("dora", r) - count("lora", r) == count("dora", 1) - count("lora", 1) > 0  # Σ d_out, not r


def test_mixer_target_adds_only_mixer_layers():
    """`mixer` adapts the mixer layers alone: adding it to q,k,v,o adds exactly its own count."""
    for m in ALL:
        tr = lambda t: trainable_params(m, Training(finetune="lora", lora_rank=8, lora_targets=t)).adapters  # noqa: E731
        if m.all_linear_experts:
            continue
        assert tr("q,k,v,o,mixer") == tr("q,k,v,o") + tr("mixer")


def test_qlora_quantizes_every_mixer_linear():
    """QLoRA's frozen bytes: every Linear weight of the layers in NF4 (the mixers' included; their conv1d,
    A_log, dt_bias, D and norms are not Linear and stay at p bytes)."""
    m = MODELS["qwen3_next"]
    counts = layer_counts(m)
    mats = layer_matrices(m, counts)
    deltanet = sum(x.d_in * x.d_out for x in sequence_linears(m, LayerAttention.deltanet))
    assert deltanet == 64 * 256 + 64 * 8 + 96 * 64  # in_proj_qkvz, in_proj_ba, out_proj
    assert sum(n * c for n, c in mats if c == 3) == 3 * deltanet  # the three DeltaNet layers
    elems = sum(n * c for n, c in mats)
    nf4 = sum(nf4_bytes(n) * c for n, c in mats)
    params = count_params(m).total
    tr = Training(finetune="qlora", lora_rank=4)
    assert frozen_weight_bytes(m, tr, params, counts, 1, 1, None) == ((params - elems) * 2 + nf4, nf4)


def _act(m: ModelConfig, kind: LayerAttention, **tr: object) -> int:
    w, par = Workload(seq_len=128, batch_size=2), Parallelism()
    return mixer_activations(m, w, Training.model_validate({"precision": "bf16", **tr}), par, kind)


def test_adapter_activations_on_a_short_conv_layer_by_hand():
    """docs/formulas.md §2.6.1: LFM2's conv layer, bf16 (p = 2), B = 2, S = 128, D = 64, r = 4. Frozen
    (targets q,k,v,o): the layer's input and out_proj's input go (2·B·S·D each); `mixer`: both
    projections adapted, the input kept (shared), each keeps its rank-r intermediate (2·B·S·r)."""
    m, conv, B, S, D, r = MODELS["lfm2"], LayerAttention.conv, 2, 128, 64, 4
    full = _act(m, conv)
    assert full - _act(m, conv, finetune="lora", lora_rank=r, lora_targets="q,k,v,o") == 2 * B * S * D + 2 * B * S * D
    assert _act(m, conv, finetune="lora", lora_rank=r, lora_targets="mixer") - full == 2 * (2 * B * S * r)


def test_adapter_activations_mixed_precision_keep_own_input_copies():
    """Mixed precision: each adapted module keeps its own 16-bit input copy and the casts of its A and B
    (finetune.separate_adapter_inputs), the shared input and the frozen out_proj input go."""
    m, conv, B, S, D, r = MODELS["lfm2"], LayerAttention.conv, 2, 128, 64, 4
    w, par = Workload(seq_len=S, batch_size=B), Parallelism()
    full = mixer_activations(m, w, Training(), par, conv)
    lora = mixer_activations(m, w, Training(finetune="lora", lora_rank=r, lora_targets="mixer"), par, conv)
    in_proj, out_proj = (D, 3 * D), (D, D)
    added = sum(2 * (B * S * r + B * S * d_in + r * (d_in + d_out)) for d_in, d_out in (in_proj, out_proj))
    assert lora - full == added - 2 * B * S * D - 2 * B * S * D


def test_hybrid_lora_memory_sums_stage_counts():
    """training_memory's trainable parameters on a pipeline of hybrid layers: the stages' sum is the
    model's adapters (each stage counts its own layers' kinds)."""
    m = preset_model("qwen3.6-27b")
    tr = Training(finetune="lora", lora_rank=16, lora_targets="q,k,v,o,mixer")
    stages = training_memory(m, Workload(seq_len=1024, batch_size=1), tr, Parallelism(pipeline=4))
    assert sum(s.trainable_params for s in stages) == trainable_params(m, tr).adapters


def test_cli_finetune_hybrid_json(capsys):
    code = run(["memory", "--preset", "qwen3.6-27b", "--finetune", "qlora", "--lora-rank", "16", "--lora-targets",
                "q,k,v,o,mixer", "--S", "2048", "-f", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    m = preset_model("qwen3.6-27b")
    assert out["finetune"]["trainable_params"] == trainable_params(
        m, Training(finetune="qlora", lora_rank=16, lora_targets="q,k,v,o,mixer")).total
    assert out["memory"]["weights_detail"]["quantized_bytes"] > 0


def test_mixer_target_on_attention_only_model_is_an_error(capsys):
    code = run(["memory", "--preset", "llama-3.1-8b", "--finetune", "lora", "--lora-targets", "mixer", "--S", "128"])
    err = capsys.readouterr().err
    assert code == 2 and "lora_targets (mixer) select no module" in err


def test_unpriced_parts_still_refused():
    """Nemotron 3 Super's latent MoE (and Zamba2's shared blocks) stay refused by name; Gemma 4's varied
    layers are priced by their own classes (estimators/training/gemma4.py), which finetune.py refuses."""
    with pytest.raises(TcalcError, match="fine-tuning .adapters. is not priced for .*latent MoE"):
        trainable_params(preset_model("nemotron-3-super"), Training(finetune="lora", lora_rank=8))
    with pytest.raises(TcalcError, match="fine-tuning .adapters. is not priced for .*Gemma 4"):
        trainable_params(preset_model("gemma-4-31b"), Training(finetune="lora", lora_rank=8))
    from transformer_calc.estimators.training import gemma4

    assert gemma4.trainable_params(preset_model("gemma-4-31b"), Training(finetune="lora", lora_rank=8)).total > 0


# ---------------------------------------------------------------------------- quantized weights
def test_awq_on_a_hybrid_by_hand():
    """awq-int4 on the tiny Bamba: every Linear of both layers in 128-weight groups of 66.5 bytes (64 B of
    codes, an fp16 scale, a packed int4 zero) - Mamba-2's in_proj (64 -> 296) and out_proj (128 -> 64),
    the attention's q, k, v, o and both MLPs - the rest (embeddings, head, conv1d, A_log, dt_bias, D,
    norms) at fp16."""
    m = MODELS["bamba"]
    q = quantized_weights(m, "awq-int4")
    mats = [(64, 296), (128, 64), (64, 64), (64, 32), (64, 32), (64, 64)] + 2 * [(64, 96), (64, 96), (96, 64)]
    groups = sum(-(-d_in // 128) * d_out for d_in, d_out in mats)
    assert q.quantized_params == sum(a * b for a, b in mats)
    assert q.quantized_bytes == groups * AWQ_INT4.block_bytes + groups * INT4_ZERO_BITS // 8
    assert q.other_params == count_params(m).total - q.quantized_params
    assert q.total_bytes == q.quantized_bytes + 2 * q.other_params


def test_per_head_gates_stay_unquantized():
    """The DeltaNet's in_proj_ba (one beta and one a per value head) stays in 16 bits, as in Qwen's
    published FP8 checkpoints (modules_to_not_convert: in_proj_a, in_proj_b, in_proj_ba)."""
    m = MODELS["qwen3_next"]
    names = {x.name for x in block_matrices(m)}
    assert {"ssm_in_proj_qkvz", "ssm_out_proj"} <= names and "ssm_in_proj_ba" not in names


def test_gguf_on_hybrids_is_refused_by_name(capsys):
    assert run(["inference", "--preset", "lfm2-1.2b", "--weight-dtype", "q4_k_m", "--S", "128"]) == 2
    err = capsys.readouterr().err
    assert "short convolution" in err and "Traceback" not in err


def test_cli_inference_awq_hybrid_json(capsys):
    assert run(["inference", "--preset", "granite-4.0-h-small", "--weight-dtype", "awq-int4", "--S", "1024",
                "--gpu", "h100", "-f", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["memory"]["per_gpu"]["weights_bytes"] == quantized_weights(preset_model("granite-4.0-h-small"), "awq-int4").total_bytes


def test_frozen_deltanet_layer_matches_the_measured_saved_tensors():
    """tools/crosscheck/lora_activations_mixers.py's qwen3_next case (D = 32, H_v = 4, d_v = 12, bf16,
    S = 100, B = 1, torch-eager), LoRA on q,k,v,o: PyTorch keeps 27,216 bytes fewer in the DeltaNet layer
    than in full training - its input 2·100·32, out_proj's input 2·100·48, and what only the frozen
    A_log and norm weight needed: softplus's fp32 output 4·100·4, exp(A_log) 4·4, the norm's x̂ 2·100·48."""
    from transformer_calc.estimators.training.finetune import mixer_activation_delta

    cfg = {"model_type": "qwen3_next", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
           "num_key_value_heads": 1, "head_dim": 8, "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
           "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 12,
           "linear_conv_kernel_dim": 4, "num_experts": 0, "intermediate_size": 32}  # fmt: skip
    m = ModelConfig.model_validate(from_hf_config(cfg))
    tr = Training(precision="bf16", activations="torch-eager", finetune="lora", lora_rank=8, lora_targets="q,k,v,o")
    delta = mixer_activation_delta(m, LayerAttention.deltanet, 1, 100, 100, tr, Parallelism(), fused=False)
    assert delta == -(2 * 100 * 32 + 2 * 100 * 48 + 4 * 100 * 4 + 4 * 4 + 2 * 100 * 48) == -27_216


@pytest.mark.parametrize("m", ALL, ids=lambda m: m.name or "tiny")
def test_quantized_matrices_layer_by_layer_equal_the_closed_form_sums(m):
    """quant.block_matrices walks the layers one by one; finetune.layer_matrices sums each kind's
    matrices over closed-form layer counts: the same weights, less the per-head gates and the shared
    expert's gate (D -> 1) that the weight formats leave in 16 bits."""
    counts = layer_counts(m)
    elems = sum(e * c for e, c in layer_matrices(m, counts))
    per_head = sum(n * x.d_in * x.d_out for k, n in counts.sequence.items() if k in MIXERS
                   for x in MIXERS[k].linears(m, 1) if x.per_head)
    shared_gate = counts.moe * m.d_model if m.shared_expert_gate else 0
    assert quantized_weights(m, "awq-int4").quantized_params == elems - per_head - shared_gate


def test_falcon_h1_shared_input_is_dropped_once():
    """Falcon-H1 runs attention and Mamba-2 on the same input: the attention part owns it (drops it once
    when frozen); the mixer's in_proj reads its own copy scaled by ssm_in_multiplier, which the fused
    profile does not count (measured for torch-eager by tools/crosscheck/lora_activations_mixers.py)."""
    from transformer_calc.estimators.training.finetune import mixer_activation_delta

    m = ModelConfig.model_validate(from_hf_config({
        "model_type": "falcon_h1", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
        "num_key_value_heads": 1, "intermediate_size": 40, "mamba_n_heads": 4, "mamba_d_head": 16,
        "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_expand": 2, "mamba_d_conv": 4, "mamba_chunk_size": 16,
        "mamba_d_ssm": 64, "num_hidden_layers": 1, "head_dim": 16}))
    B, S, par = 2, 64, Parallelism()

    def delta(targets: str) -> int:
        tr = Training(precision="bf16", finetune="lora", lora_rank=4, lora_targets=targets)
        return mixer_activation_delta(m, LayerAttention.mamba2, B, S, S, tr, par, fused=True)

    frozen = MIXERS[LayerAttention.mamba2].frozen_parameter_bytes(m, B, S, 2, 1, True)
    assert delta("gate,up,down") == -frozen  # fused Mamba-2 keeps no out_proj input; the input is the attention's
    assert delta("mixer") == 2 * 2 * B * S * 4 - frozen  # two rank-4 intermediates; the input stays the attention's


def test_jamba_dt_proj_adapter_is_counted_but_never_runs():
    """modeling_jamba.py computes `self.dt_proj.weight @ time_step`: PEFT counts dt_proj's A and B as
    trainable (peft_params.py) but they never run, so they add no FLOPs."""
    from transformer_calc.estimators.training.finetune import adapter_flops_per_token

    m, r = MODELS["jamba"], 4
    tr = Training(finetune="lora", lora_rank=r, lora_targets="mixer")
    D, di, N, R = 32, 64, 8, 4
    ran = [(D, 2 * di), (di, R + 2 * N), (di, D)]  # in_proj, x_proj, out_proj
    assert trainable_params(m, tr).adapters == r * sum(a + b for a, b in ran) + r * (R + di)
    assert adapter_flops_per_token(m, tr) == 2 * r * sum(a + b for a, b in ran)


@pytest.mark.parametrize("optimizer", ["adamw-8bit", "adafactor", "muon"])
@pytest.mark.parametrize("m", ALL[:7], ids=lambda m: m.name or "tiny")
def test_shaped_optimizer_states_cover_the_adapters(m, optimizer):
    """Under adapters the states shaped per tensor are the adapters' own (A, B per adapted module, kind
    by kind): the optimizer's groups hold exactly the trainable parameters."""
    from transformer_calc.estimators.training.optimizers import model_groups

    tr = Training(finetune="lora", lora_rank=8, lora_targets="q,k,v,o,mixer", optimizer=optimizer)
    assert sum(g.params for g in model_groups(m, tr)) == trainable_params(m, tr).total
