"""Zamba2's shared transformer blocks (estimators/shared_block.py): parameters, FLOPs, KV cache.

Goldens by hand from modeling_zamba2.py (docs/formulas.md §5.12); the totals beside them are what
transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py; the fixtures in
tests/data/hf/zamba2_*.json are checked by tests/test_hf.py), the FLOPs what FlopCounterMode counts
(tools/crosscheck/flops_mixers.py) and the cache what transformers' cache holds
(tools/crosscheck/kv_cache.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import count_flops
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode_state, kv_cache, matmul_params
from transformer_calc.estimators.params import count_params, shard_params
from transformer_calc.estimators.shared_block import shared_block_flops, shared_block_params
from transformer_calc.model.config import ModelConfig, Workload
from transformer_calc.sources.hf import from_hf_config

# D = 32, A = n_kv = 4 (h_d = 2D/A = 16), F = 64 gated (gelu: geglu), r = 4; Mamba-2 H = 4, N = 8;
# the shared block at layers 1, 2 and 4 of 5, num_mem_blocks = 2 (applications 0 and 2 use block 0)
SMALL = {"model_type": "zamba2", "vocab_size": 97, "hidden_size": 32, "num_hidden_layers": 5,
         "num_attention_heads": 4, "n_mamba_heads": 4, "mamba_d_state": 8, "intermediate_size": 64,
         "adapter_rank": 4, "num_mem_blocks": 2, "layers_block_type": ["mamba", "hybrid", "hybrid", "mamba", "hybrid"]}


def _model(**over: object) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config({**SMALL, **over}))


def test_small_params_by_hand():
    z = _model()
    p = shared_block_params(z)
    block = 64 * (4 + 2 * 4) * 16 + 64 * 32 + (32 * 128 + 64 * 32) + (64 + 32)  # q,k,v from 2D; o; gate_up, down; norms
    assert block == 20576
    assert p.blocks == 2 * block  # two distinct blocks (tied)
    assert p.adapters == 3 * (32 * 4 + 4 * 128)  # one gate_up adapter per application
    assert p.linears == 3 * 32 * 32
    assert count_params(z).total == 85740  # transformers 5.23, Zamba2ForCausalLM on the meta device
    assert count_params(z).shared_blocks == p.total == 46144


def test_untied_blocks_are_one_per_application():
    """tie_word_embeddings false: transformers 5.23 ties nothing (get_expanded_tied_weights_keys), so
    every application builds its block, and its adapters for its whole residue class mod num_mem_blocks."""
    z = _model(tie_word_embeddings=False)
    p = shared_block_params(z)
    assert p.blocks == 3 * 20576
    assert p.adapters == (2 * 2 + 1 * 1) * 640  # classes {0, 2} and {1}: 2² + 1² adapter sets
    assert count_params(z).total == 110700  # transformers 5.23 on the meta device


def test_attention_adapters():
    z = _model(use_shared_attention_adapter=True)
    assert shared_block_params(z).adapters == 3 * (640 + 3 * (64 * 4 + 4 * 64))


def test_small_flops_by_hand():
    z = _model()
    f = shared_block_flops(z, 1, 10, (100, 1))
    per_token = 14336 + 6144 + 640 + 1024  # attention, MLP, adapter, linear weights
    assert f.projections == 3 * 2 * 10 * per_token == 1328640
    assert f.core == 3 * 2 * 2 * 4 * 16 * 100 == 76800  # scores and re-weighting, S² per head
    step = count_flops(z, Workload(seq_len=10, batch_size=1))
    assert step.shared_blocks == f.total
    assert step.as_dict()["shared_blocks"] == f.total


def test_kv_cache_per_application():
    z = _model()
    spec = InferenceSpec(batch_size=1, prompt_len=10)
    assert kv_cache(z, spec, context_len=10).bytes_per_token == 3 * 2 * 4 * 16 * 2  # 3 applications, K and V, bf16
    st_ = decode_state(z, spec)
    assert st_ is not None and st_.layers_by_kind == {"mamba2": 5}


def test_matmul_params_count_every_application():
    z = _model()
    without = _model(layers_block_type=["mamba"] * 5)
    assert matmul_params(z) - matmul_params(without) == 3 * (14336 + 6144 + 640 + 1024)


def test_decode_reads_a_block_per_application():
    """3 applications of 2 stored blocks: one block (20,576 parameters) is streamed again per step."""
    from transformer_calc.estimators.inference.roofline import rank_shard
    from transformer_calc.estimators.shared_block import shared_block_rereads

    z = _model()
    assert shared_block_rereads(z) == 20576
    assert rank_shard(z, InferenceSpec(batch_size=1, prompt_len=4)).reread_params == 20576
    assert shared_block_rereads(_model(tie_word_embeddings=False)) == 0  # untied: every application stores its own


def test_tensor_parallel_and_training_refused():
    z = _model()
    with pytest.raises(ValueError, match="shared transformer blocks"):
        shard_params(z, 2)
    assert shard_params(z, 1).total(z) == count_params(z).total


def test_no_hybrid_layer_no_keys():
    z = _model(layers_block_type=["mamba"] * 5)
    assert z.shared_block_layer_ids == () and z.shared_block_adapter_rank is None
    assert "shared_blocks" not in count_params(z).as_dict()


@pytest.mark.parametrize("bad, field", [
    ({"shared_block_layer_ids": [3, 1]}, "increasing"),
    ({"shared_block_layer_ids": [9]}, "layer index"),
    ({"shared_block_adapter_rank": 4}, "needs shared blocks"),
])
def test_config_checks(bad, field):
    from transformer_calc.model.config import build_model

    spec = {"n_layers": 4, "d_model": 64, "n_heads": 4, "vocab_size": 100, **bad}
    with pytest.raises(TcalcError, match=field):
        build_model(spec)


@pytest.mark.parametrize("over, key", [
    ({"layer_types": ["mamba", "hybrid", "hybrid", "mamba", "hybrid"]}, "layer_types"),
    ({"num_hidden_layers": 4}, "num_hidden_layers"),
    ({"hybrid_layer_ids": [0]}, "hybrid_layer_ids"),
    ({"n_mamba_heads": 3}, "n_mamba_heads"),
])
def test_reader_refusals(over, key):
    with pytest.raises(TcalcError, match=key):
        from_hf_config({**SMALL, **over})


@settings(max_examples=40, deadline=None)
@given(n_app=st.integers(0, 9), blocks=st.integers(1, 4), L_extra=st.integers(0, 3), S=st.integers(1, 64),
       B=st.integers(1, 3))
def test_invariants(n_app, blocks, L_extra, S, B):
    """FLOPs and the cache are linear in the applications; tied parameters stop growing in blocks past
    the applications; the forward is linear in B."""
    L = n_app + L_extra + 1
    types = ["hybrid"] * n_app + ["mamba"] * (L - n_app)
    z = _model(num_hidden_layers=L, layers_block_type=types, num_mem_blocks=blocks)
    one = _model(num_hidden_layers=L, layers_block_type=["hybrid"] + ["mamba"] * (L - 1), num_mem_blocks=blocks)
    f, f1 = shared_block_flops(z, B, S, (S * S, 1)), shared_block_flops(one, B, S, (S * S, 1))
    assert f.total == n_app * f1.total
    assert shared_block_flops(z, 1, S, (S * S, 1)).total * B == f.total
    p = shared_block_params(z)
    assert p.linears == n_app * 32 * 32 and p.blocks == min(blocks, n_app) * 20576
    many = _model(num_hidden_layers=L, layers_block_type=types, num_mem_blocks=n_app + blocks)
    assert shared_block_params(many).blocks == n_app * 20576 and shared_block_params(many).adapters == p.adapters


def test_cli_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(SMALL))
    out = subprocess.run([sys.executable, "-m", "transformer_calc", "params", str(path), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, check=True)
    p = json.loads(out.stdout)["params"]
    assert p["total"] == 85740 and p["shared_blocks"] == 46144
    out = subprocess.run([sys.executable, "-m", "transformer_calc", "memory", str(path), "--S", "64"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2 and "shared transformer blocks (Zamba2)" in out.stderr and not out.stdout
