"""Shared test helpers: a hypothesis strategy that builds valid model configs by construction."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from transformer_calc.config import ModelConfig

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
