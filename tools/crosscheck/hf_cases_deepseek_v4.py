"""Cross-check cases for DeepSeek-V4 (`deepseek_v4`; tools/crosscheck/hf_params.py merges them): random odd
shapes with every knob given with probability 1/2 (so that configuration_deepseek_v4.py's defaults and its
legacy keys, compress_ratios / num_hash_layers / compress_rate_csa, are exercised) and edge cases. The
published config (published_configs/deepseek-v4-flash-0731.json) is read with the others by hf_cases_2024.py."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

Cfg = dict[str, Any]
R = random.Random
KINDS = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")


def _maybe(r: R, cfg: Cfg, **knobs: Any) -> Cfg:
    for key, value in knobs.items():
        if r.random() < 0.5:
            cfg[key] = value
    return cfg


def gen(r: R) -> Cfg:
    L = r.randint(1, 6)
    A = r.choice([2, 4, 6])
    hd = r.choice([8, 12, 16])
    g = r.choice([d for d in (1, 2, 3, 4) if (A * hd) % d == 0])
    E = r.randint(2, 7)
    cfg: Cfg = {
        "model_type": "deepseek_v4",
        "vocab_size": r.randint(50, 500),
        "hidden_size": r.choice([24, 40, 64]),
        "num_hidden_layers": L,
        "num_attention_heads": A,
        "head_dim": hd,
        "q_lora_rank": r.randint(5, 40),
        "o_groups": g,
        "o_lora_rank": r.randint(3, 20),
        "n_routed_experts": E,
        "num_experts_per_tok": r.randint(1, E),
        "moe_intermediate_size": r.randint(3, 40),
        "index_n_heads": r.randint(1, 5),
        "index_head_dim": r.choice([4, 8, 12]),
        "hc_mult": r.randint(1, 5),
    }
    pick = r.random()
    if pick < 0.35:
        cfg["layer_types"] = [r.choice(KINDS) for _ in range(L)]
    elif pick < 0.6:  # the legacy per-layer form, one entry longer (MTP) as published
        cfg["compress_ratios"] = [r.choice([0, 4, 128]) for _ in range(L + 1)]
    if r.random() < 0.3:
        cfg["mlp_layer_types"] = [r.choice(["hash_moe", "moe"]) for _ in range(L)]
    _maybe(r, cfg, num_hash_layers=r.randint(0, L), compress_rates={"compressed_sparse_attention": r.randint(1, 9),
                                                                       "heavily_compressed_attention": r.randint(2, 40)},
           compress_rate_hca=r.randint(2, 30), mlp_bias=r.random() < 0.5, tie_word_embeddings=r.random() < 0.5,
           sliding_window=r.choice([4, 64]), num_key_value_heads=r.choice([1, 2]), n_shared_experts=r.choice([1, 2]),
           index_topk=r.randint(1, 64), max_position_embeddings=r.choice([128, 4096]))
    return cfg


GENERATORS: dict[str, Callable[[R], Cfg]] = {"deepseek_v4": gen}

_T: Cfg = {"model_type": "deepseek_v4", "vocab_size": 300, "hidden_size": 32, "num_attention_heads": 4, "head_dim": 8,
           "q_lora_rank": 16, "o_groups": 2, "o_lora_rank": 8, "n_routed_experts": 4, "num_experts_per_tok": 2,
           "moe_intermediate_size": 12, "index_n_heads": 2, "index_head_dim": 4}
EDGE: list[tuple[str, Cfg]] = [
    # the default schedule: 2 HCA layers, then CSA / HCA alternating; 3 hash layers; hc_mult 4
    ("minimal", {**_T, "num_hidden_layers": 5}),
    ("one-layer", {**_T, "num_hidden_layers": 1}),
    ("all-sliding", {**_T, "num_hidden_layers": 3, "layer_types": ["sliding_attention"] * 3}),
    ("all-csa-no-hash", {**_T, "num_hidden_layers": 3, "layer_types": ["compressed_sparse_attention"] * 3,
                         "num_hash_layers": 0}),
    # the published form: compress_ratios longer than the layers, legacy scalar rates folded in
    ("legacy-keys", {**_T, "num_hidden_layers": 4, "compress_ratios": [0, 4, 128, 4, 0, 0], "compress_rate_csa": 3,
                     "compress_rate_hca": 16, "num_hash_layers": 1}),
    # attribute_map names: intermediate_size -> moe_intermediate_size, num_local_experts -> n_routed_experts
    ("attribute-map-names", {**{k: v for k, v in _T.items() if k not in ("moe_intermediate_size", "n_routed_experts")},
                             "num_hidden_layers": 3, "intermediate_size": 10, "num_local_experts": 3}),
    ("tied-biased-shared-expert", {**_T, "num_hidden_layers": 2, "tie_word_embeddings": True, "mlp_bias": True}),
]
