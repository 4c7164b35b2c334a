"""OLMo Hybrid's Gated DeltaNet (estimators/mixers/olmo_gdn.py), the olmo_hybrid import and the mixer
kinds' one table (model/mixer_blocks.py): parameters, linears, LoRA and the defaults by hand, each number
beside its source (transformers 5.23 modular_olmo_hybrid.py; the counts equal what it builds and what
PEFT 0.21.2 adapts: tools/crosscheck/hf_params.py, flops_mixers.py, kv_cache.py, activations_mixers.py,
peft_params.py and lora_activations_mixers.py check them against transformers)."""

from __future__ import annotations

import json

import pytest

from transformer_calc.cli import run
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.mixers import MIXER_MODULES, MIXERS
from transformer_calc.estimators.params import count_params
from transformer_calc.estimators.training.finetune import trainable_params
from transformer_calc.model.config import ATTENTION_KINDS, SHOWN_WHEN_SET, LayerAttention, ModelConfig, Training
from transformer_calc.model.mixer_blocks import BLOCKS_BY_KIND, MIXER_BLOCKS
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import preset_model

GDN = MIXERS[LayerAttention.olmo_gdn]
QWEN_GDN = MIXERS[LayerAttention.deltanet]
# tools/crosscheck/kv_cache.py's olmo_hybrid case: D = 64, H_k = 2 key heads of d_k = 8, H_v = 4 value heads of
# d_v = 12, K = 3; layers GDN, GDN, attention (A = 4, n_kv = 2) twice; V = 97
TINY_HF = {"model_type": "olmo_hybrid", "vocab_size": 97, "hidden_size": 64, "num_hidden_layers": 6,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "pad_token_id": None,
           "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
           "linear_value_head_dim": 12, "linear_conv_kernel_dim": 3,
           "layer_types": ["linear_attention", "linear_attention", "full_attention"] * 2}  # fmt: skip
TINY = ModelConfig.model_validate(from_hf_config(TINY_HF))


def test_import_pattern_and_widths():
    assert [k.value for k in TINY.attention_pattern] == ["olmo_gdn", "olmo_gdn", "full"]
    assert TINY.mixer_kinds == (LayerAttention.olmo_gdn,) and TINY.n_attention_layers(LayerAttention.olmo_gdn) == 4
    assert (TINY.qk_norm, TINY.qk_norm_scope.value, TINY.head_dim) == (True, "full", 16)


def test_defaults_follow_the_config_class():
    """configuration_olmo_hybrid.py __post_init__: linear heads A, d_k = int(0.75·D / H_k), d_v = 2·d_k;
    layer i full attention when i % 4 == 3 (the last one when none is); a file's rope_theta null is NoPE."""
    m = ModelConfig.model_validate(from_hf_config({"model_type": "olmo_hybrid", "pad_token_id": None, "vocab_size": 97,
                                                   "hidden_size": 60, "num_attention_heads": 5, "num_hidden_layers": 8,
                                                   "rope_parameters": {"rope_theta": None}}))
    assert (m.linear_key_heads, m.linear_value_heads, m.linear_key_head_dim, m.linear_value_head_dim) == (5, 5, 9, 18)
    assert [k.value for k in m.attention_pattern] == ["olmo_gdn"] * 3 + ["full"] and m.positional.value == "none"
    short = ModelConfig.model_validate(from_hf_config({"model_type": "olmo_hybrid", "pad_token_id": None,
                                                       "vocab_size": 97, "hidden_size": 64, "num_attention_heads": 4,
                                                       "num_hidden_layers": 3}))
    assert [k.value for k in short.attention_pattern] == ["olmo_gdn", "olmo_gdn", "full"]


def test_params_by_hand_equal_qwen3_next_layer_of_the_same_widths():
    """OlmoHybridGatedDeltaNet: q_proj, k_proj 64·16 each; v_proj 64·48; a_proj, b_proj 64·4 each; g_proj
    64·48; o_proj 48·64: 11,776; conv1d (2·16 + 48)·3 = 240; A_log, dt_bias 4 each, o_norm 12: 12,036 =
    sum(p.numel() for p in OlmoHybridGatedDeltaNet(config, 0).parameters()) (transformers 5.23). The same
    tensors as Qwen3-Next's fused layer of these widths."""
    p = GDN.params(TINY)
    assert (p.projections, p.conv, p.other, p.total) == (11_776, 240, 20, 12_036)
    assert QWEN_GDN.params(TINY) == p
    assert count_params(TINY).mixers == 4 * 12_036


