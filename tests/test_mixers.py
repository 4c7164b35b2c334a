"""Sequence mixers other than attention (estimators/mixers/): Gated DeltaNet's parameters, FLOPs,
decode state and tensor-parallel share, checked by hand and against transformers' numbers (their
sources beside them), and the hybrid model as the estimators sum it over the layer pattern."""

from __future__ import annotations

import pytest

import transformer_calc as tc
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import count_flops
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode_state, inference_memory, kv_cache
from transformer_calc.estimators.mixers import MIXERS, require_attention_only
from transformer_calc.estimators.params import count_params, shard_params, tensor_parallel_params
from transformer_calc.model.config import LayerAttention, ModelConfig, Workload
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import gpu as find_gpu, preset_model

GDN = MIXERS[LayerAttention.deltanet]
# docs/formulas.md §5.6's worked example: D = 64, H_k = 2, H_v = 4, d_k = 16, d_v = 24, K = 4, in a
# Qwen3-Next of 4 layers (3 Gated DeltaNet, then 1 full attention), a dense MLP of 96, V = 97
TINY_HF = {"model_type": "qwen3_next", "vocab_size": 97, "hidden_size": 64, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2,
           "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 24,
           "linear_conv_kernel_dim": 4, "num_experts": 0, "intermediate_size": 96}
TINY = ModelConfig.model_validate(from_hf_config(TINY_HF))


def test_pattern_from_layer_types():
    assert [k.value for k in TINY.attention_pattern] == ["deltanet", "deltanet", "deltanet", "full"]
    assert TINY.n_softmax_layers() == 1 and TINY.mixer_kinds == (LayerAttention.deltanet,) and TINY.is_hybrid


def test_deltanet_params_by_hand():
    """in_proj_qkvz + in_proj_ba 64·(2·32 + 2·96 + 2·4) = 16,896; out_proj 96·64 = 6,144; conv1d
    160·4 = 640; dt_bias, A_log 2·4; gated norm 24: 23,712, what transformers 5.23 builds
    (sum of Qwen3NextGatedDeltaNet(...).parameters() on the meta device)."""
    p = GDN.params(TINY)
    assert (p.projections, p.conv, p.other, p.total) == (16_896 + 6_144, 640, 32, 23_712)


def test_hybrid_total_equals_transformers():
    # tests/data/hf fixtures hold transformers' counts; the 80B's is its preset's expected_params
    # (tools/crosscheck/verify_presets.py: Qwen3NextForCausalLM on the meta device)
    m = preset_model("qwen3-next-80b-a3b")
    c = count_params(m)
    assert c.total == 79_674_391_296
    assert c.n_attention_layers == 12 and c.mixers == 36 * GDN.params(m).total
    assert c.as_dict()["layers_attn_q"] == 12 * c.layer.attn_q  # attention parts: attention layers only
    # the gated attention's q_proj: D x 2·A·h_d (modeling_qwen3_next.py Qwen3NextAttention)
    assert c.layer.attn_q == 2048 * 2 * 16 * 256


def test_tensor_parallel_share():
    """Heads split T ways: every part but the shared gated-norm weight (d_v) divides."""
    m = TINY
    assert GDN.shard_params(m, 2) == (23_712 - 24) // 2 + 24
    assert shard_params(m, 2).total(m) == tensor_parallel_params(m, 2)
    with pytest.raises(ValueError, match=r"linear_key_heads \(2\) must be divisible by T \(4\)"):
        tensor_parallel_params(m.with_overrides({"n_heads": 4}), 4)


def test_forward_flops_by_hand():
    """B = 1, S = 5 (one chunk of C = 64, padded): projections 2·5·23,040 = 230,400; conv
    2·(5 + 3)·160·4 = 10,240 (F.conv1d with padding K - 1); core 4 heads · 2·64·(2·64·16 + 3·16·24
    + 64·24) = 2,424,832; the triangular solves 4 · 64·63·(16 + 24) = 645,120."""
    f = GDN.forward_flops(TINY, 1, 5)
    assert (f.projections, f.conv, f.core, f.hidden) == (230_400, 10_240, 2_424_832, 645_120)


def test_model_forward_equals_flop_counter():
    """FlopCounterMode's forward of Qwen3NextForCausalLM(TINY_HF) on the CPU, B = 1, S = 5, is
    8,966,016 (tools/crosscheck/flops_mixers.py, torch 2.13, transformers 5.23): tcalc's forward
    less the solves the counter cannot see."""
    step = count_flops(TINY, Workload(seq_len=5, batch_size=1))
    assert step.forward - 3 * GDN.forward_flops(TINY, 1, 5).hidden == 8_966_016
    assert step.mixers == 3 * GDN.forward_flops(TINY, 1, 5).total


