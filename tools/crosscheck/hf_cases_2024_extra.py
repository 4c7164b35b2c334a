"""Extra cross-check cases for qwen3, gemma2, gemma3_text, gemma3, phi3, olmo2, granite, cohere,
starcoder2, mistral3 (for tools/crosscheck/hf_params.py)."""
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


def _shape(r: R, model_type: str, *, head_dim: str = "maybe", divisible: bool = False) -> Cfg:
    kv = r.choice([1, 2, 3, 4])
    A = kv * r.choice([1, 2, 3])
    hd = r.choice([8, 12, 16, 24])
    cfg: Cfg = {
        "model_type": model_type,
        "vocab_size": r.randint(50, 3000),
        "num_hidden_layers": r.randint(1, 13),
        "num_attention_heads": A,
        "intermediate_size": r.randint(3, 301),
    }
    explicit = head_dim == "always" or (head_dim == "maybe" and r.random() < 0.5)
    cfg["hidden_size"] = A * hd if divisible or not explicit or r.random() < 0.5 else A * hd + r.choice([2, 6, 10])
    if explicit:
        cfg["head_dim"] = r.choice([8, 16, 20, 32])
    if r.random() < 0.8:
        cfg["num_key_value_heads"] = kv
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, max_position_embeddings=r.choice([64, 512, 4096]),
           attention_dropout=r.choice([0.0, 0.1]))
    return cfg


def _layer_types(r: R, L: int) -> list[str]:
    if r.random() < 0.5:  # periodic
        p = r.randint(1, 4)
        base = [r.choice(["full_attention", "sliding_attention"]) for _ in range(p)]
        return [base[i % p] for i in range(L)]
    return [r.choice(["full_attention", "sliding_attention"]) for _ in range(L)]


def gen_qwen3(r: R) -> Cfg:
    cfg = _shape(r, "qwen3", head_dim="always")
    cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])  # default 32 rarely divides A
    _maybe(r, cfg, attention_bias=r.random() < 0.5, hidden_act=r.choice(["silu", "gelu"]),
           use_sliding_window=r.random() < 0.5, sliding_window=r.choice([None, r.randint(2, 64)]),
           max_window_layers=r.randint(-1, 14))
    if r.random() < 0.3:
        cfg["layer_types"] = _layer_types(r, cfg["num_hidden_layers"])
    return cfg


def gen_gemma(model_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        cfg = _shape(r, model_type, head_dim="maybe", divisible=True)  # validate_architecture: D % A == 0
        cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])
        cfg.setdefault("head_dim", r.choice([8, 16]))  # default 256: too big for a tiny model
        _maybe(r, cfg, attention_bias=r.random() < 0.5, sliding_window=r.choice([None, r.randint(2, 64)]),
               hidden_activation=r.choice(["gelu_pytorch_tanh", "gelu", "silu"]), hidden_act="silu",
               query_pre_attn_scalar=32, final_logit_softcapping=None)
        if model_type == "gemma3_text" and r.random() < 0.5:
            cfg["sliding_window_pattern"] = r.randint(1, 8)
        if r.random() < 0.25:
            cfg["layer_types"] = _layer_types(r, cfg["num_hidden_layers"])
        return cfg

    return gen


def gen_phi3(r: R) -> Cfg:
    cfg = _shape(r, "phi3", head_dim="never")
    cfg["pad_token_id"] = 0  # the default 32000 must index the embedding
    _maybe(r, cfg, sliding_window=r.randint(2, 64), resid_pdrop=0.1, embd_pdrop=0.05,
           hidden_act=r.choice(["silu", "gelu_new"]))
    return cfg


def gen_olmo2(r: R) -> Cfg:
    cfg = _shape(r, "olmo2")
    _maybe(r, cfg, attention_bias=r.random() < 0.5)
    return cfg


def gen_granite(r: R) -> Cfg:
    cfg = _shape(r, "granite")
    _maybe(r, cfg, attention_bias=r.random() < 0.5, mlp_bias=r.random() < 0.5, embedding_multiplier=12.0,
           residual_multiplier=0.22, attention_multiplier=0.015625, logits_scaling=8.0)
    return cfg


