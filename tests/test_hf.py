"""hf: Hugging Face config.json -> ModelConfig, exact against transformers' parameter counts.

The fixtures in tests/data/hf are written by tools/crosscheck/hf_params.py from what transformers
5.23 builds (`sum(p.numel() for p in model.parameters())` on the meta device); this file needs
neither torch nor transformers.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from transformer_calc.model.config import ModelConfig
from transformer_calc.errors import TcalcError
from transformer_calc.sources.hf import SUPPORTED_MODEL_TYPES, from_hf_config
from transformer_calc.estimators.params import total_params

HF_DATA = Path(__file__).resolve().parent / "data" / "hf"
FIXTURES = sorted(HF_DATA.glob("*.json"))


def total(cfg: dict) -> int:
    """Every parameter transformers builds for the config (a multimodal wrapper's towers included)."""
    return total_params(ModelConfig.model_validate(from_hf_config(cfg)))


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_matches_transformers(path: Path):
    fixture = json.loads(path.read_text())
    assert total(fixture["config"]) == fixture["expected_params"]
    if "published_params" in fixture:  # real checkpoints: transformers agrees with the model card
        assert fixture["expected_params"] == fixture["published_params"]


def test_fixtures_cover_every_model_type():
    types = {json.loads(p.read_text())["config"]["model_type"] for p in FIXTURES}
    assert types == set(SUPPORTED_MODEL_TYPES)
    assert len(FIXTURES) >= 40


def test_tiny_llama_by_hand():
    cfg = {"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2,
           "num_key_value_heads": 1, "intermediate_size": 16, "num_hidden_layers": 1}  # fmt: skip
    embedding, lm_head = 10 * 8, 10 * 8  # untied (configuration_llama.py default)
    attention = 8 * 8 + 8 * 4 + 8 * 4 + 8 * 8  # q, k and v of one 4-wide kv head, o
    mlp = 3 * 8 * 16  # gate, up, down
    norms = 2 * 8 + 8  # two RMSNorms per layer (weight only) and the final one
    assert total(cfg) == embedding + attention + mlp + norms + lm_head == 760


def test_spec_is_plain_and_named():
    spec = from_hf_config({"model_type": "llama", "_name_or_path": "meta-llama/Llama-2-7b-hf"})
    assert spec["name"] == "meta-llama/Llama-2-7b-hf"
    assert spec["source"] == "Hugging Face config.json (model_type llama)"
    assert json.loads(json.dumps(spec)) == spec  # JSON/YAML-ready values only
    m = ModelConfig.model_validate(spec)
    assert (m.mlp.value, m.norm.value, m.positional.value) == ("swiglu", "rmsnorm", "rotary")


def test_defaults_follow_the_model_type():
    gpt2 = ModelConfig.model_validate(from_hf_config({"model_type": "gpt2"}))
    assert (gpt2.n_layers, gpt2.d_model, gpt2.d_ff, gpt2.max_seq_len) == (12, 768, 3072, 1024)
    assert gpt2.tied_embeddings and gpt2.positional.value == "learned"
    gemma = ModelConfig.model_validate(from_hf_config({"model_type": "gemma"}))
    assert (gemma.head_dim, gemma.mlp.value) == (256, "geglu")  # not D/A = 192


def test_dropout_is_the_largest_rate():
    spec = from_hf_config({"model_type": "gpt2", "attn_pdrop": 0.0, "resid_pdrop": 0.2})
    assert spec["dropout"] == 0.2  # embd_pdrop keeps its default 0.1


def test_alias_given_with_its_field_wins_as_in_transformers():
    # configuration_utils.py sets dataclass fields first, then attribute_map names
    spec = from_hf_config({"model_type": "gpt2", "n_embd": 768, "hidden_size": 1024, "n_head": 16})
    assert spec["d_model"] == 1024


def test_unsupported_model_type_lists_supported():
    with pytest.raises(TcalcError) as err:
        from_hf_config({"model_type": "t5"})
    message = str(err.value)
    assert "unsupported model_type 't5'" in message
    # issue 36: the list is clipped, the closest names first, and says how many it leaves out
    assert sum(t in message.split("; supported: ")[1].split(", ") for t in SUPPORTED_MODEL_TYPES) == 8
    assert f"({len(SUPPORTED_MODEL_TYPES) - 8} more)" in message and len(message) < 250
    assert "\n" not in message


def test_near_miss_model_type_suggests():
    with pytest.raises(TcalcError, match=r"did you mean 'llama'\?.*supported: llama, llama4, "):
        from_hf_config({"model_type": "lama"})


def test_missing_model_type():
    with pytest.raises(TcalcError, match=r"config.json has no model_type; add one of: apertus, arcee, bamba"):
        from_hf_config({"hidden_size": 4096})


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"model_type": "llama", "hidden_size": "big"}, r"hidden_size \('big'\) must be a whole number"),
        ({"model_type": "gpt2", "n_embd": 76.8}, r"n_embd \(76.8\) must be a whole number"),
        ({"model_type": "llama", "num_hidden_layers": True}, r"num_hidden_layers \(True\) must be"),
        (
            {"model_type": "llama", "tie_word_embeddings": "yes"},
            r"tie_word_embeddings \('yes'\) must be true or false",
        ),
        ({"model_type": "opt", "dropout": "0.1"}, r"dropout \('0.1'\) must be a number"),
        ({"model_type": "falcon", "hidden_size": None}, r"hidden_size \(None\) must be a whole number"),
    ],
    ids=["str-int", "float-int-alias", "bool-int", "str-bool", "str-float", "null"],
)
def test_wrong_type_names_key_value_and_fix(cfg, message):
    with pytest.raises(TcalcError, match=message) as err:
        from_hf_config(cfg)
    assert "fix" in str(err.value)


