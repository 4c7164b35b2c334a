"""MiMo-V2-Flash (sources/hf_2025.py `_mimo_v2_flash`): sliding layers with twice the K/V heads and
sinks, value heads of v_head_dim, MoE. Goldens by hand from modeling_mimo_v2_flash.py
(MiMoV2FlashAttention; docs/formulas.md §5.13); totals as transformers 5.23 builds them on the meta
device (tools/crosscheck/hf_params.py; fixtures tests/data/hf/mimo_v2_flash_*.json), the cache as
transformers' cache holds it (tools/crosscheck/kv_cache.py), the forward as FlopCounterMode counts it
(tools/crosscheck/flops.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import count_flops
from transformer_calc.estimators.inference.roofline import InferenceSpec, kv_cache, matmul_params
from transformer_calc.estimators.mixers import require_attention_only
from transformer_calc.estimators.params import count_params, shard_params
from transformer_calc.model.config import LayerAttention, ModelConfig, Workload, build_model
from transformer_calc.sources.hf import from_hf_config

# D = 64, A = 4, n_kv = 1 (sliding: 2), h_d = 24, h_v = 16; 7 layers: F S S S S F S (layer 0 and every
# 6th full), W = 8; layer 0 dense (d_ff 96), the others MoE of 4 experts of 32, top 2
SMALL = {"model_type": "mimo_v2_flash", "vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 7,
         "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 24, "v_head_dim": 16,
         "intermediate_size": 96, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
         "sliding_window": 8}


def _model(**over: object) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config({**SMALL, **over}))


def test_reader_shape():
    m = _model()
    assert [k.value for k in m.attention_pattern] == ["full", "sliding", "sliding", "sliding", "sliding"]
    assert (m.n_kv_heads, m.sliding_kv_heads, m.sliding_sinks, m.v_dim) == (1, 2, True, 16)
    assert m.n_attention_layers(LayerAttention.sliding) == 5 and m.first_dense_layers == 1


def test_params_by_hand():
    m = _model()
    p = count_params(m)
    assert (p.layer.attn_q, p.layer.attn_k, p.layer.attn_v, p.layer.attn_o) == (64 * 96, 64 * 24, 64 * 16, 64 * 64)
    assert p.layer.sinks == 0  # the full layers have none
    assert p.sliding_extra == 5 * (64 * 1 * (24 + 16) + 4)  # one more K/V head (k and v) and 4 sinks per sliding layer
    assert p.total == 309204  # transformers 5.23, MiMoV2FlashForCausalLM on the meta device


def test_published_default_shape():
    """configuration_mimo_v2_flash.py's defaults are the published MiMo-V2-Flash's (309B total, 15B active:
    XiaomiMiMo/MiMo-V2-Flash model card); transformers 5.23 builds 308,778,768,832 (hf_params.py)."""
    m = ModelConfig.model_validate(from_hf_config({"model_type": "mimo_v2_flash"}))
    assert count_params(m).total == 308_778_768_832
    assert count_params(m).active == 15_445_924_288


def test_flops_sliding_layers_project_more():
    m = _model()
    f = count_flops(m, Workload(seq_len=10, batch_size=2))
    base = count_flops(_model(layer_types=["full_attention"] * 7), Workload(seq_len=10, batch_size=2))
    # eager attention scores S x S on every layer (windowed off): only the sliding layers' k/v projections differ
    assert f.forward - base.forward == 5 * 2 * 2 * 10 * 64 * (24 + 16)


def test_kv_cache_by_kind():
    m = _model()
    kv = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=20), context_len=20)
    assert kv.bytes_per_token == 2 * (2 * 1 * 40 + 5 * 2 * 40)  # bf16: K (24) + V (16) per head
    assert kv.total_bytes == 2 * (2 * 40 * 20 + 5 * 80 * 7)  # the sliding layers keep W - 1 = 7 tokens


def test_tensor_parallel_shares():
    m = _model(num_attention_heads=8, num_key_value_heads=2, intermediate_size=96)
    for T in (1, 2, 4):
        sh = shard_params(m, T)
        assert sh.sliding_extra == 64 * (4 // T - max(2 // T, 1)) * 40 + (8 // T)
    assert shard_params(m, 1).total(m) == count_params(m).total
    assert matmul_params(m, 1) > matmul_params(m, 2)


def test_refused_where_not_modeled():
    m = _model()
    with pytest.raises(TcalcError, match="MiMo-V2-Flash"):
        require_attention_only(m, "fine-tuning (adapters)")
    with pytest.raises(ValueError, match="cache_kv_heads"):
        kv_cache(m, InferenceSpec(batch_size=1, prompt_len=4, cache_kv_heads=1))


@pytest.mark.parametrize("over, key", [
    ({"swa_num_key_value_heads": 4}, "swa_num_key_value_heads"),
    ({"add_full_attention_sink_bias": True}, "add_full_attention_sink_bias"),
    ({"hybrid_layer_pattern": [1, 1, 1, 1, 1, 0, 1]}, "hybrid_layer_pattern"),
    ({"moe_layer_freq": [1] * 7}, "moe_layer_freq"),
    ({"sliding_window": None}, "sliding_window"),
])
def test_hub_keys_that_disagree_are_refused(over, key):
    with pytest.raises(TcalcError, match=key):
        from_hf_config({**SMALL, **over})


def test_hub_keys_that_agree_are_read():
    m = _model(hybrid_layer_pattern=[0, 1, 1, 1, 1, 0, 1], moe_layer_freq=[0] + [1] * 6, swa_num_key_value_heads=2,
               add_swa_attention_sink_bias=True, sliding_window_size=7)
    assert m.sliding_window == 8 and count_params(m).total == 309204


@pytest.mark.parametrize("spec, msg", [
    ({"sliding_kv_heads": 2}, "needs sliding layers"),
    ({"attention_pattern": ["sliding", "full"], "sliding_window": 4, "sliding_kv_heads": 3}, "divisible"),
    ({"attention_pattern": ["sliding"], "sliding_window": 4, "sliding_sinks": True, "attention_sinks": True}, "keep one"),
])
def test_config_checks(spec, msg):
    with pytest.raises(TcalcError, match=msg):
        build_model({"n_layers": 4, "d_model": 64, "n_heads": 4, "vocab_size": 100, **spec})


@settings(max_examples=40, deadline=None)
@given(kv=st.sampled_from([1, 2]), hv=st.integers(1, 40), L=st.integers(1, 13), S=st.integers(1, 40))
def test_equal_heads_and_widths_are_plain_attention(kv, hv, L, S):
    """sliding_kv_heads = n_kv and no sinks, v_head_dim = head_dim: the same numbers as a model without them;
    the KV bytes per token are linear in h_d + h_v."""
    base = {"n_layers": L, "d_model": 64, "n_heads": 4, "n_kv_heads": kv, "head_dim": 24, "vocab_size": 100,
            "attention_pattern": ["sliding", "full"], "sliding_window": 8}
    plain = build_model(base)
    same = build_model(base | {"sliding_kv_heads": kv, "v_head_dim": 24})
    assert count_params(same).total == count_params(plain).total
    assert count_flops(same, Workload(seq_len=S)).total == count_flops(plain, Workload(seq_len=S)).total
    wide = build_model(base | {"v_head_dim": hv})
    spec = InferenceSpec(batch_size=1, prompt_len=S, kv_dtype="fp32")
    assert kv_cache(wide, spec).bytes_per_token == 4 * L * kv * (24 + hv)


def test_cli_json(tmp_path):
    import json
    import subprocess
    import sys

    from conftest import REPO

    path = tmp_path / "config.json"
    path.write_text(json.dumps(SMALL))
    run = [sys.executable, "-m", "transformer_calc"]
    p = json.loads(subprocess.run([*run, "params", str(path), "--format", "json"], capture_output=True, text=True,
                                  cwd=REPO, check=True).stdout)
    assert p["params"]["total"] == 309204 and p["params"]["sliding_extra"] == 12820
    assert p["model"]["sliding_kv_heads"] == 2 and p["model"]["v_head_dim"] == 16
    inf = json.loads(subprocess.run([*run, "inference", str(path), "--S", "20", "--gpu", "h100", "--format", "json"],
                                    capture_output=True, text=True, cwd=REPO, check=True).stdout)
    assert inf["kv_cache"]["layers_by_kind"] == {"full": 2, "sliding": 5}
    assert inf["kv_cache"]["total_bytes"] == kv_cache(_model(), InferenceSpec(batch_size=1, prompt_len=20)).total_bytes
    mem = json.loads(subprocess.run([*run, "memory", str(path), "--S", "64", "--format", "json"], capture_output=True,
                                    text=True, cwd=REPO, check=True).stdout)  # priced (tests/test_mimo_training.py)
    assert mem["memory"]["stages"][0]["params"] == 309204
    out = subprocess.run([*run, "memory", str(path), "--S", "64", "--finetune", "lora"], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 2 and "MiMo-V2-Flash" in out.stderr and not out.stdout