def test_decode_state_is_constant_in_the_context():
    """Per sequence and layer: conv 160·4 values (fp32 here), recurrent 4·16·24 values in fp32; what
    transformers' LinearAttentionLayer holds (tools/crosscheck/kv_cache.py)."""
    spec = InferenceSpec(batch_size=2, prompt_len=5, weight_dtype="fp32")
    st = decode_state(TINY, spec)
    assert st is not None
    assert (st.conv_bytes_per_sequence, st.recurrent_bytes_per_sequence) == (3 * 640 * 4, 3 * 1536 * 4)
    assert st.total_bytes == 2 * 3 * (640 + 1536) * 4
    long = InferenceSpec(batch_size=2, prompt_len=5000, weight_dtype="fp32")
    assert decode_state(TINY, long) == st  # whatever the context
    assert kv_cache(TINY, long).total_bytes == 2 * 5000 * 2 * 2 * 16 * 4  # the one attention layer
    bf16 = decode_state(TINY, InferenceSpec(batch_size=1, prompt_len=5))  # conv in bf16, state fp32
    assert bf16 is not None and (bf16.conv_dtype, bf16.state_dtype) == ("bf16", "fp32")
    assert bf16.bytes_per_sequence == 3 * (640 * 2 + 1536 * 4)


def test_memory_counts_the_state():
    spec = InferenceSpec(batch_size=3, prompt_len=64, weight_dtype="fp32")
    mem = inference_memory(TINY, find_gpu("h100"), spec)
    st = decode_state(TINY, spec)
    assert st is not None and mem.state_bytes == st.per_gpu_bytes
    assert mem.total_bytes == mem.weights_bytes + mem.kv_cache_bytes + mem.workspace_bytes + mem.state_bytes


def test_attention_only_models_have_no_state():
    m = ModelConfig.model_validate({"n_layers": 2, "d_model": 64, "n_heads": 4, "vocab_size": 100})
    assert decode_state(m, InferenceSpec(batch_size=1, prompt_len=8)) is None
    require_attention_only(m, "anything")  # no error


def test_unmodeled_estimates_refuse_in_one_line():
    """Training memory prices hybrids (adapters included: tests/test_finetune_hybrid.py); what it does
    not model is refused by name (FP8 recipes, shape-dependent optimizers, the seed profile, CP over
    a recurrent state)."""
    with pytest.raises(TcalcError, match="FP8 recipe .delayed. is not priced for Gated DeltaNet layers, gated attention output"):
        tc.memory("qwen3-next-80b-a3b", S=1024, fp8_recipe="delayed")
    with pytest.raises(TcalcError, match="optimizer muon .* not priced for short convolution"):
        tc.memory("lfm2-1.2b", S=1024, optimizer="muon")
    with pytest.raises(TcalcError, match="activations seed .* not priced for Mamba-2 layers"):
        tc.memory("granite-4.0-h-small", S=1024, activations="seed")
    with pytest.raises(TcalcError, match="context parallelism .cp 2. is not priced for Mamba-2"):
        tc.memory("granite-4.0-h-small", S=1024, cp=2)


def test_pattern_needs_the_widths():
    with pytest.raises(ValueError, match="deltanet layers but linear_key_heads"):
        ModelConfig.model_validate({"n_layers": 2, "d_model": 64, "n_heads": 4, "vocab_size": 100,
                                    "attention_pattern": ["deltanet", "full"]})


# ---------------------------------------------------------------------------- Mamba-2
MAMBA2 = MIXERS[LayerAttention.mamba2]
# docs/formulas.md §5.7's worked example: a Bamba of two layers (Mamba-2, then attention), D = 64,
# H = 8 heads of P = 16 (mamba_expand 2), N = 16, G = 1, K = 4, chunk Q = 256, conv bias
BAMBA_HF = {"model_type": "bamba", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
            "mamba_n_heads": 8, "mamba_d_state": 16, "num_hidden_layers": 2, "attn_layer_indices": [1],
            "intermediate_size": 96, "vocab_size": 97}
BAMBA = ModelConfig.model_validate(from_hf_config(BAMBA_HF))


def test_mamba2_params_by_hand():
    """in_proj 64·(128 + 160 + 8) = 18,944, out_proj 128·64 = 8,192, conv1d 160·4 + 160 = 800,
    dt_bias, A_log, D 3·8, gated norm 128: 28,088, what transformers 5.23 builds
    (sum of BambaMixer(...).parameters() on the meta device)."""
    p = MAMBA2.params(BAMBA)
    assert (p.projections, p.conv, p.other, p.total) == (18_944 + 8_192, 800, 152, 28_088)
    assert [k.value for k in BAMBA.attention_pattern] == ["mamba2", "full"]


