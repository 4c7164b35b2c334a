"""Gemma 4 (sources/hf_gemma4.py, the varied layers in estimators/params.py): exact counts checked by hand
and against transformers 5.23 (tools/crosscheck/hf_params.py builds each config on the meta device),
invariants, and the one-line refusals of the estimators that do not price the varied layers yet."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import count_flops
from transformer_calc.estimators.inference.roofline import InferenceSpec, kv_cache
from transformer_calc.estimators.params import count_params, shard_params, total_params
from transformer_calc.model.config import ModelConfig, Workload
from transformer_calc.sources.hf import from_hf_config, type_hint

# docs/formulas.md §5.14's worked example: layers sliding, full, sliding, full; the last two kv-shared
TINY = {"model_type": "gemma4_text", "vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16,
        "num_global_key_value_heads": 1, "attention_k_eq_v": True, "intermediate_size": 48,
        "num_kv_shared_layers": 2, "use_double_wide_mlp": True, "hidden_size_per_layer_input": 4,
        "vocab_size_per_layer_input": 100,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}


def _model(cfg: dict) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg))


def test_worked_example_by_hand():
    """Attention per layer: sliding 1,024 + 512 + 512 + 1,024 + 16 (q/k norms) = 3,088; full (h_d 16, one K/V
    head, no W_V) 2,048 + 512 + 2,048 + 32 = 4,640; kv-shared sliding 1,024 + 1,024 + 8 = 2,056; kv-shared
    full 2,048 + 2,048 + 16 = 4,112. transformers 5.23 builds 54,956 parameters (tools/crosscheck/hf_params.py)."""
    m = _model(TINY)
    p = count_params(m)
    assert (m.full_head_dim, m.full_kv_heads, m.full_k_eq_v, m.kv_shared_layers) == (16, 1, True, 2)
    assert p.layer.attention == 3088
    assert p.attention_variants == 3088 + 4640 + 2056 + 4112 - 4 * 3088 == 1544
    assert p.mlp_variants == 2 * 3 * 32 * 48 == 9216  # the two kv-shared layers' second d_ff
    assert p.per_layer_embedding == 100 * 4 * 4 == 1600
    assert p.per_layer_inputs == 32 * 16 + 4 + 4 * (2 * 32 * 4 + 32) == 1668
    assert p.total == 54956
    assert p.non_embedding == 54956 - 300 * 32 - 1600 == 43756
    d = p.as_dict()
    assert (d["layers_attn_q"], d["layers_attn_k"], d["layers_attn_v"], d["layers_attn_o"]) == (6144, 1024, 512, 6144)


def test_moe_block_is_the_shared_expert_beside_the_experts():
    """enable_moe_block: the dense MLP (counted as the shared expert) + 4 experts of 12 + the router
    (D·E + D scale + E per-expert scale) + 3 more RMSNorms per layer. transformers: 35,016."""
    cfg = {"model_type": "gemma4_text", "vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 8,
           "intermediate_size": 48, "hidden_size_per_layer_input": 0, "enable_moe_block": True, "num_experts": 4,
           "top_k_experts": 2, "moe_intermediate_size": 12, "layer_types": ["sliding_attention", "full_attention"]}
    p = count_params(_model(cfg))
    assert p.layer.router == 32 * 4 + 32 + 4
    assert p.layer.shared_expert == 3 * 32 * 48
    assert p.layer.norms == 7 * 32
    assert p.layer.mlp_weights == 4 * 3 * 32 * 12
    assert p.active == p.total - 2 * 2 * 3 * 32 * 12  # two of four experts idle in each of 2 layers
    assert p.total == 300 * 32 + 2 * (3088 + 4608 + 4608 + 164 + 224) + 32


def test_towers_of_the_wrapper():
    """Gemma4Model: vision tower + embed_vision (h_v x D), audio tower + embed_audio (O x D)."""
    cfg = {"model_type": "gemma4", "text_config": {k: v for k, v in TINY.items() if k != "model_type"},
           "vision_config": {"hidden_size": 16, "num_hidden_layers": 1, "intermediate_size": 24, "num_attention_heads": 2,
                             "num_key_value_heads": 1, "head_dim": 8, "patch_size": 4, "position_embedding_size": 10}}
    m = _model(cfg)
    assert m.towers is not None
    # input_proj 48·16, positions 2·10·16, one layer: q 16·16, k and v 16·8, o 16·16, q/k norms 16, 4 norms 64, MLP 3·16·24
    assert m.towers.vision == 48 * 16 + 2 * 10 * 16 + (256 + 128 + 128 + 256 + 16 + 64 + 3 * 16 * 24)
    assert m.towers.projector == 16 * 32
    assert (m.towers.image_tokens, m.towers.image_patches) == (280, 280 * 9)
    assert total_params(m) == 54956 + m.towers.vision + m.towers.projector


_DIMS = st.fixed_dictionaries({
    "L": st.integers(1, 9), "kv": st.integers(1, 3), "group": st.integers(1, 3), "hd": st.sampled_from([4, 8]),
    "F": st.integers(1, 50), "P": st.integers(0, 5), "moe": st.booleans(),
})


@settings(max_examples=40, deadline=None)
@given(_DIMS)
def test_varied_fields_at_their_base_values_change_nothing(d):
    """Full layers with the base head width and K/V heads, no k=v and no sharing: the same count as the
    model without the Gemma 4 fields, and no variants."""
    A = d["kv"] * d["group"]
    base = {"n_layers": d["L"], "d_model": 24, "n_heads": A, "n_kv_heads": d["kv"], "head_dim": d["hd"], "d_ff": d["F"],
            "vocab_size": 50, "mlp": "geglu", "norm": "rmsnorm", "positional": "rotary", "bias": False, "qk_norm": True,
            "attention_pattern": ["sliding", "full"], "sliding_window": 8}
    if d["moe"]:
        base |= {"n_experts": 3, "experts_per_token": 2, "moe_d_ff": 5, "shared_expert_d_ff": d["F"]}
    plain = ModelConfig.model_validate(base)
    same = ModelConfig.model_validate(base | {"full_head_dim": d["hd"], "full_kv_heads": d["kv"]})
    assert count_params(same).attention_variants == 0
    assert count_params(same).total == count_params(plain).total
    if d["P"]:  # per-layer inputs add exactly their table, projection and gates
        ple = count_params(ModelConfig.model_validate(base | {"per_layer_input_dim": d["P"]}))
        L, P = d["L"], d["P"]
        assert ple.total - count_params(plain).total == 50 * L * P + 24 * L * P + P + L * (2 * 24 * P + 24)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.integers(1, 11))
def test_each_shared_layer_drops_its_k_and_v(L, shared):
    """All-full layers with W_K and W_V of D x n_kv·h_d: every kv-shared layer has neither, nor a k_norm."""
    shared = min(shared, L - 1)
    base = {"n_layers": L, "d_model": 16, "n_heads": 2, "n_kv_heads": 1, "head_dim": 8, "d_ff": 8, "vocab_size": 20,
            "mlp": "geglu", "norm": "rmsnorm", "positional": "rotary", "bias": False, "qk_norm": True}
    plain = count_params(ModelConfig.model_validate(base)).total
    assert count_params(ModelConfig.model_validate(base | {"kv_shared_layers": shared})).total \
        == plain - shared * (2 * 16 * 8 + 8)


def test_flops_equal_flop_counter_mode():
    """B = 1, S = 8, training step: FlopCounterMode counts 2,672,640 (transformers 5.23, eager attention,
    tools/crosscheck/flops.py). Forward by hand: attention 57,344 + 90,112 + 40,960 + 81,920 (sliding, full,
    kv-shared sliding, kv-shared full: projections 2·8·weights and cores 2·(2·A·h_d·S²)); MLPs 4·73,728, the
    kv-shared layers' second width 2·73,728, per-layer gates 4·4,096; LM head 153,600; PLE projection 8,192."""
    step = count_flops(_model(TINY), Workload(seq_len=8, batch_size=1))
    assert step.layers == 270336 + 4 * 73728 + 2 * 73728 + 4 * 4096
    assert step.embedding_projection == 2 * 8 * 32 * 16
    assert step.forward == 890880
    assert step.total == 2672640


