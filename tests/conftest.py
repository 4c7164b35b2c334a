"""Shared test helpers: a hypothesis strategy that builds valid model configs by construction."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig

REPO = Path(__file__).resolve().parents[1]


@st.composite
def model_configs(draw: st.DrawFn, max_layers: int = 8) -> ModelConfig:
    """Valid ModelConfigs: cross-field constraints hold by construction (st.builds cannot)."""
    n_kv = draw(st.sampled_from([1, 2, 4, 8]))
    group = draw(st.sampled_from([1, 2, 3, 4]))
    A = n_kv * group
    head_dim = draw(st.sampled_from([8, 16, 32, 64, 128]))
    explicit_head_dim = draw(st.booleans())
    D = A * head_dim if not explicit_head_dim else draw(st.integers(8, 512))
    mlp = draw(st.sampled_from(["gelu", "relu", "swiglu", "geglu"]))
    n_experts = draw(st.sampled_from([1, 1, 2, 4, 8]))
    spec = {
        "n_layers": draw(st.integers(1, max_layers)),
        "d_model": D,
        "n_heads": A,
        "n_kv_heads": n_kv,
        "d_ff": draw(st.integers(1, 64)) * 8,
        "mlp": mlp,
        "vocab_size": draw(st.integers(2, 70_000)),
        "max_seq_len": draw(st.integers(1, 8192)),
        "positional": draw(st.sampled_from(["learned", "rotary", "alibi", "sinusoidal", "none"])),
        "norm": draw(st.sampled_from(["layernorm", "rmsnorm"])),
        "bias": draw(st.booleans()),
        "tied_embeddings": draw(st.booleans()),
        "parallel_attn": draw(st.booleans()),
        "n_experts": n_experts,
        "experts_per_token": draw(st.integers(1, n_experts)),
        "qk_norm": draw(st.booleans()),
        "lm_head_bias": draw(st.booleans()),
    }
    if explicit_head_dim:
        spec["head_dim"] = head_dim
    return ModelConfig.model_validate(spec)


@st.composite
def modern_model_configs(draw: st.DrawFn, max_layers: int = 12) -> ModelConfig:
    """Configs with the 2024-2026 features: MLA or GQA, sliding/chunked layer patterns, fine-grained
    MoE with shared experts and dense layers."""
    base = draw(model_configs(max_layers=max_layers)).given
    spec = dict(base)
    A = spec["n_heads"]
    if draw(st.booleans()):  # multi-head latent attention
        spec.pop("n_kv_heads", None)
        spec.pop("head_dim", None)
        spec.update(
            kv_lora_rank=draw(st.integers(1, 64)),
            qk_rope_head_dim=draw(st.integers(1, 16)),
            qk_nope_head_dim=draw(st.integers(1, 32)),
            v_head_dim=draw(st.integers(1, 32)),
            q_lora_rank=draw(st.one_of(st.none(), st.integers(1, 64))),
        )
    kinds = draw(st.lists(st.sampled_from(["full", "sliding", "chunked"]), min_size=1, max_size=6))
    spec["attention_pattern"] = kinds
    if "sliding" in kinds:
        spec["sliding_window"] = draw(st.integers(1, 64))
    if "chunked" in kinds:
        spec["attention_chunk_size"] = draw(st.integers(1, 64))
    if spec.get("n_experts", 1) > 1:
        spec.update(
            moe_d_ff=draw(st.integers(1, 16)) * 8,
            shared_expert_d_ff=draw(st.sampled_from([0, 8, 16, 64])),
            shared_expert_gate=draw(st.booleans()),
            first_dense_layers=draw(st.integers(0, 3)),
            moe_layer_step=draw(st.integers(1, 3)),
            dense_layer_ids=draw(st.lists(st.integers(0, max_layers), max_size=3)),
        )
    del A
    return ModelConfig.model_validate(spec)
