"""Cross-check cases for the 2025-26 attention-only families (issue 22; tools/crosscheck/hf_params.py
merges them): a random generator per model_type (small odd shapes, each knob given with probability
1/2 so that the transformers defaults are exercised) and edge cases. The published configs live in
tools/crosscheck/published_configs (hf_cases_2024.py reads every file there)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Cfg = dict[str, Any]
R = random.Random


def _maybe(r: R, cfg: Cfg, **knobs: Any) -> Cfg:
    for key, value in knobs.items():
        if r.random() < 0.5:
            cfg[key] = value
    return cfg


def _shape(r: R, model_type: str, *, head_dim: bool = True, divisible: bool = False) -> Cfg:
    kv = r.choice([1, 2, 3])
    A = kv * r.choice([1, 2, 3])
    hd = r.choice([8, 12, 16])
    cfg: Cfg = {
        "model_type": model_type,
        "vocab_size": r.randint(50, 3000),
        "num_hidden_layers": r.randint(1, 9),
        "num_attention_heads": A,
        "num_key_value_heads": kv,
        "intermediate_size": r.randint(3, 301),
        "pad_token_id": 0,  # some defaults (smollm3 128004, ...) must index a tiny embedding
        "hidden_size": A * hd if divisible or r.random() < 0.6 else A * hd + r.choice([2, 6]),
    }
    if head_dim:
        cfg["head_dim"] = r.choice([8, 16, 20])
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, max_position_embeddings=r.choice([64, 512, 4096]))
    return cfg


def _layer_types(r: R, L: int, kinds: tuple[str, ...] = ("full_attention", "sliding_attention")) -> list[str]:
    if r.random() < 0.5:
        p = r.randint(1, 4)
        base = [r.choice(kinds) for _ in range(p)]
        return [base[i % p] for i in range(L)]
    return [r.choice(kinds) for _ in range(L)]


def gen_dense(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        divisible = model_type in ("arcee", "cohere2", "bitnet", "olmo3", "smollm3", "apertus", "exaone4")
        cfg = _shape(r, model_type, head_dim=model_type not in ("arcee", "cohere2", "bitnet", "olmo3", "smollm3"),
                     divisible=divisible)
        L = cfg["num_hidden_layers"]
        if model_type in ("olmo3", "smollm3", "apertus", "arcee", "bitnet", "cohere2", "hunyuan_v1_dense"):
            _maybe(r, cfg, attention_bias=r.random() < 0.5)
        if model_type in ("smollm3", "arcee", "seed_oss"):
            _maybe(r, cfg, mlp_bias=r.random() < 0.5)
        if model_type == "seed_oss":
            _maybe(r, cfg, attention_bias=r.random() < 0.5, attention_out_bias=r.random() < 0.5, residual_dropout=0.0)
        if model_type == "ernie4_5":
            _maybe(r, cfg, use_bias=r.random() < 0.5)
        if model_type in ("olmo3", "exaone4", "cohere2", "ministral3"):
            _maybe(r, cfg, sliding_window=r.choice([r.randint(2, 40)] + ([None] if model_type == "ministral3" else [])))
        if model_type == "olmo3" and r.random() < 0.3:
            cfg["layer_types"] = _layer_types(r, L)
        if model_type == "exaone4":
            if r.random() < 0.5:
                cfg["sliding_window_pattern"] = r.randint(1, 5)
            cfg.setdefault("sliding_window", r.randint(2, 40))  # null with no layer_types fails in transformers
        if model_type == "cohere2":
            _maybe(r, cfg, sliding_window_pattern=r.randint(1, 5))
        if model_type == "smollm3":
            _maybe(r, cfg, use_sliding_window=True, sliding_window=r.randint(2, 40), no_rope_layer_interval=r.randint(1, 4))
        if model_type == "apertus":
            _maybe(r, cfg, hidden_act=r.choice(["xielu", "relu2", "gelu"]))
        if model_type == "arcee":
            _maybe(r, cfg, hidden_act=r.choice(["relu2", "relu", "gelu"]))
        if model_type == "bitnet":
            _maybe(r, cfg, hidden_act=r.choice(["relu2", "silu"]))
        if model_type == "hunyuan_v1_dense":
            cfg.setdefault("head_dim", 16)  # transformers needs it
        return cfg

    return gen


def gen_moe(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        cfg = _shape(r, model_type, head_dim=True)
        n = r.randint(1, 6)
        L = cfg["num_hidden_layers"]
        if model_type == "ernie4_5_moe":
            cfg |= {r.choice(["moe_num_experts", "num_experts"]): n, r.choice(["moe_k", "num_experts_per_tok"]): r.randint(1, n),
                    "moe_intermediate_size": r.randint(2, 40)}
            _maybe(r, cfg, moe_num_shared_experts=r.randint(0, 2), moe_layer_start_index=r.randint(0, 3),
                   moe_layer_end_index=r.choice([-1, r.randint(0, L)]), moe_layer_interval=r.randint(1, 3))
        elif model_type == "hunyuan_v1_moe":
            k = r.randint(1, n)
            cfg |= {"num_experts": n, "moe_topk": r.choice([k, [k] * L])}
            _maybe(r, cfg, attention_bias=r.random() < 0.5)
        else:  # minimax_m2
            cfg |= {r.choice(["num_local_experts", "num_experts"]): n, "num_experts_per_tok": r.randint(1, n)}
        return cfg

    return gen


def gen_mla(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        A = r.choice([1, 2, 3, 4])
        L = r.randint(1, 7)
        cfg: Cfg = {
            "model_type": model_type, "vocab_size": r.randint(50, 3000), "num_hidden_layers": L,
            "num_attention_heads": A, "num_key_value_heads": A, "hidden_size": A * r.choice([8, 16]) + r.choice([0, 0, 4]),
            "intermediate_size": r.randint(3, 200), "kv_lora_rank": r.randint(4, 40), "qk_rope_head_dim": r.choice([4, 8]),
            "qk_nope_head_dim": r.choice([4, 8, 12]), "v_head_dim": r.choice([4, 8, 16]),
            "q_lora_rank": r.randint(4, 40), "n_group": 1, "topk_group": 1, "pad_token_id": 0,
        }
        if model_type == "glm4_moe_lite" and r.random() < 0.3:
            cfg["q_lora_rank"] = None
        n = r.randint(1, 6)
        cfg |= {"n_routed_experts": n, "num_experts_per_tok": r.randint(1, n), "moe_intermediate_size": r.randint(2, 40)}
        _maybe(r, cfg, n_shared_experts=r.randint(0, 2), attention_bias=r.random() < 0.5,
               tie_word_embeddings=r.random() < 0.5, num_nextn_predict_layers=r.randint(0, 1))
        if model_type != "glm4_moe_lite":
            cfg |= {"index_n_heads": r.randint(1, 4), "index_head_dim": r.choice([8, 12, 16]), "index_topk": r.randint(1, 64)}
            _maybe(r, cfg, first_k_dense_replace=r.randint(0, 3))
        if r.random() < 0.3:
            cfg["mlp_layer_types"] = [r.choice(["dense", "sparse"]) for _ in range(L)]
        if model_type == "glm_moe_dsa":
            choice = r.random()
            if choice < 0.25:
                cfg["indexer_types"] = ["full"] + [r.choice(["full", "shared"]) for _ in range(L - 1)]
            elif choice < 0.5:
                cfg["index_topk_pattern"] = "F" + "".join(r.choice("FS") for _ in range(L - 1))
            elif choice < 0.75:
                cfg |= {"index_topk_freq": r.randint(1, 3), "index_skip_topk_offset": r.randint(1, 3)}
        return cfg

    return gen


def gen_mimo_v2_flash(r: R) -> Cfg:
    """MiMo-V2-Flash (modeling_mimo_v2_flash.py): sliding layers with 2·n_kv K/V heads and sinks, values of
    v_head_dim, MoE after the dense layers. At least 2 experts (its group router takes the top 2 scores of
    each group); head_dim 6, 12 or 24 (RoPE rotates int(0.334·head_dim) dims, which must be even)."""
    kv = r.choice([1, 2])
    A = 2 * kv * r.choice([1, 2, 3])
    L = r.randint(1, 8)
    n = r.randint(2, 6)
    cfg: Cfg = {"model_type": "mimo_v2_flash", "vocab_size": r.randint(50, 3000), "hidden_size": r.choice([32, 48, 64]),
                "num_hidden_layers": L, "num_attention_heads": A, "num_key_value_heads": kv,
                "head_dim": r.choice([6, 12, 24]), "v_head_dim": r.choice([4, 8, 12, 20]),
                "intermediate_size": r.randint(3, 200), "moe_intermediate_size": r.randint(2, 40),
                "n_routed_experts": n, "num_experts_per_tok": r.randint(1, n), "sliding_window": r.choice([4, 8, 129]),
                "pad_token_id": 0}
    _maybe(r, cfg, attention_bias=r.random() < 0.5, tie_word_embeddings=r.random() < 0.5,
           max_position_embeddings=r.choice([64, 4096]), sliding_window_size=r.choice([3, 7]))
    if r.random() < 0.4:
        cfg["layer_types"] = _layer_types(r, L)
    if r.random() < 0.3:
        cfg["mlp_layer_types"] = [r.choice(["dense", "sparse"]) for _ in range(L)]
    return cfg


def _own_stream(gen: Callable[[R], Cfg], seed: int) -> Callable[[R], Cfg]:
    """The generator on a random stream of its own, so that adding a type does not shift the draws (and
    the fixtures) of the types sorted after it."""
    rng = random.Random(seed)
    return lambda _shared: gen(rng)


GENERATORS: dict[str, Callable[[R], Cfg]] = {
    "mimo_v2_flash": _own_stream(gen_mimo_v2_flash, 22_13),
    **{t: gen_dense(t) for t in ("olmo3", "smollm3", "seed_oss", "ernie4_5", "apertus", "arcee", "bitnet",
                                 "ministral3", "exaone4", "cohere2", "hunyuan_v1_dense")},
    **{t: gen_moe(t) for t in ("ernie4_5_moe", "hunyuan_v1_moe", "minimax_m2")},
    **{t: gen_mla(t) for t in ("glm4_moe_lite", "deepseek_v32", "glm_moe_dsa")},
}

_T = {"vocab_size": 500, "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4, "intermediate_size": 96,
      "pad_token_id": 0}
_MLA = {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16, "n_group": 1, "topk_group": 1,
        "num_key_value_heads": 4}
_DSA = {"index_n_heads": 2, "index_head_dim": 16, "index_topk": 4}
EDGE: list[tuple[str, Cfg]] = [
    ("minimal", {"model_type": t, **_T, "num_key_value_heads": 2} | ({"head_dim": 16} if t.startswith("hunyuan") else {}))
    for t in ("olmo3", "smollm3", "apertus", "arcee", "bitnet", "exaone4", "cohere2", "hunyuan_v1_dense")
] + [
    ("head-dim-default-128", {"model_type": t, **_T, "num_key_value_heads": 2})
    for t in ("seed_oss", "ernie4_5", "ministral3", "minimax_m2")
] + [
    ("head-dim-null-floor", {"model_type": "seed_oss", **_T, "hidden_size": 66, "num_key_value_heads": 2, "head_dim": None}),
    ("exaone-letters", {"model_type": "exaone4", **_T, "num_key_value_heads": 2, "sliding_window": 8,
                        "sliding_window_pattern": "LLLG", "layer_types": ["sliding_attention"] * 3 + ["full_attention"] * 2}),
    ("cohere2-head-dim-given", {"model_type": "cohere2", **_T, "num_key_value_heads": 2, "head_dim": 40}),
    ("smollm3-nope-sliding", {"model_type": "smollm3", **_T, "num_key_value_heads": 2, "use_sliding_window": True,
                              "sliding_window": 8, "no_rope_layers": [1, 0, 1, 1, 0]}),
    ("ernie-moe-window", {"model_type": "ernie4_5_moe", **_T, "num_key_value_heads": 2, "head_dim": 16,
                          "moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 8, "moe_layer_start_index": 1,
                          "moe_layer_end_index": 3, "moe_layer_interval": 1}),
    ("hunyuan-moe-one-expert", {"model_type": "hunyuan_v1_moe", **_T, "num_key_value_heads": 2, "head_dim": 16,
                                "num_experts": 1, "moe_topk": 1}),
    ("glm-lite-head-dim-alias", {"model_type": "glm4_moe_lite", **_T, **_MLA, "head_dim": 4}),
    ("glm-lite-no-q-lora", {"model_type": "glm4_moe_lite", **_T, **_MLA, "q_lora_rank": None, "n_shared_experts": 2}),
    ("v32-bias-mtp", {"model_type": "deepseek_v32", **_T, **_MLA, **_DSA, "attention_bias": True,
                      "first_k_dense_replace": 2, "num_nextn_predict_layers": 1}),
    ("dsa-shared-pattern", {"model_type": "glm_moe_dsa", **_T, **_MLA, **_DSA, "index_topk_pattern": "FSSFS"}),
    ("dsa-freq", {"model_type": "glm_moe_dsa", **_T, **_MLA, **_DSA, "index_topk_freq": 2, "index_skip_topk_offset": 2}),
    ("minimal", {"model_type": "mimo_v2_flash", **_T, "num_hidden_layers": 7, "num_key_value_heads": 1,
                 "head_dim": 24, "v_head_dim": 16, "moe_intermediate_size": 32, "n_routed_experts": 4,
                 "num_experts_per_tok": 2, "sliding_window": 8}),
    ("mimo-bias-pattern-window-size", {"model_type": "mimo_v2_flash", **_T, "hidden_size": 48, "num_hidden_layers": 4,
                                       "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 12,
                                       "v_head_dim": 12, "moe_intermediate_size": 20, "n_routed_experts": 3,
                                       "num_experts_per_tok": 1, "attention_bias": True, "sliding_window_size": 4,
                                       "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                                                       "sliding_attention"],
                                       "mlp_layer_types": ["sparse", "dense", "sparse", "dense"], "tie_word_embeddings": True}),
    ("mimo-hub-keys", {"model_type": "mimo_v2_flash", **_T, "num_hidden_layers": 6, "num_key_value_heads": 2,
                       "head_dim": 12, "v_head_dim": 8, "moe_intermediate_size": 16, "num_local_experts": 4,
                       "num_experts_per_tok": 2, "sliding_window": 8, "sliding_window_size": 8,
                       "hybrid_layer_pattern": [0, 1, 1, 1, 1, 0], "moe_layer_freq": [0, 1, 1, 1, 1, 1],
                       "swa_num_key_value_heads": 4, "add_swa_attention_sink_bias": True,
                       "add_full_attention_sink_bias": False}),
]  # fmt: skip
