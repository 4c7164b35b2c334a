"""Kimi Delta Attention (estimators/mixers/kda.py) and the kimi_linear import: parameters, FLOPs,
decode state and tensor-parallel share by hand, each number beside its source (transformers 5.23
modeling_kimi_linear.py; the counts equal what it builds, tools/crosscheck/hf_params.py,
flops_mixers.py and kv_cache.py check them against transformers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode_state, kv_cache
from transformer_calc.estimators.mixers import MIXERS, require_attention_only
from transformer_calc.estimators.params import count_params, shard_params, tensor_parallel_params
from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.sources.hf import UNREPRESENTABLE, from_hf_config

KDA = MIXERS[LayerAttention.kda]
PUBLISHED = Path(__file__).resolve().parents[1] / "tools/crosscheck/published_configs/kimi-linear-48b-a3b.json"
# docs/formulas.md §5.11's worked example (tools/crosscheck/kv_cache.py's kimi_linear case): D = 64,
# H = 3 KDA heads of d = 8, K = 3; layers KDA, MLA, KDA, KDA; MLA r_kv = 16, d_rope = 8; V = 97
TINY_HF = {"model_type": "kimi_linear", "vocab_size": 97, "hidden_size": 64, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 96, "pad_token_id": None,
           "num_local_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "kv_lora_rank": 16,
           "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "linear_num_heads": 3,
           "linear_head_dim": 8, "linear_conv_kernel_dim": 3,
           "layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention"]}  # fmt: skip
TINY = ModelConfig.model_validate(from_hf_config(TINY_HF))


def test_import_pattern_and_widths():
    assert [k.value for k in TINY.attention_pattern] == ["kda", "full", "kda"]  # shortest period of the 4 layers
    assert TINY.n_attention_layers(LayerAttention.kda) == 3
    assert TINY.mixer_kinds == (LayerAttention.kda,) and TINY.is_mla and TINY.n_softmax_layers() == 1
    assert (TINY.linear_key_heads, TINY.linear_key_head_dim, TINY.conv_kernel) == (3, 8, 3)
    assert "kimi_linear" not in UNREPRESENTABLE


def test_kda_params_by_hand():
    """KimiLinearDeltaAttention: q/k/v_proj 3·64·24 = 4,608; b_proj 64·3 = 192; f_a/f_b 64·8 + 8·24
    = 704; g_a/g_b 704; o_proj 24·64 = 1,536; conv1d 72·3 = 216; dt_bias 24, A_log 3, o_norm 8:
    7,995 = sum(p.numel() for p in KimiLinearDeltaAttention(config, 0).parameters()) (transformers 5.23)."""
    p = KDA.params(TINY)
    assert (p.projections, p.conv, p.other, p.total) == (7_744, 216, 35, 7_995)
    assert count_params(TINY).mixers == 3 * 7_995


def test_kda_forward_flops_by_hand():
    """B = 1, S = 70: two chunks of C = 64 (S_p = 128), 3 heads of d = 8. Counted matmuls
    2·S_p·(3·C·d + 3·d²) per head; hidden per chunk and head 2·(2·C²·d + Σ_{i<C} i²) =
    2·(65,536 + 85,344); the conv 2·(70 + 2)·72·3; the projections 2·70·7,744."""
    f = KDA.forward_flops(TINY, 1, 70)
    assert f.core == 3 * 2 * 128 * (3 * 64 * 8 + 3 * 8 * 8) == 1_327_104
    assert f.hidden == 3 * 2 * 2 * (65_536 + 85_344) == 1_810_560
    assert f.conv == 2 * 72 * 72 * 3
    assert f.projections == 2 * 70 * 7_744
    # the per-token prompt rate is the chunked form without the padding
    assert KDA.prompt_token_flops(TINY, 1) == 2 * 72 * 3 + 3 * (2 * (3 * 64 * 8 + 3 * 64) + 2 * (65_536 + 85_344) // 64)
    # one decode token: K taps per conv channel, three multiply-adds per state element
    assert KDA.token_flops(TINY, 1) == 2 * 72 * 3 + 2 * 3 * 3 * 8 * 8 == 1_584


def test_kda_decode_state_and_kv_cache():
    """Per sequence: conv state 72·3 at the activation dtype, recurrent 3·8·8 in fp32 (the layer
    stores last_recurrent_state.to(torch.float32)), on 3 KDA layers; the MLA layer caches its latent
    r_kv + d_rope = 24 per token (tools/crosscheck/kv_cache.py: equal to transformers' cache)."""
    assert (KDA.state(TINY, 1).conv, KDA.state(TINY, 1).recurrent) == (216, 192)
    spec = InferenceSpec(batch_size=2, prompt_len=13, new_tokens=1, weight_dtype="bf16", kv_dtype="bf16")
    st = decode_state(TINY, spec)
    assert st is not None
    assert (st.conv_bytes_per_sequence, st.recurrent_bytes_per_sequence) == (3 * 216 * 2, 3 * 192 * 4)
    assert kv_cache(TINY, spec, context_len=13).total_bytes == 2 * 13 * 24 * 2


def test_kda_tensor_parallel_share():
    """Heads split T ways; f_a_proj and g_a_proj (64 x 8 each) and o_norm (8) replicated
    (vLLM's KimiDeltaAttention): (7,995 - 1,024 - 8) / 3 + 1,032."""
    assert KDA.shard_params(TINY, 3) == (7_995 - 1_024 - 8) // 3 + 1_024 + 8 == 3_353
    assert KDA.matmul_params(TINY, 3) == (7_744 - 1_024) // 3 + 1_024
    assert KDA.state(TINY, 3).recurrent == 64
    with pytest.raises(ValueError, match=r"linear_key_heads \(3\) must be divisible by T \(2\)"):
        KDA.check(TINY, 2)
    m = TINY.with_overrides({"n_heads": 6, "d_model": 66, "moe_d_ff": 48, "shared_expert_d_ff": 48})
    assert shard_params(m, 3).total(m) == tensor_parallel_params(m, 3)


def test_published_kimi_linear_48b():
    """moonshotai/Kimi-Linear-48B-A3B (reconstructed config, SOURCES.md): 20 KDA + 7 MLA layers;
    49,122,675,072 = transformers 5.23's KimiLinearForCausalLM on the meta device
    (tests/data/hf/kimi_linear_kimi-linear-48b-a3b.json)."""
    m = ModelConfig.model_validate(from_hf_config(json.loads(PUBLISHED.read_text())))
    c = count_params(m)
    assert c.total == 49_122_675_072
    assert m.n_attention_layers(LayerAttention.kda) == 20 and c.n_attention_layers == 7
    assert KDA.params(m).total == 39_514_272  # one KDA layer: 32 heads of 128, D = 2304


def test_kda_needs_equal_key_and_value_widths():
    spec = from_hf_config(TINY_HF) | {"linear_value_heads": 6}
    with pytest.raises(ValueError, match=r"linear_value_heads \(6\) must equal linear_key_heads \(3\)"):
        ModelConfig.model_validate(spec)
    spec = from_hf_config(TINY_HF)
    del spec["conv_kernel"]
    with pytest.raises(ValueError, match="kda layers but conv_kernel is not given"):
        ModelConfig.model_validate(spec)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"linear_attn_config": {"full_attn_layers": [1], "kda_layers": [2]}}, "linear_attn_config"),
        ({"layer_types": ["linear_attention", "moe"] * 2}, "layer_types"),
        ({"mlp_layer_types": ["sparse", "dense", "sparse", "sparse"]}, "mlp_layer_types"),
        ({"linear_attn_config": {"head_dim": 0}}, "linear_attn_config.head_dim"),
    ],
)
def test_import_refuses_in_one_line(bad, message):
    cfg = {k: v for k, v in TINY_HF.items() if k != "layer_types"}  # given layer_types win over the lists
    with pytest.raises(TcalcError, match=message):
        from_hf_config(cfg | bad)


def test_checkpoint_names_and_first_dense():
    """The released file's names (attribute_map: num_experts, num_experts_per_token,
    num_shared_experts, model_max_length; linear_attn_config's 1-indexed layer lists) and
    first_k_dense_replace (default 1) give the same spec as the field names."""
    cfg = dict(TINY_HF)
    for old, new in (("num_local_experts", "num_experts"), ("num_experts_per_tok", "num_experts_per_token")):
        cfg[new] = cfg.pop(old)
    cfg.pop("layer_types")
    cfg["linear_attn_config"] = {"full_attn_layers": [2], "kda_layers": [1, 3, 4], "num_heads": 3, "head_dim": 8,
                                 "short_conv_kernel_size": 3}
    for key in ("linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim"):
        cfg.pop(key)
    assert from_hf_config(cfg) == from_hf_config(TINY_HF)
    spec = from_hf_config(TINY_HF | {"first_k_dense_replace": 3})
    assert spec["first_dense_layers"] == 3 and from_hf_config(TINY_HF)["first_dense_layers"] == 1


def test_unmodeled_estimates_refuse():
    with pytest.raises(TcalcError, match="Kimi Delta Attention"):
        require_attention_only(TINY, "training activations")