def test_out_of_range_value_is_left_to_model_config():
    spec = from_hf_config({"model_type": "llama", "num_hidden_layers": 0})
    with pytest.raises(ValueError, match="n_layers"):
        ModelConfig.model_validate(spec)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"model_type": "phi", "qk_layernorm": True, "head_dim": 32}, r"head_dim \(32\) must be .*qk_layernorm"),
        ({"model_type": "gpt2", "add_cross_attention": True}, r"add_cross_attention \(True\)"),
        ({"model_type": "llama", "hidden_act": "relu"}, r"hidden_act \('relu'\) must be silu/swish"),
        ({"model_type": "gpt2", "activation_function": "tanh"}, r"activation_function \('tanh'\) must be relu"),
    ],
    ids=["phi-qk-norm-width", "cross-attention", "gated-relu", "plain-tanh"],
)
def test_unrepresentable_configs_are_refused(cfg, message):
    with pytest.raises(TcalcError, match=message):
        from_hf_config(cfg)


def test_overrides_on_imported_llama_revalidate():
    m = ModelConfig.model_validate(from_hf_config({"model_type": "llama"}))
    assert (m.n_heads, m.n_kv_heads) == (32, 32)
    assert m.with_overrides({"n_kv_heads": 8}).n_kv_heads == 8
    with pytest.raises(ValueError, match=r"n_heads \(32\) must be divisible by n_kv_heads \(5\)"):
        m.with_overrides({"n_kv_heads": 5})


def test_overrides_rederive_what_the_file_left_implicit():
    m = ModelConfig.model_validate(from_hf_config({"model_type": "llama"}))
    wider = m.with_overrides({"D": 8192, "A": 64})
    assert wider.head_dim == 128  # derived, D/A
    assert wider.d_ff == 11008  # pinned: llama's intermediate_size default is not 4*D


def test_hf_module_is_pure():
    """hf.py: stdlib and transformer_calc only (no transformers, torch, yaml, I/O libraries)."""
    tree = ast.parse((Path(__file__).resolve().parents[1] / "transformer_calc" / "sources" / "hf.py").read_text())
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    assert roots - {"__future__", "transformer_calc"} <= set(sys.stdlib_module_names)
    assert not roots & {"transformers", "torch", "yaml", "pathlib", "io", "os"}