def test_seven_linears_are_the_matmul_weights():
    names = [lin.name for lin in GDN.linears(TINY, 1)]
    assert names == ["q_proj", "k_proj", "v_proj", "a_proj", "b_proj", "g_proj", "o_proj"]
    for T in (1, 2):
        assert sum(lin.d_in * lin.d_out for lin in GDN.linears(TINY, T)) == GDN.matmul_params(TINY, T)
    by_name = {lin.name: lin for lin in GDN.linears(TINY, 2)}
    assert (by_name["v_proj"].d_out, by_name["o_proj"].d_in, by_name["o_proj"].split) == (24, 24, "row")
    assert by_name["a_proj"].per_head and by_name["b_proj"].per_head and not by_name["g_proj"].per_head


def test_lora_on_the_mixer_equals_peft():
    """LoRA r = 4 on the GDN layers' seven Linear modules: per layer 4·((64+16)·2 + (64+48)·2 + (64+4)·2
    + (48+64)) = 2,528, four layers 10,112 = PEFT 0.21.2's get_nb_trainable_parameters() (Qwen3-Next's two
    fused projections would give 1,504 per layer)."""
    assert trainable_params(TINY, Training(finetune="lora", lora_rank=4, lora_targets="mixer")).total == 10_112


def test_published_7b_equals_transformers():
    """allenai/Olmo-Hybrid-7B (tools/crosscheck/published_configs/olmo-hybrid-7b.json): 7,430,870,688
    parameters, what transformers 5.23 builds and open-instruct's olmo3_hybrid_7B pins."""
    assert count_params(preset_model("olmo-hybrid-7b")).total == 7_430_870_688


def test_pattern_needs_the_widths_and_the_heads_agree():
    base = {"n_layers": 4, "d_model": 64, "n_heads": 4, "vocab_size": 100, "attention_pattern": ["olmo_gdn", "full"]}
    with pytest.raises(ValueError, match="olmo_gdn layers but linear_key_heads"):
        ModelConfig.model_validate(base)
    widths = {"linear_key_heads": 2, "linear_value_heads": 3, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
              "conv_kernel": 4}
    with pytest.raises(ValueError, match=r"linear_value_heads \(3\) must be a multiple of linear_key_heads \(2\)"):
        ModelConfig.model_validate(base | widths)


def test_reader_refuses_a_model_without_both_kinds(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "olmo_hybrid", "num_hidden_layers": 2,
                                                      "layer_types": ["linear_attention"] * 2}))
    assert run(["params", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: config.json (olmo_hybrid): layer_types") and "both kinds" in err


def test_cli_bad_width_is_one_error_line(capsys):
    assert run(["params", "--preset", "olmo-hybrid-7b", "--set", "linear_value_heads=7"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "linear_value_heads (7)" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- the kinds' one table
def test_every_mixer_kind_is_declared_once_and_registered():
    mixer_kinds = [k for k in LayerAttention if k not in ATTENTION_KINDS and k is not LayerAttention.none]
    assert [b.kind for b in MIXER_BLOCKS] == list(BLOCKS_BY_KIND) and set(BLOCKS_BY_KIND) == set(mixer_kinds)
    assert set(MIXER_MODULES) == set(mixer_kinds)
    for kind in mixer_kinds:
        assert MIXERS[kind].kind is kind  # the module the declaration names holds the kind's Mixer


def test_shown_when_set_is_built_from_the_table():
    """The mixer widths a result lists only when set are the declared ones (the set before the table)."""
    mixer_fields = {"linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                    "conv_kernel", "ssm_heads", "ssm_head_dim", "ssm_state_size", "ssm_groups", "ssm_chunk_size",
                    "ssm_proj_bias", "ssm_conv_bias", "ssm_out_bias", "ssm_norm", "short_conv_bias", "ssm_inner",
                    "ssm_dt_rank", "lightning_block_size", "deltanet_split_in_proj"}
    declared = {f for b in MIXER_BLOCKS for f in (*b.required, *b.shown)}
    assert declared == mixer_fields and mixer_fields <= SHOWN_WHEN_SET


def test_json_lists_the_widths_only_for_a_hybrid(capsys):
    assert run(["params", "--preset", "olmo-hybrid-7b", "-f", "json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["linear_value_head_dim"] == 192 and "ssm_heads" not in model
    assert run(["params", "--preset", "llama-2-7b", "-f", "json"]) == 0
    assert "linear_key_heads" not in json.loads(capsys.readouterr().out)["model"]


def test_training_and_inference_price_the_preset():
    """The protocol prices the new kind everywhere the mixers are priced (docs/models.md's support matrix)."""
    import transformer_calc as tc

    mem = tc.memory("olmo-hybrid-7b", S=4096, gpu="h100")
    assert mem.memory.peak_bytes > 0
    inf = tc.inference("olmo-hybrid-7b", gpu="h100", prompt_len=1000, new_tokens=100)
    assert inf.model.linear_key_heads == 30
    with pytest.raises(TcalcError, match="FP8 recipe .delayed. is not priced for OLMo Gated DeltaNet"):
        tc.memory("olmo-hybrid-7b", S=1024, fp8_recipe="delayed")