def test_kv_cache_holds_no_kv_shared_layer():
    """Per token: sliding layer 0 caches 2·2·8, full layer 1 (h_d 16, one K/V head; k=v still caches both)
    2·1·16; the kv-shared layers 2 and 3 nothing: 64 values, 128 bytes in bf16 (transformers' DynamicCache
    holds the same: tools/crosscheck/kv_cache.py)."""
    from transformer_calc.model.config import LayerAttention

    m = _model(TINY)
    assert (m.n_kv_layers(LayerAttention.sliding), m.n_kv_layers(LayerAttention.full)) == (1, 1)  # layers 0 and 1
    kv = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=16))
    assert kv.bytes_per_token == 2 * (2 * 2 * 8 + 2 * 1 * 16)
    assert kv.total_bytes == 16 * kv.bytes_per_token  # both windows (512) exceed the context


def test_expert_parallelism_is_refused_by_name():
    """Tensor parallelism is priced (tests/test_gemma4_tp.py); expert parallelism is not."""
    m = _model(TINY)
    with pytest.raises(ValueError, match="expert parallelism .ep 2. is not priced for .*shared-KV layers.*Gemma 4.*use ep 1"):
        shard_params(m, 1, 2)
    assert shard_params(m, 1).total(m) == count_params(m).total  # T = 1: the whole model


def test_attention_only_estimates_refuse_by_name():
    """What still refuses the varied layers (quantized weight formats; training memory prices them:
    tests/test_gemma4_training.py)."""
    from transformer_calc.estimators.mixers import require_attention_only, require_training_priced

    with pytest.raises(TcalcError, match="a quantized weight format is not priced for .*shared-KV layers.*Gemma 4"):
        require_attention_only(_model(TINY), "a quantized weight format")
    require_training_priced(_model(TINY), "training memory")  # priced: no refusal


