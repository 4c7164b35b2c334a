"""Cross-check cases for the 2024-2026 families (tools/crosscheck/hf_params.py merges them):
a random generator per model_type (small odd shapes; each knob given with probability 1/2 so that
the transformers defaults are exercised), edge cases, and the real published configs of
tools/crosscheck/published_configs (their totals checked against the model cards where exact)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

Cfg = dict[str, Any]
R = random.Random
HERE = Path(__file__).resolve().parent


def _maybe(r: R, cfg: Cfg, **knobs: Any) -> Cfg:
    for key, value in knobs.items():
        if r.random() < 0.5:
            cfg[key] = value
    return cfg


def _base(r: R, model_type: str, head_dim: bool = True) -> Cfg:
    kv = r.choice([1, 2, 4])
    A = kv * r.choice([1, 2, 3])
    hd = r.choice([8, 16, 24])
    cfg: Cfg = {
        "model_type": model_type,
        "vocab_size": r.randint(50, 3000),
        "hidden_size": A * hd if not head_dim or r.random() < 0.5 else r.choice([32, 48, 72, 96]),
        "num_hidden_layers": r.randint(1, 7),
        "num_attention_heads": A,
        "num_key_value_heads": kv,
        "intermediate_size": r.randint(4, 300),
        "max_position_embeddings": r.choice([128, 512, 4096]),
    }
    if head_dim:
        cfg["head_dim"] = hd
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, attention_dropout=r.choice([0.0, 0.1]))
    return cfg


def gen_dense(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        cfg = _base(r, model_type)
        if model_type in ("qwen3", "olmo2", "granite", "cohere", "gemma2", "gemma3_text", "gpt_oss"):
            _maybe(r, cfg, attention_bias=r.random() < 0.5)
        if model_type == "granite":
            _maybe(r, cfg, mlp_bias=r.random() < 0.5, embedding_multiplier=12.0, residual_multiplier=0.22)
        if model_type == "qwen3":
            _maybe(r, cfg, use_sliding_window=True, sliding_window=r.randint(4, 64), max_window_layers=r.randint(0, 6))
        if model_type in ("gemma2", "gemma3_text"):
            cfg["hidden_size"] = cfg["num_attention_heads"] * r.choice([8, 16])  # validated by the config
            _maybe(r, cfg, sliding_window=r.randint(4, 64), query_pre_attn_scalar=64)
        if model_type == "cohere":
            _maybe(r, cfg, use_qk_norm=r.random() < 0.5, logit_scale=0.5)
        if model_type == "starcoder2":
            cfg.pop("head_dim", None)
            cfg["hidden_size"] = cfg["num_attention_heads"] * r.choice([8, 16])
            _maybe(r, cfg, use_bias=r.random() < 0.5, sliding_window=r.randint(4, 64), residual_dropout=0.1)
        if model_type == "phi3":
            cfg.pop("head_dim", None)
            cfg["hidden_size"] = cfg["num_attention_heads"] * r.choice([8, 16])
            cfg["pad_token_id"] = 0  # the default 32000 must index the embedding
            _maybe(r, cfg, sliding_window=r.randint(4, 64), resid_pdrop=0.1)
        return cfg

    return gen


def gen_qwen_moe(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        cfg = _base(r, model_type, head_dim=model_type == "qwen3_moe")
        if model_type == "qwen2_moe":
            cfg["hidden_size"] = cfg["num_attention_heads"] * r.choice([8, 16])
        n = r.randint(1, 9)
        key = "num_experts" if model_type == "qwen2_moe" or r.random() < 0.5 else "num_local_experts"
        cfg |= {key: n, "num_experts_per_tok": r.randint(1, n), "moe_intermediate_size": r.randint(2, 40)}
        L = cfg["num_hidden_layers"]
        _maybe(r, cfg, decoder_sparse_step=r.randint(1, 3), mlp_only_layers=sorted(r.sample(range(L), r.randint(0, L))))
        if model_type == "qwen2_moe":
            _maybe(r, cfg, shared_expert_intermediate_size=r.randint(2, 60), qkv_bias=r.random() < 0.5)
        return cfg

    return gen


def gen_deepseek_like(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        cfg = _base(r, model_type, head_dim=model_type == "glm4_moe")
        if model_type == "glm4_moe":
            _maybe(r, cfg, attention_bias=r.random() < 0.5, use_qk_norm=r.random() < 0.5, partial_rotary_factor=0.5)
        else:
            A = cfg["num_attention_heads"]
            cfg["num_key_value_heads"] = A
            cfg["hidden_size"] = A * r.choice([8, 16])
            cfg |= {"kv_lora_rank": r.randint(4, 40), "qk_rope_head_dim": r.choice([4, 8]),
                    "qk_nope_head_dim": r.choice([4, 8, 12]), "v_head_dim": r.choice([4, 8, 16]),
                    "q_lora_rank": r.choice([None, r.randint(4, 40)])}
            _maybe(r, cfg, attention_bias=r.random() < 0.5)
        n = r.randint(1, 8)
        cfg |= {"n_routed_experts": n, "num_experts_per_tok": r.randint(1, n), "moe_intermediate_size": r.randint(2, 40),
                "n_group": 1, "topk_group": 1}
        _maybe(r, cfg, n_shared_experts=r.randint(0, 2), first_k_dense_replace=r.randint(0, 3),
               num_nextn_predict_layers=r.randint(0, 1))
        return cfg

    return gen


def gen_gpt_oss(r: R) -> Cfg:
    cfg = _base(r, "gpt_oss")
    n = r.randint(1, 8)
    cfg |= {"num_local_experts": n, "num_experts_per_tok": r.randint(1, n)}
    _maybe(r, cfg, sliding_window=r.randint(4, 64), attention_bias=r.random() < 0.5)
    return cfg


def gen_llama4(r: R) -> Cfg:
    cfg = _base(r, "llama4_text")
    n = r.randint(1, 6)
    L = cfg["num_hidden_layers"]
    cfg |= {"num_local_experts": n, "num_experts_per_tok": r.randint(1, n), "intermediate_size_mlp": r.randint(4, 200)}
    if r.random() < 0.5:
        cfg["interleave_moe_layer_step"] = r.randint(1, 3)
    elif r.random() < 0.5:
        cfg["moe_layers"] = sorted(r.sample(range(L), r.randint(0, L)))
    _maybe(r, cfg, attention_chunk_size=r.randint(4, 64), attention_bias=r.random() < 0.5, use_qk_norm=r.random() < 0.5)
    return cfg


def gen_wrapper(model_type: str, inner: Callable[[R], Cfg]) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        text = inner(r)
        if model_type == "mistral3":
            text["model_type"] = "mistral"
        return {"model_type": model_type, "text_config": text}

    return gen


def gen_mistral(r: R) -> Cfg:
    cfg = _base(r, "mistral")
    _maybe(r, cfg, sliding_window=r.randint(4, 64))
    return cfg


GENERATORS: dict[str, Callable[[R], Cfg]] = {
    **{t: gen_dense(t) for t in ("qwen3", "gemma2", "gemma3_text", "olmo2", "phi3", "granite", "cohere", "starcoder2")},
    "qwen2_moe": gen_qwen_moe("qwen2_moe"),
    "qwen3_moe": gen_qwen_moe("qwen3_moe"),
    "deepseek_v3": gen_deepseek_like("deepseek_v3"),
    "glm4_moe": gen_deepseek_like("glm4_moe"),
    "gpt_oss": gen_gpt_oss,
    "llama4_text": gen_llama4,
    "gemma3": gen_wrapper("gemma3", gen_dense("gemma3_text")),
    "llama4": gen_wrapper("llama4", gen_llama4),
    "mistral3": gen_wrapper("mistral3", gen_mistral),
}

_T = {"vocab_size": 500, "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 96}
EDGE: list[tuple[str, Cfg]] = [
    ("minimal", {"model_type": t, **_T, "num_key_value_heads": 2} | ({"pad_token_id": 0} if t == "phi3" else {}))
    for t in ("qwen3", "gemma2", "gemma3_text", "olmo2", "phi3", "granite", "cohere", "starcoder2")
] + [
    ("mla-no-q-lora", {"model_type": "deepseek_v3", **_T, "num_key_value_heads": 4, "q_lora_rank": None,
                       "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                       "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                       "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1}),
    ("dense-only-layers", {"model_type": "qwen3_moe", **_T, "num_key_value_heads": 2, "num_experts": 4,
                           "num_experts_per_tok": 2, "moe_intermediate_size": 16, "mlp_only_layers": [0, 2],
                           "decoder_sparse_step": 1}),
    ("sparse-step-2", {"model_type": "qwen2_moe", **_T, "num_key_value_heads": 2, "num_experts": 4,
                       "num_experts_per_tok": 2, "moe_intermediate_size": 16, "decoder_sparse_step": 2}),
    ("interleaved", {"model_type": "llama4_text", **_T, "num_key_value_heads": 2, "head_dim": 16,
                     "num_local_experts": 4, "interleave_moe_layer_step": 2, "intermediate_size_mlp": 128}),
    ("gemma3-wrapper", {"model_type": "gemma3", "text_config": {**_T, "num_key_value_heads": 2, "head_dim": 16}}),
    ("mistral3-wrapper", {"model_type": "mistral3", "text_config": {"model_type": "mistral", **_T,
                                                                   "num_key_value_heads": 2}}),
    ("kimi-k2-shape", {"model_type": "deepseek_v3", **_T, "num_key_value_heads": 4, "q_lora_rank": 24,
                       "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                       "n_routed_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                       "n_group": 1, "topk_group": 1}),
]

# MoE edge cases: alias precedence, families without experts, negative first_k_dense_replace,
# sliding Qwen3-MoE, explicit Llama 4 moe_layers, the llama4 wrapper.
_M = {**_T, "num_hidden_layers": 5, "num_key_value_heads": 2}
_MLA = {"num_key_value_heads": 4, "q_lora_rank": 24, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
        "v_head_dim": 16, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
        "n_group": 1, "topk_group": 1}
EDGE += [
    ("both-expert-keys", {"model_type": "qwen3_moe", **_M, "num_experts": 4, "num_local_experts": 6,
                          "num_experts_per_tok": 2, "moe_intermediate_size": 16}),  # num_local_experts wins
    ("no-experts", {"model_type": "qwen2_moe", **_M, "num_experts": 0}),  # every layer dense, k unused
    ("no-experts", {"model_type": "qwen3_moe", **_M, "num_experts": 0}),
    ("sliding-all", {"model_type": "qwen3_moe", **_M, "num_experts": 4, "num_experts_per_tok": 2,
                     "moe_intermediate_size": 16, "use_sliding_window": True, "sliding_window": 8}),
    ("sliding-max-window", {"model_type": "qwen2_moe", **_M, "num_experts": 4, "num_experts_per_tok": 2,
                            "moe_intermediate_size": 16, "use_sliding_window": True, "sliding_window": 8,
                            "max_window_layers": 2, "shared_expert_intermediate_size": 0}),
    ("first-k-negative", {"model_type": "deepseek_v3", **_M, **_MLA, "first_k_dense_replace": -1,
                          "n_shared_experts": 0, "num_nextn_predict_layers": 0}),
    ("mla-bias-no-q-lora", {"model_type": "deepseek_v3", **_M, **_MLA, "q_lora_rank": None, "attention_bias": True,
                            "first_k_dense_replace": 2, "n_shared_experts": 2}),
    ("qk-norm-bias", {"model_type": "glm4_moe", **_M, "head_dim": 24, "attention_bias": True, "use_qk_norm": True,
                      "n_routed_experts": 4, "num_local_experts": 6, "num_experts_per_tok": 2,
                      "moe_intermediate_size": 16, "first_k_dense_replace": 2, "n_group": 1, "topk_group": 1}),
    ("odd-layers-given", {"model_type": "gpt_oss", **_M, "head_dim": 16, "num_local_experts": 3,
                          "num_experts_per_tok": 2, "sliding_window": 8, "attention_bias": False,
                          "layer_types": ["sliding_attention", "full_attention"] * 2 + ["sliding_attention"]}),
    ("moe-layers-explicit", {"model_type": "llama4_text", **_M, "head_dim": 16, "num_local_experts": 3,
                             "intermediate_size_mlp": 128, "moe_layers": [1, 3], "attention_chunk_size": 8,
                             "no_rope_layer_interval": 3}),
    ("moe-layers-none", {"model_type": "llama4_text", **_M, "head_dim": 16, "num_local_experts": 3,
                         "intermediate_size_mlp": 128, "moe_layers": []}),
    ("wrapper-interleaved", {"model_type": "llama4", "text_config": {
        **_M, "head_dim": 16, "num_local_experts": 4, "num_experts_per_tok": 2, "interleave_moe_layer_step": 2,
        "intermediate_size_mlp": 128, "attention_bias": True, "tie_word_embeddings": True}}),
]  # fmt: skip

# Real published configs (tools/crosscheck/published_configs, SOURCES.md says where each was read);
# the published total where the model card states an exact one.
PUBLISHED_TOTALS: dict[str, int] = {}
REAL: list[tuple[str, Cfg, int | None]] = []
for _path in sorted((HERE / "published_configs").glob("*.json")):
    _cfg = json.loads(_path.read_text())
    REAL.append((_path.stem, _cfg, PUBLISHED_TOTALS.get(_path.stem)))


# More edge cases and a second generator per dense type (head_dim != D/A, explicit and aperiodic
# layer_types, windows off, wrappers without text_config): hf_cases_2024_extra.py.
import hf_cases_2024_extra as _extra  # noqa: E402

EDGE += [(f"x-{label}", cfg) for label, cfg in _extra.EDGE]
for _type, _gen in _extra.GENERATORS.items():
    _mine = GENERATORS.get(_type)
    if _mine is None:
        GENERATORS[_type] = _gen
    else:  # alternate between the two generators, from the same random stream
        GENERATORS[_type] = (lambda a, b: lambda r: (a if r.random() < 0.5 else b)(r))(_mine, _gen)
