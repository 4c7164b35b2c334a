"""DeepSeek-V4 (estimators/deepseek_v4.py, sources/hf_deepseek_v4.py; docs/formulas.md §5.16): exact
parameters against transformers 5.23 (the fixtures tests/data/hf/deepseek_v4_*.json, written by
tools/crosscheck/hf_params.py on the meta device), by-hand golden numbers, invariants, and the one-line
refusals of every estimate that does not price it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from transformer_calc.cli import run
from transformer_calc.errors import TcalcError
from transformer_calc.estimators import deepseek_v4 as v4
from transformer_calc.estimators.flops import count_flops
from transformer_calc.estimators.params import count_params, shard_params
from transformer_calc.model.config import ModelConfig, Workload
from transformer_calc.sources.hf import from_hf_config

HF = Path(__file__).parent / "data" / "hf"
PUBLISHED = Path(__file__).parents[1] / "tools" / "crosscheck" / "published_configs" / "deepseek-v4-flash-0731.json"
TINY = {"model_type": "deepseek_v4", "vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 5,
        "num_attention_heads": 4, "head_dim": 8, "q_lora_rank": 16, "o_groups": 2, "o_lora_rank": 8,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 12, "index_n_heads": 2,
        "index_head_dim": 4}


def model(cfg: dict) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg))


@pytest.mark.parametrize("path", sorted(HF.glob("deepseek_v4_*.json")), ids=lambda p: p.stem)
def test_params_equal_transformers(path: Path) -> None:
    body = json.loads(path.read_text())
    assert count_params(model(body["config"])).total == body["expected_params"]


def test_tiny_by_hand() -> None:
    """docs/formulas.md §5.16's worked example, part by part (D 32, A 4, h_d 8, r_q 16, g 2, d_g 8, n 4)."""
    m = model(TINY)
    assert m.deepseek_v4 is not None
    assert m.deepseek_v4.hca_layer_ids == (0, 1, 2, 4) and m.deepseek_v4.csa_layer_ids == (3,)  # 2 HCA, then alternating
    assert m.deepseek_v4.hash_moe_layer_ids == (0, 1, 2)  # default_num_hash_layers 3
    assert v4.hyper_connection_params(m) == 24 * 4 * 32 + 24 + 3  # fn (2+n)n x nD, base, scale
    assert v4.hyper_head_params(m) == 4 * 4 * 32 + 4 + 1
    assert v4.compressor_params(m, csa=True) == 2 * 32 * 16 + 4 * 16 + 8
    assert v4.compressor_params(m, csa=False) == 2 * 32 * 8 + 128 * 8 + 8
    assert v4.indexer_params(m) == 2 * 32 * 8 + 4 * 8 + 4 + 16 * 2 * 4 + 32 * 2
    p = count_params(m)
    assert p.layer.attn_o == 4 * 8 * 8 + 2 * 8 * 32  # grouped o_a_proj A·h_d·d_g + o_b_proj g·d_g x D
    assert p.total == 98891  # transformers 5.23, tests/data/hf/deepseek_v4_minimal.json
    # active: all but 2 of the 4 routed experts (3·32·12 each) in every layer
    assert p.total - p.active == 5 * 2 * 3 * 32 * 12


def test_published_flash() -> None:
    """DeepSeek-V4-Flash-0731's config.json (published_configs/SOURCES.md): transformers 5.23 builds
    284,332,230,231; the model card says 284B total, 13B active (tcalc: 13.80 B with the embedding and
    head, 12.74 B without)."""
    p = count_params(model(json.loads(PUBLISHED.read_text())))
    assert p.total == 284_332_230_231
    assert p.active == 13_799_622_231
    assert p.n_indexer_layers == 21 and p.n_hash_moe_layers == 3
    assert round(p.total / 1e9) == 284  # the card's 284B, rounded
    assert round((p.active - p.embedding - p.lm_head) / 1e9) == 13  # its 13B active, embedding and head apart


@settings(max_examples=30, deadline=None)
@given(L=st.integers(1, 12), n=st.integers(1, 6), extra=st.integers(1, 4))
def test_invariants(L: int, n: int, extra: int) -> None:
    """Parameters are linear in the layers of each kind; the hyper-connections grow as n²·D per mix."""
    base = {**TINY, "num_hidden_layers": L, "hc_mult": n, "layer_types": ["sliding_attention"] * L}
    more = {**base, "num_hidden_layers": L + extra, "layer_types": ["sliding_attention"] * (L + extra)}
    a, b = count_params(model(base)), count_params(model(more))
    m = model(base)
    per_layer = a.layer.total - a.layer.indexer + 2 * v4.hyper_connection_params(m)
    assert b.total - a.total == extra * per_layer
    # a sliding layer turned CSA adds its compressor and indexer; turned HCA its compressor
    csa = count_params(model({**base, "layer_types": ["compressed_sparse_attention"] + ["sliding_attention"] * (L - 1)}))
    hca = count_params(model({**base, "layer_types": ["heavily_compressed_attention"] + ["sliding_attention"] * (L - 1)}))
    assert csa.total - a.total == v4.compressor_params(m, csa=True) + v4.indexer_params(m)
    assert hca.total - a.total == v4.compressor_params(m, csa=False)


def test_hash_routing_has_no_parameters() -> None:
    """tid2eid is a buffer: hash-routed layers count as top-k ones."""
    assert count_params(model({**TINY, "num_hash_layers": 0})).total == count_params(model(TINY)).total


