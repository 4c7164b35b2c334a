"""Exact parameter count: hand-checked tiny models and invariants.

The published models' counts (gpt2 124,439,808, llama-2-7b 6,738,415,616, ...) are in
tests/test_presets_params.py; Hugging Face config imports in tests/test_hf.py.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.params import (
    count_params,
    seed_block_approx,
    seed_total_approx,
    tensor_parallel_params,
)

from conftest import model_configs

# A model small enough to count by hand: L=2, D=8, A=2 (head_dim 4), d_ff=32, V=10, K=6.
TINY = {"L": 2, "D": 8, "A": 2, "V": 10, "K": 6}


def test_tiny_gpt_style_by_hand():
    p = count_params(ModelConfig.model_validate(TINY))
    assert p.embedding == 10 * 8
    assert p.position == 6 * 8
    assert p.layer.attn_q == p.layer.attn_k == p.layer.attn_v == p.layer.attn_o == 64
    assert p.layer.attn_bias == 3 * 8 + 8
    assert p.layer.mlp_weights == 2 * 8 * 32
    assert p.layer.mlp_bias == 32 + 8
    assert p.layer.norms == 2 * (8 + 8)
    assert p.final_norm == 16
    assert p.lm_head == 0  # tied
    # 80 + 48 + 2 * (256 + 32 + 512 + 40 + 32) + 16
    assert p.total == 80 + 48 + 2 * 872 + 16 == 1888


def test_tiny_llama_style_by_hand():
    spec = {**TINY, "n_kv_heads": 1, "d_ff": 12, "mlp": "swiglu", "norm": "rmsnorm", "bias": False,
            "tied_embeddings": False, "positional": "rotary"}
    p = count_params(ModelConfig.model_validate(spec))
    # q 8x8, k and v 8x4 (one kv head of width 4), o 8x8, gate/up/down 3x8x12, 2 RMSNorm scales
    per_layer = 64 + 32 + 32 + 64 + 3 * 8 * 12 + 2 * 8
    assert p.layer.total == per_layer == 496
    assert p.total == 10 * 8 + 2 * per_layer + 8 + 10 * 8 == 1160


def test_tiny_moe_by_hand():
    spec = {**TINY, "n_experts": 4, "experts_per_token": 2, "mlp": "swiglu", "bias": False, "d_ff": 12}
    p = count_params(ModelConfig.model_validate(spec))
    assert p.layer.mlp_weights == 4 * 3 * 8 * 12
    assert p.layer.router == 8 * 4
    assert p.total - p.active == 2 * (2 * 3 * 8 * 12)  # two idle experts per layer


def test_qk_norm_embedding_norm_and_projection():
    spec = {**TINY, "qk_norm": True, "embedding_norm": True, "d_embed": 4, "lm_head_bias": True}
    p = count_params(ModelConfig.model_validate(spec))
    assert p.layer.qk_norm == 2 * (4 + 4)  # LayerNorm(head_dim) on q and on k
    assert p.embedding_norm == 16
    assert p.embedding == 10 * 4 and p.embedding_projection == 2 * 4 * 8
    assert p.lm_head_bias == 10


def test_seed_approximations_exact_for_the_idealized_model():
    """Seed eq. approx_params: (4+2E)LD^2 is exact with no biases, norms or embeddings."""
    spec = {**TINY, "bias": False, "norms_per_layer": 0, "final_norm": False}
    m = ModelConfig.model_validate(spec)
    assert seed_block_approx(m) == count_params(m).layers
    assert seed_total_approx(m) == 12 * 64 * 2 + 80


@given(model_configs(), st.integers(1, 5))
def test_linear_in_layers(m, k):
    deeper = m.with_overrides({"n_layers": m.n_layers * k})
    base, big = count_params(m), count_params(deeper)
    assert big.total - big.layers == base.total - base.layers
    assert big.layers == k * base.layers


@given(model_configs())
def test_gqa_with_all_heads_equals_mha(m):
    full = m.with_overrides({"n_kv_heads": m.n_heads})
    mha = ModelConfig.model_validate({**full.given, "n_kv_heads": None})
    assert count_params(full) == count_params(mha)


@given(model_configs())
def test_breakdown_sums_to_total_and_ints(m):
    p = count_params(m)
    d = p.as_dict()
    assert all(type(v) is int for v in d.values())
    assert p.active <= p.total
    assert (p.active == p.total) == (m.n_experts == m.experts_per_token)


@given(model_configs())
def test_tensor_parallel_one_rank_is_everything(m):
    assert tensor_parallel_params(m, 1) == count_params(m).total


@given(model_configs(), st.sampled_from([2, 4, 8]))
def test_tensor_parallel_shards_sum_back(m, T):
    """T ranks x per-rank == total + (T-1) copies of what is replicated (Megatron layout)."""
    assume(m.n_heads % T == 0 and m.d_ff % T == 0 and m.vocab_size % T == 0)
    assume(m.n_kv_heads % T == 0 or T % m.n_kv_heads == 0)
    p = count_params(m)
    kv_copies = max(T // m.n_kv_heads, 1)  # K/V heads replicated when n_kv_heads < T
    kv_extra = (kv_copies - 1) * (
        p.layer.attn_k + p.layer.attn_v + (2 * m.n_kv_heads * m.head_dim if m.qkv_bias else 0)
    )
    replicated_layer = (
        (m.d_model if m.attn_out_bias else 0)  # row-parallel biases
        + (m.n_experts * m.d_model if m.mlp_bias else 0)
        + p.layer.qk_norm
        + p.layer.router
        + p.layer.norms
    )
    replicated = (
        p.position + p.embedding_projection + p.embedding_norm + p.final_norm + m.n_layers * replicated_layer
    )
    assert T * tensor_parallel_params(m, T) == p.total + (T - 1) * replicated + m.n_layers * kv_extra


@pytest.mark.parametrize(
    ("overrides", "T", "message"),
    [
        ({"A": 12, "D": 768}, 5, r"n_heads \(12\) must be divisible by T \(5\)"),
        ({"A": 4, "D": 768, "d_ff": 1001}, 4, r"d_ff \(1001\) must be divisible by T \(4\)"),
        ({"A": 12, "D": 768, "n_kv_heads": 4}, 6, r"n_kv_heads \(4\) and T \(6\)"),
        ({}, 0, r"T \(0\) must be >= 1"),
    ],
)
def test_tensor_parallel_rejects_impossible_splits(overrides, T, message):
    m = ModelConfig.model_validate({**TINY, **overrides})
    with pytest.raises(ValueError, match=message):
        tensor_parallel_params(m, T)