def gen_cohere(r: R) -> Cfg:
    cfg = _shape(r, "cohere")
    _maybe(r, cfg, attention_bias=r.random() < 0.5, use_qk_norm=r.choice([True, False]), logit_scale=0.125)
    return cfg


def gen_starcoder2(r: R) -> Cfg:
    cfg = _shape(r, "starcoder2", head_dim="maybe")
    cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])  # default 2
    _maybe(r, cfg, use_bias=r.random() < 0.5, sliding_window=r.choice([None, r.randint(2, 64)]),
           hidden_act=r.choice(["gelu_pytorch_tanh", "gelu", "relu"]), residual_dropout=0.1,
           embedding_dropout=0.05)
    return cfg


def gen_wrapper(model_type: str, inner: Callable[[R], Cfg], text_type: str) -> Callable[[R], Cfg]:
    def gen(r: R) -> Cfg:
        text = inner(r)
        if r.random() < 0.5:
            text.pop("model_type")  # the wrapper's default text type
        else:
            text["model_type"] = text_type
        return {"model_type": model_type, "text_config": text}

    return gen


def gen_mistral(r: R) -> Cfg:
    cfg = _shape(r, "mistral")
    cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])
    _maybe(r, cfg, sliding_window=r.choice([None, r.randint(2, 64)]))
    return cfg


GENERATORS: dict[str, Callable[[R], Cfg]] = {
    "qwen3": gen_qwen3,
    "gemma2": gen_gemma("gemma2"),
    "gemma3_text": gen_gemma("gemma3_text"),
    "phi3": gen_phi3,
    "olmo2": gen_olmo2,
    "granite": gen_granite,
    "cohere": gen_cohere,
    "starcoder2": gen_starcoder2,
    "gemma3": gen_wrapper("gemma3", gen_gemma("gemma3_text"), "gemma3_text"),
    "mistral3": gen_wrapper("mistral3", gen_mistral, "mistral"),
}

_S = {"vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
      "intermediate_size": 688}  # fmt: skip