@pytest.mark.parametrize("bad, field", [
    ({"layer_types": ["sliding_attention"] * 2}, "layer_types"),
    ({"compress_ratios": [0, 4, 7, 0, 0]}, "compress_ratios"),
    ({"mlp_layer_types": ["hash", "moe", "moe", "moe", "moe"]}, "mlp_layer_types"),
    ({"compress_rates": {"compressed_sparse_attention": 0, "heavily_compressed_attention": 8}}, "compress_rates"),
])
def test_bad_config_names_the_key(bad: dict, field: str) -> None:
    with pytest.raises(TcalcError, match=field):
        from_hf_config({**TINY, **bad})


def test_odd_groups_refused() -> None:
    with pytest.raises(TcalcError, match="o_groups"):
        count_params(model({**TINY, "o_groups": 3}))


@pytest.mark.parametrize("S, extra, counted", [
    # torch FlopCounterMode of transformers 5.23's eager forward + backward, B = 2 (tools/crosscheck/flops.py)
    (8, {}, 7_559_680),  # 4 HCA layers too short for a window (m' 128: idle compressors), one CSA (T = 2)
    (9, {"compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}}, 8_714_304),
])
def test_flops_equal_flopcountermode(S: int, extra: dict, counted: int) -> None:
    assert count_flops(model({**TINY, **extra}), Workload(seq_len=S, batch_size=2)).total == counted


def test_flops_by_hand() -> None:
    """docs/formulas.md §5.16: B 2, S 8 (N 16), n 4; 4 HCA layers (T 0), one CSA (T 2)."""
    f = v4.forward_flops(model(TINY), 2, 8)
    assert f.hyper_connections == 5 * 2 * 2 * 16 * (4 * 32 * 6 * 4 + 4 * 4 * 32) + 2 * 16 * 4 * 32 * 4
    assert f.attention_cores == 4 * 2 * 2 * 2 * 4 * 8 * 8 * 8 + 2 * 2 * 2 * 4 * 8 * (8 + 2) * 8
    assert f.indexer == 2 * 16 * (2 * 32 * 2 * 4 + 16 * 2 * 4 + 32 * 2) + 2 * 2 * 8 * 2 * 2 * 4
    assert (f.compressors, f.idle_compressors) == (2 * 2 * 16 * 32 * 16, 4 * 2 * 2 * 16 * 32 * 8)
    step = count_flops(model(TINY), Workload(seq_len=8, batch_size=2))
    assert step.backward == 2 * (step.forward - f.indexer - f.idle_compressors)  # no gradient reaches those


def test_causal_flops_refused() -> None:
    with pytest.raises(TcalcError, match="DeepSeek-V4"):
        count_flops(model(TINY), Workload(seq_len=8, batch_size=1), causal=True)


def test_other_estimates_refuse_by_name() -> None:
    with pytest.raises(TcalcError, match="DeepSeek-V4"):
        shard_params(model(TINY), 2)


@pytest.mark.parametrize("args", [
    ["memory", "--S", "64", "--gpu", "h100"], ["inference", "--gpu", "h100", "--T", "2"], ["params", "--T", "2"],
])
def test_cli_refusals_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    assert run([args[0], "--hf-config", str(path), *args[1:]]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "DeepSeek-V4" in out.err and len(out.err.strip().splitlines()) == 1


def test_cli_params_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    assert run(["params", "--hf-config", str(path), "--format", "json"]) == 0
    p = json.loads(capsys.readouterr().out)["params"]
    assert (p["total"], p["hyper_connections"], p["compressors"], p["layers_indexer"], p["n_hash_moe_layers"]) == (
        98891, 31507, 7272, 740, 3)


CACHE_CFG = {**TINY, "num_hidden_layers": 4, "sliding_window": 6,
             "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                             "compressed_sparse_attention"],
             "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}}


def test_cache_by_hand() -> None:
    """tools/crosscheck/kv_cache_deepseek_v4.py's first case at 19 tokens (transformers 5.23's cache: 1,680
    elements for 2 sequences): h_d 8, d_I 4, W 6, m 4, m' 8; layers sliding, CSA, HCA, CSA."""
    c = v4.cache_elements(model(CACHE_CFG), 19)
    assert c.window == 5 * 8 * (2 + 1 + 1 + 1)  # W - 1 tokens; the sliding-only layer keeps K and V apart
    assert c.compressed == 2 * (19 // 4) * (8 + 4) + (19 // 8) * 8
    assert c.buffers == 2 * (2 * (19 % 4) * 2 * (8 + 4) + (19 % 8) * 8)  # kv and gate of the open window
    assert c.overlap == 2 * 2 * 4 * (8 + 4)  # the CSA layers' last Ca slice, kv and gate
    assert 2 * c.total == 1680
    assert v4.cache_elements(model(CACHE_CFG), 3).overlap == 0  # no window closed yet


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 10_000))
def test_cache_compressed_part_grows_as_one_entry_per_window(c: int) -> None:
    """Past the window, only the compressed entries grow: by one per m (CSA) or m' (HCA) tokens; the buffers
    stay below one window."""
    m = model(CACHE_CFG)
    a, b = v4.cache_elements(m, c + 5), v4.cache_elements(m, c + 5 + 8)
    assert b.compressed - a.compressed == 2 * 2 * (8 + 4) + 1 * 8
    assert a.buffers < 2 * (2 * 4 * 2 * 12 + 8 * 8)
