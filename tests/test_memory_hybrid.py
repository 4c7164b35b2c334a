"""Training memory of hybrid models (estimators/mixers/*.activation_bytes, training/memory.py's
mixer_activations and BlockParts): the mixers' stored activations against measured bytes, the
closed-form sums over the layer pattern against a loop over the layers, and the CLI."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

import transformer_calc as tc
from transformer_calc.cli import run
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.training.memory import block_parts, training_memory
from transformer_calc.model.config import LayerAttention, ModelConfig, Parallelism, Training, Workload
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import preset_model

# The cases of tools/crosscheck/activations_mixers.py (its CASES, first mixer layer): bytes autograd saved
# while the mixer module ran (its input excluded), measured with torch.autograd.graph.saved_tensors_hooks on
# transformers 5.23 / torch 2.13 (CPU, the torch fallbacks), per storage once (docs/validation.md, generated).
_GDN = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 12,
        "linear_conv_kernel_dim": 4}
_QWEN = {"vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
         "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"], **_GDN}
_MAMBA2 = {"vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
           "intermediate_size": 40, "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 8,
           "mamba_expand": 2, "mamba_d_conv": 4, "mamba_chunk_size": 16}
MEASURED = [  # (label, config, S, B, {p: measured bytes})
    ("qwen3_next", {"model_type": "qwen3_next", **_QWEN, "num_experts": 0, "intermediate_size": 32}, 100, 1,
     {4: 1_058_176, 2: 996_096}),
    ("qwen3_next one chunk", {"model_type": "qwen3_next", **_QWEN, "num_experts": 0, "intermediate_size": 32}, 40, 2,
     {4: 999_872, 2: 949_632}),
    ("qwen3_5_text", {"model_type": "qwen3_5_text", **_QWEN, "intermediate_size": 32}, 70, 1, {4: 993_856, 2: 950_256}),
    ("bamba", {"model_type": "bamba", **_MAMBA2, "num_hidden_layers": 2, "attn_layer_indices": [1]}, 40, 1,
     {4: 247_040, 2: 225_664}),
    ("bamba P != Q, G = 1", {"model_type": "bamba", **_MAMBA2, "hidden_size": 12, "mamba_d_head": 6, "mamba_n_groups": 1,
                             "mamba_d_state": 5, "mamba_d_conv": 3, "mamba_chunk_size": 7, "num_hidden_layers": 1,
                             "attn_layer_indices": []}, 20, 2, {4: 98_594, 2: 90_962}),
    ("nemotron_h", {"model_type": "nemotron_h", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 40, "mamba_num_heads": 4,
                    "mamba_head_dim": 8, "ssm_state_size": 8, "n_groups": 2, "chunk_size": 16,
                    "hybrid_override_pattern": "M*-", "num_hidden_layers": 3}, 40, 2, {4: 335_040, 2: 302_912}),
    ("falcon_h1", {"model_type": "falcon_h1", **_MAMBA2, "mamba_d_ssm": 64, "num_hidden_layers": 1, "head_dim": 16},
     40, 1, {4: 232_016, 2: 192_392}),
    ("jamba (bf16; fp32 +2.8 %)", {"model_type": "jamba", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
               "num_key_value_heads": 1, "intermediate_size": 40, "num_experts": 1, "num_experts_per_tok": 1,
               "num_hidden_layers": 2, "attn_layer_period": 2, "attn_layer_offset": 1, "mamba_d_state": 8,
               "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 3}, 24, 2, {2: 435_648}),
    ("lfm2", {"model_type": "lfm2", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
              "num_key_value_heads": 1, "intermediate_size": 40, "num_hidden_layers": 2,
              "layer_types": ["conv", "full_attention"], "conv_L_cache": 3}, 40, 2, {4: 61_952, 2: 30_976}),
    ("minimax", {"model_type": "minimax", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
                 "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 40, "num_local_experts": 2,
                 "num_experts_per_tok": 1, "block_size": 16, "num_hidden_layers": 2,
                 "layer_types": ["linear_attention", "full_attention"]}, 40, 1, {4: 77_744, 2: 41_512}),
    ("minimax S < C", {"model_type": "minimax", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 40, "num_local_experts": 1,
                       "num_experts_per_tok": 1, "block_size": 32, "num_hidden_layers": 1,
                       "layer_types": ["linear_attention"]}, 20, 2, {4: 98_976, 2: 52_128}),
    ("kimi_linear (bf16; fp32 +32 B)", {"model_type": "kimi_linear", "pad_token_id": None, "vocab_size": 100,
                     "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 40,
                     "moe_intermediate_size": 8, "num_local_experts": 2, "num_experts_per_tok": 1,
                     "first_k_dense_replace": 1, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8,
                     "v_head_dim": 8, "linear_num_heads": 2, "linear_head_dim": 8, "linear_conv_kernel_dim": 4,
                     "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"]}, 100, 1,
     {2: 3_306_496}),
]  # fmt: skip


def _model(cfg: dict) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg))


@pytest.mark.parametrize("label, cfg, S, B, measured", MEASURED, ids=[c[0] for c in MEASURED])
def test_torch_eager_equals_the_measured_bytes(label, cfg, S, B, measured):
    m = _model(cfg)
    (kind,) = m.mixer_kinds
    for p, got in measured.items():
        assert MIXERS[kind].activation_bytes(m, B, S, p, 1, fused=False) == got, (label, p)


MODELS = {label: (_model(cfg), S) for label, cfg, S, _, _ in MEASURED}


@settings(max_examples=60, deadline=None)
@given(label=st.sampled_from(sorted(MODELS)), B=st.integers(2, 6), S=st.integers(1, 300), p=st.sampled_from([2, 4]))
def test_affine_in_the_batch(label, B, S, p):
    """Past B = 2 (where matmul's batch folding starts copying) one more sequence adds the same bytes,
    in both conventions (their constants: masks, decay buffers, exp(A_log))."""
    m, _ = MODELS[label]
    (kind,) = m.mixer_kinds
    mixer = MIXERS[kind]
    f = [mixer.activation_bytes(m, b, S, p, 1, fused=False) for b in (B, B + 1, B + 2)]
    assert f[1] - f[0] == f[2] - f[1] > 0
    g = [mixer.activation_bytes(m, b, S, p, 1, fused=True) for b in (B, B + 1, B + 2)]
    assert g[1] - g[0] == g[2] - g[1] > 0


@settings(max_examples=40, deadline=None)
@given(label=st.sampled_from(sorted(MODELS)), S=st.integers(1, 300), T=st.sampled_from([2, 4]))
def test_tensor_parallel_ranks_keep_less(label, S, T):
    m, _ = MODELS[label]
    (kind,) = m.mixer_kinds
    mixer = MIXERS[kind]
    try:
        mixer.check(m, T)
    except ValueError:
        return
    for fused in (False, True):
        assert mixer.activation_bytes(m, 1, S, 2, T, fused) < mixer.activation_bytes(m, 1, S, 2, 1, fused)
    if kind is LayerAttention.conv:  # every term is per channel
        assert T * MIXERS[kind].activation_bytes(m, 1, S, 2, T, True) == MIXERS[kind].activation_bytes(m, 1, S, 2, 1, True)


def test_fused_kernels_keep_less_than_the_torch_fallbacks():
    """Qwen3-Next's Gated DeltaNet at S = 4096: the torch fallback's fp32 chunk matrices vs fla's inputs."""
    m = preset_model("qwen3-next-80b-a3b")
    gdn = MIXERS[LayerAttention.deltanet]
    eager, fused = gdn.activation_bytes(m, 1, 4096, 2, 1, False), gdn.activation_bytes(m, 1, 4096, 2, 1, True)
    assert fused < eager / 5


PRESETS = ["qwen3-next-80b-a3b", "qwen3.6-27b", "granite-4.0-h-small", "nemotron-3-nano-30b-a3b", "lfm2-1.2b",
           "kimi-linear-48b-a3b"]


def _layer_loop(m: ModelConfig, parts, start: int, stop: int) -> tuple[int, int, int]:
    """The stage's sums by a loop over its layers (what BlockParts.chunk computes in closed form)."""
    attn = mlp = 0
    for i in range(start, stop):
        kind = m.attention_pattern[i % len(m.attention_pattern)]
        attn += parts.sequence[kind]
        moe = m.n_moe_layers(i, i + 1) == 1
        has_mlp = not m.one_mixer_per_layer or kind is LayerAttention.none
        mlp += (parts.moe_mlp if moe else parts.dense_mlp) if has_mlp else 0
    return attn, mlp, (stop - start) * parts.norm


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("profile", ["default", "torch-eager"])
def test_stage_sums_equal_a_loop_over_the_layers(name, profile):
    m = preset_model(name)
    w, tr = Workload(seq_len=2048, batch_size=1), Training(activations=profile)
    for P in (1, 4):
        par = Parallelism(pipeline=P)
        parts = block_parts(m, w, tr, par)
        for st_ in training_memory(m, w, tr, par):
            from transformer_calc.estimators.training.memory import pipeline_stage

            (chunk,) = pipeline_stage(m.n_layers, par, st_.stage).chunks
            attn, mlp, norm = _layer_loop(m, parts, chunk.start, chunk.stop)
            assert (st_.attention, st_.mlp, st_.norm) == (st_.in_flight * attn, st_.in_flight * mlp, st_.in_flight * norm)


def test_a_mixer_layer_is_its_input_plus_what_the_mixer_keeps():
    m = preset_model("lfm2-1.2b")
    w, tr = Workload(seq_len=1024, batch_size=2), Training()
    parts = block_parts(m, w, tr, Parallelism())
    conv = MIXERS[LayerAttention.conv].activation_bytes(m, 2, 1024, 2, 1, True)
    assert parts.sequence[LayerAttention.conv] == 2 * 2 * 1024 * m.d_model + conv
    full = block_parts(m, w, Training(recompute="full"), Parallelism())
    assert full.sequence[LayerAttention.conv] == 0  # only the block input, counted with the norms


def test_memory_json_prices_a_hybrid(capsys):
    code = run(["memory", "--preset", "qwen3-next-80b-a3b", "--S", "4096", "--T", "8", "--activations", "torch-eager",
                "-f", "json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    api = tc.memory("qwen3-next-80b-a3b", S=4096, T=8, activations="torch-eager")
    assert out == api.model_dump(mode="json")
    default = tc.memory("qwen3-next-80b-a3b", S=4096, T=8)
    stored = [max(ph.activations_bytes for ph in r.memory.phases) for r in (api, default)]
    assert stored[0] > stored[1] > 0


def test_train_and_plan_price_hybrids():
    r = tc.train("granite-4.0-h-small", gpus=16, gpu="h100", T=4, P=2, S=4096, global_batch=64)
    assert r.step_time_s > 0
    plans = tc.plan("lfm2-1.2b", gpus=8, gpu="h100", S=32768, global_batch=64)
    assert plans.model_dump(mode="json")  # CP layouts are rejected by name, the others priced


def test_mamba_loop_backward_transient_sets_the_backward_phase():
    """Jamba's torch loop: four fp32 (B, d_inner, S, N) buffers in backward (two accumulated gradients, two
    select_backward buffers); measured 17,277,952 bytes of MemTracker TEMP at B = 2, d_inner = 256, S = 128,
    N = 16 (4,194,304 each; docs/validation.md). The fused kernels' backward adds none here."""
    cfg = {"model_type": "jamba", "vocab_size": 1000, "hidden_size": 128, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 256, "num_experts": 1, "num_experts_per_tok": 1,
           "num_hidden_layers": 4, "attn_layer_period": 4, "attn_layer_offset": 3, "mamba_d_state": 16}
    m = _model(cfg)
    mamba = MIXERS[LayerAttention.mamba]
    assert mamba.backward_transient_bytes(m, 2, 128, 2, 1, fused=False) == 4 * 4 * 2 * 256 * 128 * 16
    assert mamba.backward_transient_bytes(m, 2, 128, 2, 2, fused=False) == 4 * 4 * 2 * 128 * 128 * 16
    assert mamba.backward_transient_bytes(m, 2, 128, 2, 1, fused=True) == 0
    w = Workload(seq_len=128, batch_size=2)
    from transformer_calc.estimators.training.timeline import peak_memory

    tl = peak_memory(m, w, Training(precision="bf16", activations="torch-eager"))
    backward = next(ph for ph in tl.phases if ph.name == "backward")
    assert backward.transient >= 4 * 4 * 2 * 256 * 128 * 16
    for other, S in MODELS.values():  # the other kinds but KDA allocate nothing beyond the layer's own
        (kind,) = other.mixer_kinds
        if kind not in (LayerAttention.mamba, LayerAttention.kda):
            assert MIXERS[kind].backward_transient_bytes(other, 1, S, 2, 1, False) == 0


def test_kda_decay_product_backward_transient():
    """Three fp32 (B, H, S_p, C, d) buffers (the broadcast decay product's gradients): at B = 2, H = 4, d = 32,
    S = 256 (S_p = 256, C = 64) 12,582,912 bytes each; MemTracker measured 56,655,872 bytes of TEMP in that
    model's step (docs/validation.md), 3.4 of them."""
    m = MODELS["kimi_linear (bf16; fp32 +32 B)"][0]  # H = 2, d = 8
    kda = MIXERS[LayerAttention.kda]
    assert kda.backward_transient_bytes(m, 2, 100, 2, 1, fused=False) == 3 * 4 * 2 * 2 * 128 * 64 * 8
    assert kda.backward_transient_bytes(m, 2, 100, 2, 2, fused=False) == 3 * 4 * 2 * 1 * 128 * 64 * 8
    assert kda.backward_transient_bytes(m, 2, 100, 2, 1, fused=True) == 0


@pytest.mark.parametrize("preset", ["gemma-4-31b", "gemma-4-26b-a4b"])
def test_training_refuses_the_parts_it_does_not_price(preset):
    """Hybrid mixers and Gemma 4's varied layers (tests/test_gemma4_training.py) are priced for training, but
    not yet Gemma 4 under tensor parallelism (nor Zamba2's shared blocks, MiMo's per-kind attention,
    LatentMoE: tests/test_shared_block.py): one line, never a number."""
    import transformer_calc as tc
    from transformer_calc.errors import TcalcError

    with pytest.raises(TcalcError, match="at T 2 is not priced for .*Gemma 4"):
        tc.memory(preset, S=1024, T=2)
    with pytest.raises(TcalcError, match="at T 2 is not priced for .*Gemma 4"):
        tc.train(preset, gpus=8, gpu="h100", S=1024, global_batch=8, T=2)