def test_mamba2_forward_flops_by_hand():
    """B = 1, S = 5, one chunk of Q = 256 (padded): per head 2·(256·256·(16 + 16) + 2·256·16·16 +
    (1 + 1)²·16·16) = 4,458,496, 8 heads; the conv 2·(5 + 3)·160·4 = 10,240."""
    f = MAMBA2.forward_flops(BAMBA, 1, 5)
    assert (f.conv, f.core, f.hidden) == (10_240, 8 * 4_458_496, 0)
    assert f.projections == 2 * 5 * 27_136


def test_mamba2_decode_state():
    """conv (128 + 2·16)·4 values in bf16, recurrent 8·16·16 in fp32 (transformers' cache holds them
    so: tools/crosscheck/kv_cache.py)."""
    st = decode_state(BAMBA, InferenceSpec(batch_size=1, prompt_len=5))
    assert st is not None
    assert (st.conv_bytes_per_sequence, st.recurrent_bytes_per_sequence) == (640 * 2, 2048 * 4)


def test_mamba2_tensor_parallel():
    """Heads split; with G = 1 the B/C group is replicated on every rank."""
    T = 2
    inner, g = 128 // T, 1
    conv_dim = inner + 2 * g * 16
    expected = 64 * (inner + conv_dim + 8 // T) + inner * 64 + conv_dim * 5 + 3 * (8 // T) + inner
    assert MAMBA2.shard_params(BAMBA, T) == expected
    with pytest.raises(ValueError, match=r"ssm_heads \(8\) must be divisible by T \(3\)"):
        MAMBA2.check(BAMBA, 3)


def test_granite_preset_equals_transformers():
    # tools/crosscheck/verify_presets.py: GraniteMoeHybridForCausalLM on the meta device
    m = preset_model("granite-4.0-h-small")
    assert count_params(m).total == 32_207_337_984
    assert m.n_attention_layers(LayerAttention.mamba2) == 36 and m.n_softmax_layers() == 4


def test_falcon_h1_runs_attention_beside_the_mixer():
    """modeling_falcon_h1.py: every layer has FalconH1Attention and FalconH1Mixer in parallel; the
    count adds the two (fixtures in tests/data/hf hold transformers' totals), every layer caches K/V
    and keeps a Mamba-2 state."""
    cfg = {"model_type": "falcon_h1", "num_hidden_layers": 2, "vocab_size": 500, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "mamba_n_heads": 8,
           "mamba_d_state": 16, "mamba_d_ssm": 64}
    m = ModelConfig.model_validate(from_hf_config(cfg))
    c = count_params(m)
    assert m.mixer_beside_attention and c.n_attention_layers == 2
    assert c.layers == 2 * (c.layer.total + MAMBA2.params(m).total)
    assert MAMBA2.params(m).other == 3 * 8  # no gated norm without mamba_rms_norm
    spec = InferenceSpec(batch_size=1, prompt_len=100, weight_dtype="fp32")
    assert kv_cache(m, spec).total_bytes == 2 * 100 * 2 * 2 * 16 * 4  # K and V of both layers
    st = decode_state(m, spec)
    assert st is not None and st.layers_by_kind == {"mamba2": 2}
    assert shard_params(m, 2).total(m) == tensor_parallel_params(m, 2)


def test_nemotron_h_one_block_per_layer():
    """modeling_nemotron_h.py: a layer is one block (one RMSNorm and one mixer): Mamba-2 (M),
    attention (*), an MLP (-) or a MoE (E); pattern kind none is a block without sequence mixer."""
    cfg = {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*E", "vocab_size": 500, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
           "mamba_num_heads": 8, "mamba_head_dim": 8, "n_groups": 2, "ssm_state_size": 16, "n_routed_experts": 4,
           "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48}
    m = ModelConfig.model_validate(from_hf_config(cfg))
    assert [k.value for k in m.attention_pattern] == ["mamba2", "none", "mamba2", "full", "none"]
    assert (m.n_moe_layers(), m.n_channel_free_layers()) == (1, 3)  # E is MoE, - dense, M/M/* have no MLP
    c = count_params(m)
    D, V = 64, 500
    attention = 64 * 4 * 16 + 2 * 64 * 2 * 16 + 4 * 16 * 64
    mlp = 2 * 64 * 96  # up, down (relu²)
    moe = 4 * 2 * 64 * 32 + 2 * 64 * 48 + 4 * 64  # experts, shared expert, router
    by_hand = 2 * V * D + D + 5 * D + attention + mlp + moe + 2 * MAMBA2.params(m).total
    assert c.total == by_hand  # tests/data/hf/nemotron_h_minimal.json: transformers' count
    assert shard_params(m, 2).total(m) == tensor_parallel_params(m, 2)


def test_nemotron_preset_equals_transformers():
    # tools/crosscheck/verify_presets.py: NemotronHForCausalLM on the meta device
    m = preset_model("nemotron-3-nano-30b-a3b")
    assert count_params(m).total == 31_577_937_344
    assert m.n_attention_layers(LayerAttention.mamba2) == 23 and m.n_softmax_layers() == 6 and m.n_moe_layers() == 23


def test_lfm2_short_conv_by_hand():
    """modeling_lfm2.py Lfm2ShortConv: in_proj 64·192, conv 64·3, out_proj 64·64 (no biases); its
    decode state the conv's last 3 inputs of 64 channels, nothing recurrent."""
    cfg = {"model_type": "lfm2", "num_hidden_layers": 4, "vocab_size": 500, "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 192, "full_attn_idxs": [1, 3]}
    m = ModelConfig.model_validate(from_hf_config(cfg))
    conv = MIXERS[LayerAttention.conv]
    assert [k.value for k in m.attention_pattern] == ["conv", "full"]
    assert m.d_ff == 256  # int(2/3 of 192) = 128, times block_ffn_dim_multiplier 1.0, rounded up to block_multiple_of 256
    p = conv.params(m)
    assert (p.projections, p.conv, p.other) == (4 * 64 * 64, 64 * 3, 0)
    st = decode_state(m, InferenceSpec(batch_size=1, prompt_len=9, weight_dtype="fp32"))
    assert st is not None and (st.conv_bytes_per_sequence, st.recurrent_bytes_per_sequence) == (2 * 64 * 3 * 4, 0)
    assert conv.forward_flops(m, 1, 5).conv == 2 * (5 + 2) * 64 * 3


def test_lfm2_preset_equals_transformers():
    # tools/crosscheck/verify_presets.py: Lfm2ForCausalLM on the meta device
    m = preset_model("lfm2-1.2b")
    assert count_params(m).total == 1_170_340_608 and m.d_ff == 8192


def test_jamba_mamba_by_hand():
    """modeling_jamba.py JambaMambaMixer, D = 32, d_inner = 32 (mamba_expand 1), N = 8, R = 5, K = 3,
    no conv bias: in_proj 32·64, x_proj 32·21, dt_proj 5·32 + 32, out_proj 32·32, conv 32·3, A_log
    32·8, D 32, norms 5 + 8 + 8: 4,341, what transformers builds."""
    cfg = {"model_type": "jamba", "vocab_size": 1654, "hidden_size": 32, "num_hidden_layers": 6, "num_attention_heads": 2,
           "num_key_value_heads": 2, "intermediate_size": 63, "attn_layer_period": 5, "attn_layer_offset": 1,
           "mamba_d_state": 8, "num_experts": 2, "num_experts_per_tok": 2, "expert_layer_period": 3,
           "expert_layer_offset": 2, "mamba_d_conv": 3, "mamba_expand": 1, "mamba_dt_rank": 5, "mamba_conv_bias": False}
    m = ModelConfig.model_validate(from_hf_config(cfg))
    mamba = MIXERS[LayerAttention.mamba]
    assert mamba.params(m).total == 4_341
    # attention on layer i % 5 == 1: the period is the whole 5 (its border is no period)
    assert [k.value for k in m.attention_pattern] == ["mamba", "full", "mamba", "mamba", "mamba"]
    st = decode_state(m, InferenceSpec(batch_size=1, prompt_len=4, weight_dtype="fp32"))
    assert st is not None and (st.conv_bytes_per_sequence, st.recurrent_bytes_per_sequence) == (5 * 32 * 3 * 4, 5 * 32 * 8 * 4)
    assert mamba.forward_flops(m, 2, 7).core == 2 * 2 * 7 * 32 * 8


def test_minimax_lightning_by_hand():
    """modeling_minimax.py MiniMaxLightningAttention, D = 64, A = 4 heads of 16: qkv_proj, output_gate and
    out_proj 5·64·64, norm 64; its state the running K^T·V, 4·16·16 per sequence at the activation
    dtype (MiniMaxCache.linear_cache, bf16 in a bf16 model); FLOPs of a prompt in blocks of C = 8."""
    cfg = {"model_type": "minimax", "num_hidden_layers": 4, "vocab_size": 500, "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 96, "num_local_experts": 4, "block_size": 8}
    m = ModelConfig.model_validate(from_hf_config(cfg))
    light = MIXERS[LayerAttention.lightning]
    assert [k.value for k in m.attention_pattern] == ["full", "lightning"]
    assert light.params(m).total == 5 * 64 * 64 + 64
    st = decode_state(m, InferenceSpec(batch_size=1, prompt_len=20))
    assert st is not None and (st.recurrent_bytes_per_sequence, st.state_dtype) == (2 * 4 * 16 * 16 * 2, "bf16")
    # S = 20: blocks of 8, 8 and 4; per head 2·2·(8² + 8² + 4²)·16 + 2·2·20·16²
    assert light.forward_flops(m, 1, 20).core == 4 * (4 * 144 * 16 + 4 * 20 * 256)