@pytest.mark.parametrize("cfg, words", [
    ({**TINY, "num_kv_shared_layers": 3}, "num_kv_shared_layers"),  # no full layer would be left to produce K/V
    ({**TINY, "use_bidirectional_attention": "all"}, "use_bidirectional_attention"),
    ({**TINY, "per_layer_config": {"0": {"head_dim": 4}}}, "per_layer_config"),  # an override on a sliding layer
    ({**TINY, "layer_types": ["full_attention"]}, "layer_types"),
    ({**TINY, "enable_moe_block": True}, "num_experts"),
])
def test_bad_configs_are_one_clear_error(cfg, words):
    with pytest.raises(TcalcError, match=words):
        from_hf_config(cfg)


def test_a_full_save_reads_per_layer_config():
    """save_pretrained writes per_layer_config (layer index -> head_dim, num_key_value_heads), not global_head_dim."""
    cfg = {k: v for k, v in TINY.items() if k not in ("global_head_dim", "num_global_key_value_heads")}
    cfg["per_layer_config"] = {"1": {"head_dim": 16, "num_key_value_heads": 1}, "3": {"head_dim": 16, "num_key_value_heads": 1}}
    assert count_params(_model(cfg)).total == 54956


def test_hints_never_send_gemma4_elsewhere():
    assert type_hint("gemma_4") == "gemma4"  # a separator slip of a supported type
    assert type_hint("gemma5") is None


# ---------------------------------------------------------------------------- Gemma 3n's language model
# docs/formulas.md §5.15's worked example: 10 layers (full every 5th), the last 2 kv-shared, AltUp n = 3, LAuReL r = 5
TINY_3N = {"model_type": "gemma3n_text", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 48,
           "num_hidden_layers": 10, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
           "hidden_size_per_layer_input": 4, "vocab_size_per_layer_input": 100, "num_kv_shared_layers": 2,
           "altup_num_inputs": 3, "laurel_rank": 5}


def test_gemma3n_counts_by_hand():
    """transformers 5.23 builds 103,548 (Gemma3nForCausalLM, tools/crosscheck/hf_params.py)."""
    m = _model(TINY_3N)
    p = count_params(m)
    assert (m.altup_inputs, m.laurel_rank, m.kv_shared_layers) == (3, 5, 2)
    # per layer: correct_output_scale 32, correction 3·3, prediction 3·9, router 32·3, router norm 32; 2·2 D x D projections
    assert p.altup == 10 * (32 + 9 + 27 + 96 + 32) + 2 * 2 * 32 * 32 == 6056
    assert p.laurel == 10 * (2 * 32 * 5 + 32) == 3520
    assert p.attention_variants == -2 * (512 + 512 + 8)  # the kv-shared layers have no W_K, W_V, k_norm
    assert p.total == 103548


def test_gemma3n_flops_equal_flop_counter_mode():
    """B = 1, S = 8: FlopCounterMode counts 5,076,864 (tools/crosscheck/flops.py); the forward's matmuls less
    the attention cores are 2·tokens per matmul weight of inference (AltUp's token-computed stream mix included)."""
    from transformer_calc.estimators.inference.roofline import matmul_params

    m = _model(TINY_3N)
    step = count_flops(m, Workload(seq_len=8, batch_size=1))
    assert step.total == 5076864
    assert step.forward - step.attention_cores == 2 * 8 * matmul_params(m)


def test_gemma3n_kv_cache_skips_the_shared_layers():
    """8 layers that cache 2·2·8 values per token, in bf16: 512 bytes (tools/crosscheck/kv_cache.py)."""
    assert kv_cache(_model(TINY_3N), InferenceSpec(batch_size=1, prompt_len=16)).bytes_per_token == 8 * 2 * 2 * 8 * 2


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 20))
def test_altup_and_laurel_add_their_closed_forms(L, n, r):
    base = {"n_layers": L, "d_model": 16, "n_heads": 2, "head_dim": 8, "d_ff": 8, "vocab_size": 20, "mlp": "geglu",
            "norm": "rmsnorm", "positional": "rotary", "bias": False}
    plain = count_params(ModelConfig.model_validate(base)).total
    both = count_params(ModelConfig.model_validate(base | {"altup_inputs": n, "laurel_rank": r})).total
    assert both - plain == L * (16 + n * n + n ** 3 + 16 * n + 16) + 2 * (n - 1) * 256 + L * (2 * 16 * r + 16)


def test_gemma3n_text_bad_fields_are_refused_by_name():
    with pytest.raises(TcalcError, match="hidden_size_per_layer_input"):
        from_hf_config({**TINY_3N, "hidden_size_per_layer_input": 0})
    with pytest.raises(TcalcError, match="intermediate_size"):
        from_hf_config({**TINY_3N, "intermediate_size": [48] * 9 + [64]})
