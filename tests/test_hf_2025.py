"""Issue 22: the 2025-26 families' config.json import, safe model_type hints, non-finite literals.

Parameter counts are compared with transformers 5.23's counts stored in tests/data/hf (written by
tools/crosscheck/hf_params.py --write-fixtures; tests/test_hf.py reads every fixture): this file
holds the hand-checkable goldens and the refusals.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer_calc.errors import TcalcError
from transformer_calc.sources.files import parse_json
from transformer_calc.sources.hf import (
    OTHER_ARCHITECTURES,
    SUPPORTED_MODEL_TYPES,
    UNREPRESENTABLE,
    from_hf_config,
    type_hint,
)
from transformer_calc.cli import run

DATA = Path(__file__).parent / "data"
TRANSFORMERS_TYPES = [
    line.strip() for line in (DATA / "transformers_model_types.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


# ------------------------------------------------------------------ 1. Infinity / NaN in a config.json
NEMOTRON_H = '{"model_type": "nemotron_h", "hidden_size": 4096, "time_step_limit": [0.0, Infinity]}'


def test_config_json_accepts_python_non_finite_literals():
    # transformers reads config.json with json.loads, which takes Infinity, -Infinity and NaN
    cfg = parse_json('{"a": [0.0, Infinity], "b": -Infinity, "c": NaN}', "config.json", non_finite=True)
    assert cfg["a"][1] == float("inf") and cfg["b"] == float("-inf") and cfg["c"] != cfg["c"]


def test_other_json_still_refuses_non_finite_literals():
    with pytest.raises(TcalcError, match="Infinity is not a JSON number"):
        parse_json('{"a": Infinity}', "index.json")


def test_nemotron_h_with_infinity_is_read(tmp_path, capsys):
    # Nemotron 3 Super publishes time_step_limit [0.0, Infinity]: a value tcalc does not read (nemotron_h
    # is imported since the hybrid mixers, sources/hf_hybrid.py)
    path = tmp_path / "config.json"
    path.write_text(NEMOTRON_H)
    assert run(["params", str(path), "-f", "json"]) == 0
    assert '"total"' in capsys.readouterr().out


def test_non_finite_values_read_as_unused_fields_do_not_matter(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "num_hidden_layers": 2, "vocab_size": 100, "hidden_size": 64, '
                    '"num_attention_heads": 4, "intermediate_size": 128, "rope_theta": Infinity, "x": NaN}')
    assert run(["params", str(path), "-f", "json"]) == 0
    assert '"total"' in capsys.readouterr().out


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "intermediate_size", "head_dim"])
def test_a_non_finite_size_is_one_clear_error(key):
    with pytest.raises(TcalcError, match=rf"{key} \((inf|-inf|nan)\) must be a whole number; fix {key}"):
        from_hf_config({"model_type": "llama", key: float("inf")})


# ------------------------------------------------------------------ 2. safe did-you-mean
@pytest.mark.parametrize("typed, meant", [
    ("lama", "llama"), ("Llama", "llama"), ("qwen2-moe", "qwen2_moe"), ("deepseekv3", "deepseek_v3"),
    ("GPT-NeoX", "gpt_neox"), ("mixtrl", "mixtral"),
])
def test_spelling_slips_are_hinted(typed, meant):
    assert type_hint(typed) == meant


@pytest.mark.parametrize("other", ["qwen3_6", "deepseek_v32_exp", "gemma5", "olmo", "granitemoe", "glm4", "mpt",
                                   "qwen4", "deepseek_v2", "starcoder", "phimoe"])
def test_another_version_or_family_is_never_hinted(other):
    assert type_hint(other) is None


def test_no_transformers_model_type_is_hinted_to_another_count():
    """Every model_type transformers 5.23 knows is supported, refused by name, or refused without a
    did-you-mean (issue 22: qwen3_5 -> qwen3, deepseek_v32 -> deepseek_v3, gemma4 -> gemma were wrong)."""
    assert len(TRANSFORMERS_TYPES) > 700
    for model_type in TRANSFORMERS_TYPES:
        if model_type in SUPPORTED_MODEL_TYPES:
            continue
        with pytest.raises(TcalcError) as err:
            from_hf_config({"model_type": model_type})
        assert "did you mean" not in str(err.value), model_type


@pytest.mark.parametrize("model_type", sorted({*UNREPRESENTABLE, *OTHER_ARCHITECTURES}))
def test_known_but_refused_types_say_what_is_missing(model_type):
    with pytest.raises(TcalcError) as err:
        from_hf_config({"model_type": model_type})
    reason = UNREPRESENTABLE.get(model_type) or OTHER_ARCHITECTURES[model_type]
    assert reason in str(err.value) and f"'{model_type}'" in str(err.value)


# ------------------------------------------------------------------ 3. the 2025-26 families
from transformer_calc.model.config import ModelConfig, Workload  # noqa: E402
from transformer_calc.estimators.params import count_params  # noqa: E402
from transformer_calc.estimators.flops import count_flops  # noqa: E402
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode, decode_step, kv_cache  # noqa: E402
from transformer_calc.sources.presets import gpu, preset_model  # noqa: E402


def _count(cfg):
    return count_params(ModelConfig.model_validate(from_hf_config(cfg)))


_TINY = {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 96}
_MLA = {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "first_k_dense_replace": 1,
        "num_key_value_heads": 4}
_DSA = {"index_n_heads": 2, "index_head_dim": 16, "index_topk": 4}


@pytest.mark.parametrize("cfg, total", [
    # transformers 5.23, AutoModelForCausalLM on the meta device (tools/crosscheck/hf_params.py), by hand:
    # olmo3: 2·100·64 (untied) + 4·(64·64 + 2·32·64 + 64·64 + 64 + 32 (q/k norms) + 3·64·96 + 2·64) + 64
    ({"model_type": "olmo3", **_TINY}, 136640),
    # arcee: ReLU² plain MLP: 2·100·64 + 4·(2·64·64 + 2·32·64 + 2·64·96 + 2·64) + 64 (modeling_arcee.py ArceeMLP)
    ({"model_type": "arcee", **_TINY}, 111680),
    # apertus: xIELU's alpha_p, alpha_n per MLP (modeling_apertus.py XIELUActivation): arcee's count + 4·(2 + 2·16)
    ({"model_type": "apertus", **_TINY}, 111816),
    # bitnet: attn_sub_norm (64) + ffn_sub_norm (96) per layer over a gated MLP (modeling_bitnet.py)
    ({"model_type": "bitnet", **_TINY}, 136896),
    # deepseek_v32: deepseek_v3 + per layer wq_b 24·32 + wk 64·16 + k_norm 2·16 + weights_proj 64·2
    ({"model_type": "deepseek_v32", **_TINY, **_MLA, **_DSA, "n_group": 1, "topk_group": 1}, None),
], ids=["olmo3", "arcee", "apertus", "bitnet", "deepseek_v32"])
def test_golden_counts(cfg, total):
    if total is None:  # the DSA layer = the DeepSeek-V3 layer + its indexer
        v3 = _count({**cfg, "model_type": "deepseek_v3"})  # the index_* keys are ignored there
        dsa = _count(cfg)
        assert dsa.layer.indexer == 24 * 32 + 64 * 16 + 2 * 16 + 64 * 2 == 1952
        assert dsa.total - v3.total == 4 * 1952
        return
    assert _count(cfg).total == total


def test_glm5_shared_layers_have_no_indexer():
    base = {"model_type": "glm_moe_dsa", **_TINY, **_MLA, **_DSA}
    full, shared = _count(base), _count(base | {"index_topk_pattern": "FSSF"})
    assert full.n_indexer_layers == 4 and shared.n_indexer_layers == 2
    assert full.total - shared.total == 2 * full.layer.indexer
    assert shared.as_dict()["layers_indexer"] == 2 * full.layer.indexer


@pytest.mark.parametrize("cfg, says", [
    ({"model_type": "deepseek_v32", **_TINY, **_MLA, **_DSA, "q_lora_rank": None}, "q_lora_rank"),
    ({"model_type": "glm_moe_dsa", **_TINY, **_MLA, **_DSA, "index_topk_pattern": "SFFF"}, "'full' for layer 0"),
    ({"model_type": "ernie4_5_moe", **_TINY, "use_bias": True}, "use_bias"),
    ({"model_type": "hunyuan_v1_moe", **_TINY, "head_dim": 16, "num_experts": 4, "moe_topk": [1, 2, 1, 2]}, "moe_topk"),
])
def test_what_tcalc_cannot_represent_is_one_clear_error(cfg, says):
    with pytest.raises(TcalcError, match=says):
        from_hf_config(cfg)


def test_dsa_needs_mla_with_a_query_rank():
    with pytest.raises(ValueError, match="multi-head latent attention with a query low rank"):
        ModelConfig.model_validate({"L": 2, "D": 64, "A": 4, "V": 100, "index_topk": 4, "index_n_heads": 2,
                                    "index_head_dim": 16})


def test_dsa_training_flops_count_the_indexer_forward_only():
    m = preset_model("deepseek-v3.2")
    f = count_flops(m, Workload(seq_len=512))
    assert f.indexer == 61 * f.layer.indexer > 0
    assert f.backward == 2 * (f.forward - f.indexer)
    v3 = count_flops(preset_model("deepseek-v3"), Workload(seq_len=512))
    assert f.layers == v3.layers  # the main attention as eager runs it: the same as DeepSeek-V3's
    sparse = count_flops(m, Workload(seq_len=4096), windowed=True, causal=True)
    dense = count_flops(m, Workload(seq_len=4096), causal=True)
    # a sparse kernel: query i reads min(i+1, 2048) tokens: S·k − k²/2 pairs instead of S²/2
    assert dense.attention_cores * (2 * 4096 * 2048 - 2048**2) == sparse.attention_cores * 4096**2


def test_dsa_decode_sum_equals_its_steps():
    """decode() sums the steps in closed form, piece by piece: the top-k read is a break like a window."""
    m = ModelConfig.model_validate(from_hf_config({"model_type": "deepseek_v32", **_TINY, **_MLA, **_DSA}))
    spec = InferenceSpec(batch_size=2, prompt_len=2, new_tokens=9, weight_dtype="fp32", kv_dtype="fp32")
    g = gpu("h100")
    d = decode(m, g, spec)
    steps = [decode_step(m, g, spec, c) for c in range(3, 3 + 8)]
    assert d.flops == sum(s.flops for s in steps) and d.bytes_moved == sum(s.bytes_moved for s in steps)
    # past index_topk = 4 cached tokens a step reads 4 latents but every indexer key
    late = steps[-1]  # context 10: 9 cached
    assert late.kv_read_bytes == 2 * 4 * (4 * (16 + 8) + 9 * 16) * 4


def test_dsa_kv_cache_holds_latent_and_indexer_keys():
    m = preset_model("glm-5")
    kv = kv_cache(m, InferenceSpec(batch_size=1, prompt_len=1024, tensor_parallel=8))
    assert kv.bytes_per_token == 78 * (512 + 64 + 128) * 2
    assert kv.per_gpu_bytes == kv.total_bytes  # replicated, like the latent


@pytest.mark.parametrize("name, total", [
    # tools/crosscheck/verify_presets.py: transformers 5.23 builds the same counts from the sourced values
    ("deepseek-v3.2", 671_877_929_216), ("glm-5", 743_911_199_232), ("glm-4.7-flash", 29_943_390_976),
    ("minimax-m2.5", 228_689_748_992), ("olmo-3-32b", 32_233_522_176), ("smollm3-3b", 3_075_098_624),
])
def test_issue22_presets(name, total):
    assert count_params(preset_model(name)).total == total