EDGE: list[tuple[str, Cfg]] = [
    # the transformers defaults (one or two layers)
    ("minimal", {"model_type": "qwen3", "num_hidden_layers": 1, "vocab_size": 500}),
    ("minimal", {"model_type": "gemma2", "num_hidden_layers": 2, "vocab_size": 500}),
    ("minimal", {"model_type": "gemma3_text", "num_hidden_layers": 1, "vocab_size": 500}),
    ("minimal", {"model_type": "phi3", "num_hidden_layers": 1}),
    ("minimal", {"model_type": "olmo2", "num_hidden_layers": 1}),
    ("minimal", {"model_type": "granite", "num_hidden_layers": 1}),
    ("minimal", {"model_type": "cohere", "num_hidden_layers": 1, "vocab_size": 500}),
    ("minimal", {"model_type": "starcoder2", "num_hidden_layers": 1}),
    ("minimal", {"model_type": "gemma3", "text_config": {"num_hidden_layers": 1, "vocab_size": 500}}),
    ("no-text-config", {"model_type": "gemma3"}),
    ("no-text-config", {"model_type": "mistral3"}),  # Mistral3Config's text_config init_kwargs
    # qwen3: head_dim != D/A, q/k norms per head, sliding layers from max_window_layers
    ("head-dim-bias", {"model_type": "qwen3", **_S, "num_key_value_heads": 2, "head_dim": 48,
                       "attention_bias": True}),
    ("sliding-from-layer-1", {"model_type": "qwen3", **_S, "num_hidden_layers": 3, "num_key_value_heads": 4,
                              "head_dim": 32, "use_sliding_window": True, "sliding_window": 64,
                              "max_window_layers": 1}),
    ("window-off", {"model_type": "qwen3", **_S, "num_key_value_heads": 4, "head_dim": 32,
                    "use_sliding_window": False, "sliding_window": 64, "max_window_layers": 0}),
    ("layer-types-given", {"model_type": "qwen3", **_S, "num_hidden_layers": 4, "num_key_value_heads": 4,
                           "head_dim": 32, "use_sliding_window": True, "sliding_window": 16,
                           "layer_types": ["sliding_attention", "full_attention"] * 2}),
    # gemma2 / gemma3: four norms, explicit patterns, no window, untied
    ("untied-no-window", {"model_type": "gemma2", **_S, "num_key_value_heads": 4, "head_dim": 32,
                          "sliding_window": None, "tie_word_embeddings": False}),
    ("odd-layers", {"model_type": "gemma2", **_S, "num_hidden_layers": 5, "num_key_value_heads": 1,
                    "head_dim": 16, "sliding_window": 8, "attention_bias": True}),
    ("pattern-4", {"model_type": "gemma3_text", **_S, "num_hidden_layers": 9, "num_key_value_heads": 2,
                   "head_dim": 16, "sliding_window_pattern": 4, "sliding_window": 32}),
    ("pattern-1-all-full", {"model_type": "gemma3_text", **_S, "num_key_value_heads": 2, "head_dim": 16,
                            "sliding_window_pattern": 1}),
    ("26-layers", {"model_type": "gemma3_text", **_S, "num_hidden_layers": 26, "hidden_size": 64,
                   "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16}),
    ("layer-types-aperiodic", {"model_type": "gemma3_text", **_S, "num_hidden_layers": 4, "num_key_value_heads": 2,
                               "head_dim": 16, "layer_types": ["full_attention", "sliding_attention",
                                                               "sliding_attention", "full_attention"]}),
    ("wrapper-untied", {"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", **_S,
                        "num_key_value_heads": 4, "head_dim": 32, "tie_word_embeddings": False}}),
    ("wrapper-gqa", {"model_type": "mistral3", "text_config": {**_S, "num_key_value_heads": 2,
                     "head_dim": 48, "sliding_window": 128}}),
    # phi3: fused qkv/gate_up, GQA, window on every layer
    ("gqa-window", {"model_type": "phi3", **_S, "num_key_value_heads": 2, "sliding_window": 47,
                    "pad_token_id": 0}),
    ("tied", {"model_type": "phi3", **_S, "tie_word_embeddings": True, "pad_token_id": 0}),
    # olmo2: full-width q/k norms with GQA and head_dim != D/A
    ("gqa-head-dim", {"model_type": "olmo2", **_S, "num_key_value_heads": 2, "head_dim": 48}),
    ("mqa-bias", {"model_type": "olmo2", **_S, "num_key_value_heads": 1, "attention_bias": True}),
    # granite: biases and multipliers
    ("biases", {"model_type": "granite", **_S, "num_key_value_heads": 4, "attention_bias": True,
                "mlp_bias": True, "embedding_multiplier": 12.0, "logits_scaling": 8.0}),
    ("mlp-bias-only", {"model_type": "granite", **_S, "mlp_bias": True, "tie_word_embeddings": True}),
    # cohere: parallel block, bias-free LayerNorms, q/k norms (A, hd) and (kv, hd)
    ("qk-norm-gqa", {"model_type": "cohere", **_S, "num_key_value_heads": 2, "use_qk_norm": True}),
    ("qk-norm-head-dim-untied", {"model_type": "cohere", **_S, "num_key_value_heads": 4, "head_dim": 24,
                                 "use_qk_norm": True, "tie_word_embeddings": False, "attention_bias": True}),
    # starcoder2: LayerNorm with bias even without linear biases, plain MLP
    ("no-bias-window", {"model_type": "starcoder2", **_S, "num_key_value_heads": 2, "use_bias": False,
                        "sliding_window": 32}),
    ("mha-untied", {"model_type": "starcoder2", **_S, "num_key_value_heads": 8, "tie_word_embeddings": False}),
]  # fmt: skip
REAL: list[tuple[str, Cfg, int | None]] = []
