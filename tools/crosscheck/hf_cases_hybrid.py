"""Cross-check cases for the hybrid families (tools/crosscheck/hf_params.py merges them): a random
generator per model_type (small odd shapes; each knob given with probability 1/2 so that the
transformers defaults are exercised) and edge cases. The published configs live in
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


def _deltanet_knobs(r: R) -> Cfg:
    hk = r.choice([1, 2, 3])
    return {
        "linear_num_key_heads": hk,
        "linear_num_value_heads": hk * r.choice([1, 2, 3]),
        "linear_key_head_dim": r.choice([8, 12, 16]),
        "linear_value_head_dim": r.choice([8, 20, 16]),
        "linear_conv_kernel_dim": r.choice([2, 3, 4]),
    }


def _qwen3_next_base(r: R, model_type: str) -> Cfg:
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2, 3])
    L = r.randint(1, 7)
    cfg: Cfg = {
        "model_type": model_type,
        "vocab_size": r.randint(50, 3000),
        "hidden_size": r.choice([32, 48, 72]),
        "num_hidden_layers": L,
        "num_attention_heads": A,
        "num_key_value_heads": kv,
        "head_dim": r.choice([8, 16, 24]),
        "max_position_embeddings": r.choice([128, 4096]),
        **_deltanet_knobs(r),
    }
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, attention_bias=r.random() < 0.5,
           attention_dropout=r.choice([0.0, 0.1]))
    if r.random() < 0.3:
        cfg["layer_types"] = [r.choice(["linear_attention", "full_attention"]) for _ in range(L)]
    else:
        _maybe(r, cfg, full_attention_interval=r.randint(1, 5))
    return cfg


def gen_qwen3_next(r: R) -> Cfg:
    cfg = _qwen3_next_base(r, "qwen3_next")
    n = r.choice([0, 2, 4, 6])
    cfg |= {"num_experts": n, "num_experts_per_tok": r.randint(1, max(n, 1)), "intermediate_size": r.randint(4, 200),
            "moe_intermediate_size": r.randint(4, 64), "shared_expert_intermediate_size": r.randint(4, 64)}
    _maybe(r, cfg, decoder_sparse_step=r.randint(1, 3),
           mlp_only_layers=sorted(r.sample(range(cfg["num_hidden_layers"]), r.randint(0, cfg["num_hidden_layers"]))))
    return cfg


def gen_qwen3_5(r: R) -> Cfg:
    text = _qwen3_next_base(r, "qwen3_5_text") | {"intermediate_size": r.randint(4, 200)}
    if r.random() < 0.5:
        return text
    text.pop("model_type")
    return {"model_type": "qwen3_5", "text_config": text}


def gen_qwen3_5_moe(r: R) -> Cfg:
    text = _qwen3_next_base(r, "qwen3_5_moe_text")
    n = r.choice([1, 2, 4, 6])
    text |= {"num_experts": n, "num_experts_per_tok": r.randint(1, n), "moe_intermediate_size": r.randint(4, 64),
             "shared_expert_intermediate_size": r.randint(4, 64)}
    if r.random() < 0.5:
        return text
    text.pop("model_type")
    return {"model_type": "qwen3_5_moe", "text_config": text}


# The hybrid model types: the FLOPs of their mixers are checked by flops_mixers.py (forward), their
# decode state by kv_cache.py; fine-tuning estimates refuse them (not modeled yet).
HYBRID_TYPES = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text", "bamba",
                          "granitemoehybrid", "falcon_h1", "nemotron_h", "lfm2", "jamba", "minimax",
                          "kimi_linear", "zamba2", "olmo_hybrid"})

def _mamba_knobs(r: R, D: int) -> Cfg:
    expand = r.choice([1, 2])
    inner = expand * D
    H = r.choice([h for h in (1, 2, 3, 4, 6, 8) if inner % h == 0])
    G = r.choice([g for g in (1, 2, 4) if H % g == 0])
    cfg: Cfg = {"mamba_n_heads": H, "mamba_n_groups": G, "mamba_d_state": r.choice([4, 8, 16]),
                "mamba_expand": expand, "mamba_d_conv": r.choice([2, 3, 4]), "mamba_chunk_size": r.choice([8, 16, 256])}
    return _maybe(r, cfg, mamba_d_head=inner // H, mamba_conv_bias=r.random() < 0.5, mamba_proj_bias=r.random() < 0.5)


def _mamba_base(r: R, model_type: str) -> Cfg:
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2])
    D = A * r.choice([8, 12, 16])
    cfg: Cfg = {"model_type": model_type, "vocab_size": r.randint(50, 3000), "hidden_size": D,
                "num_hidden_layers": r.randint(1, 6), "num_attention_heads": A, "num_key_value_heads": kv,
                "max_position_embeddings": r.choice([128, 4096]), **_mamba_knobs(r, D)}
    return _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, attention_bias=r.random() < 0.5,
                  attention_dropout=r.choice([0.0, 0.1]))


def gen_bamba(r: R) -> Cfg:
    cfg = _mamba_base(r, "bamba") | {"intermediate_size": r.randint(4, 200)}
    L = cfg["num_hidden_layers"]
    return _maybe(r, cfg, attn_layer_indices=sorted(r.sample(range(L), r.randint(0, L))), mlp_bias=r.random() < 0.5)


def gen_granitemoehybrid(r: R) -> Cfg:
    cfg = _mamba_base(r, "granitemoehybrid")
    n = r.choice([0, 2, 4])
    cfg |= {"num_local_experts": n, "num_experts_per_tok": r.randint(1, max(n, 1)), "intermediate_size": r.randint(4, 64),
            "shared_intermediate_size": r.randint(4, 96)}
    L = cfg["num_hidden_layers"]
    _maybe(r, cfg, layer_types=[r.choice(["mamba", "attention"]) for _ in range(L)],
           position_embedding_type=r.choice([None, "rope"]), embedding_multiplier=12.0, residual_multiplier=0.22)
    return cfg


def gen_falcon_h1(r: R) -> Cfg:
    cfg = _mamba_base(r, "falcon_h1") | {"intermediate_size": r.randint(4, 200)}
    if r.random() < 0.5:  # mamba_d_ssm: the inner width, a multiple of the heads
        H = cfg["mamba_n_heads"]
        cfg["mamba_d_ssm"] = H * r.choice([4, 8, 12])
        cfg.pop("mamba_d_head", None)
    else:
        cfg["mamba_d_ssm"] = None  # mamba_expand x hidden_size
    _maybe(r, cfg, mamba_rms_norm=r.random() < 0.5, projectors_bias=r.random() < 0.5, mlp_bias=r.random() < 0.5,
           head_dim=r.choice([8, 16]), key_multiplier=0.5, ssm_multipliers=[0.5, 1.0, 1.0, 2.0, 1.0])
    return cfg


def gen_nemotron_h(r: R) -> Cfg:
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2])
    D = r.choice([32, 48, 64])
    H = r.choice([2, 4, 6])
    G = r.choice([g for g in (1, 2) if H % g == 0])
    blocks = "".join(r.choice("M*-E") for _ in range(r.randint(1, 8)))
    cfg: Cfg = {"model_type": "nemotron_h", "vocab_size": r.randint(50, 3000), "hidden_size": D,
                "num_attention_heads": A, "num_key_value_heads": kv, "head_dim": r.choice([8, 16]),
                "intermediate_size": r.randint(4, 200), "mamba_num_heads": H, "mamba_head_dim": r.choice([4, 8]),
                "ssm_state_size": r.choice([4, 8, 16]), "n_groups": G, "chunk_size": r.choice([8, 16, 128]),
                "n_routed_experts": r.choice([2, 4]), "num_experts_per_tok": 1,
                "moe_intermediate_size": r.randint(4, 64), "moe_shared_expert_intermediate_size": r.randint(4, 64),
                "max_position_embeddings": r.choice([128, 4096])}
    if r.random() < 0.5:
        cfg["hybrid_override_pattern"] = blocks
    else:
        cfg["layers_block_type"] = [{"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}[ch] if r.random() < 0.3
                                    else {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}[ch]
                                    for ch in blocks]
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, conv_kernel=r.choice([2, 3, 4]),
           use_conv_bias=r.random() < 0.5, use_bias=r.random() < 0.5, num_hidden_layers=len(blocks))
    if "E" not in blocks:
        _maybe(r, cfg, mlp_bias=r.random() < 0.5)
    return cfg


def gen_lfm2(r: R) -> Cfg:
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2])
    L = r.randint(1, 7)
    cfg: Cfg = {"model_type": "lfm2", "vocab_size": r.randint(50, 3000), "hidden_size": A * r.choice([8, 12, 16]),
                "num_hidden_layers": L, "num_attention_heads": A, "num_key_value_heads": kv,
                "intermediate_size": r.randint(30, 400), "max_position_embeddings": r.choice([128, 4096])}
    if r.random() < 0.5:
        cfg["layer_types"] = [r.choice(["conv", "full_attention"]) for _ in range(L)]
    else:
        _maybe(r, cfg, full_attn_idxs=sorted(r.sample(range(L), r.randint(0, L))))
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, conv_bias=r.random() < 0.5, conv_L_cache=r.choice([2, 3, 4]),
           block_auto_adjust_ff_dim=r.random() < 0.5, block_ffn_dim_multiplier=r.choice([1.0, 1.5, 2]),
           block_multiple_of=r.choice([8, 32, 256]))
    return cfg


def gen_jamba(r: R) -> Cfg:
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2])
    period = r.randint(1, 5)
    cfg: Cfg = {"model_type": "jamba", "vocab_size": r.randint(50, 3000), "hidden_size": A * r.choice([8, 12, 16]),
                "num_hidden_layers": r.randint(1, 8), "num_attention_heads": A, "num_key_value_heads": kv,
                "intermediate_size": r.randint(4, 200), "attn_layer_period": period,
                "attn_layer_offset": r.randrange(period), "mamba_d_state": r.choice([4, 8, 16]),
                "max_position_embeddings": r.choice([128, 4096])}
    n = r.choice([1, 2, 4])
    e_period = r.randint(1, 3)
    cfg |= {"num_experts": n, "num_experts_per_tok": r.randint(1, n), "expert_layer_period": e_period,
            "expert_layer_offset": r.randrange(e_period)}
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, mamba_d_conv=r.choice([2, 3, 4]), mamba_expand=r.choice([1, 2]),
           mamba_dt_rank=r.choice(["auto", 3, 5]), mamba_conv_bias=r.random() < 0.5, mamba_proj_bias=r.random() < 0.5,
           attention_dropout=r.choice([0.0, 0.1]))
    return cfg


def gen_minimax(r: R) -> Cfg:
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2])
    L = r.randint(1, 6)
    n = r.choice([1, 2, 4])
    cfg: Cfg = {"model_type": "minimax", "vocab_size": r.randint(50, 3000), "hidden_size": A * r.choice([8, 12, 16]),
                "num_hidden_layers": L, "num_attention_heads": A, "num_key_value_heads": kv,
                "intermediate_size": r.randint(4, 200), "num_local_experts": n, "num_experts_per_tok": r.randint(1, n),
                "block_size": r.choice([4, 8, 256]), "max_position_embeddings": r.choice([128, 4096])}
    if r.random() < 0.5:
        cfg["layer_types"] = [r.choice(["linear_attention", "full_attention"]) for _ in range(L)]
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, head_dim=r.choice([8, 16]), attention_dropout=r.choice([0.0, 0.1]))
    return cfg


def gen_kimi_linear(r: R) -> Cfg:
    """Kimi Linear (modeling_kimi_linear.py): KDA layers, MLA full-attention layers, dense/MoE MLPs."""
    L = r.randint(1, 7)
    n = r.choice([2, 3, 4])  # KimiLinearTopkRouter takes the top 2 scores of each expert group: 2 or more
    A = r.choice([1, 2, 3, 4])
    # pad_token_id defaults to 163839 (Kimi's vocabulary): nn.Embedding refuses it in a small one
    cfg: Cfg = {"model_type": "kimi_linear", "pad_token_id": None, "vocab_size": r.randint(50, 3000), "hidden_size": r.choice([32, 48, 72]),
                "num_hidden_layers": L, "num_attention_heads": A,
                # eager MLA repeats the keys A // num_key_value_heads times (default 32): give A so that it runs
                "num_key_value_heads": A,
                "intermediate_size": r.randint(4, 200), "moe_intermediate_size": r.randint(4, 60),
                "num_local_experts": n, "num_experts_per_tok": r.randint(1, n),
                "kv_lora_rank": r.choice([8, 12, 16]), "qk_rope_head_dim": r.choice([4, 8]),
                "qk_nope_head_dim": r.choice([8, 12]), "v_head_dim": r.choice([8, 16]),
                "max_position_embeddings": r.choice([128, 4096])}
    _maybe(r, cfg, linear_num_heads=r.choice([1, 2, 3]), linear_head_dim=r.choice([8, 12, 16]),
           linear_conv_kernel_dim=r.choice([2, 3, 4]), q_lora_rank=r.choice([None, 8, 24]),
           n_shared_experts=r.choice([0, 1, 2]), tie_word_embeddings=r.random() < 0.5,
           attention_bias=r.random() < 0.5, attention_dropout=r.choice([0.0, 0.1]))
    if r.random() < 0.4:
        cfg["layer_types"] = [r.choice(["linear_attention", "full_attention"]) for _ in range(L)]
    k = r.randint(0, L)
    if r.random() < 0.3:
        cfg["mlp_layer_types"] = ["dense"] * k + ["sparse"] * (L - k)
    else:
        _maybe(r, cfg, first_k_dense_replace=k)
    return cfg


def gen_zamba2(r: R) -> Cfg:
    """Zamba2 (modeling_zamba2.py): Mamba-2 layers, a shared attention+MLP block at the hybrid layers
    (num_mem_blocks of them in turn), per-application adapters. The q/k/v adapters add a 2D-wide output
    to q, k and v: they only run when n_kv = A and A divides 2D, so they are drawn only then; the
    config refuses an odd head_dim (2D // A), used or not by RoPE."""
    D = r.choice([24, 32, 48])
    A = r.choice([a for a in (2, 3, 4, 6) if (2 * D // a) % 2 == 0])  # transformers' validate_rope: an even head_dim
    kv = r.choice([k for k in (1, 2, 3, A) if A % k == 0])
    expand = r.choice([1, 2])
    H = r.choice([h for h in (1, 2, 3, 4, 6, 8) if expand * D % h == 0])
    L = r.randint(1, 7)
    legacy = r.random() < 0.5  # mamba (the published files) or linear_attention
    types = [r.choice(["mamba" if legacy else "linear_attention", "hybrid"]) for _ in range(L)]
    cfg: Cfg = {"model_type": "zamba2", "vocab_size": r.randint(50, 3000), "hidden_size": D, "num_hidden_layers": L,
                "layers_block_type": types, "num_attention_heads": A, "num_key_value_heads": kv, "mamba_expand": expand,
                "n_mamba_heads": H, "mamba_ngroups": r.choice([g for g in (1, 2) if H % g == 0]),
                "mamba_d_state": r.choice([4, 8, 16]), "chunk_size": r.choice([8, 16, 256]),
                "max_position_embeddings": r.choice([128, 4096])}
    _maybe(r, cfg, intermediate_size=r.randint(4, 100), num_mem_blocks=r.randint(1, 3), adapter_rank=r.choice([2, 4, 8]),
           mamba_d_conv=r.choice([2, 3, 4]), add_bias_linear=r.random() < 0.5, tie_word_embeddings=r.random() < 0.5,
           hidden_act=r.choice(["gelu", "silu", "gelu_pytorch_tanh"]))
    if kv == A and 2 * D % A == 0:
        _maybe(r, cfg, use_shared_attention_adapter=True)
    _maybe(r, cfg, use_mem_rope=True)
    return cfg


def gen_olmo_hybrid(r: R) -> Cfg:
    """OLMo Hybrid (modular_olmo_hybrid.py): OLMo GDN layers (seven Linear modules), Olmo3 attention
    layers (full-width q/k norms), a SwiGLU MLP on every layer. The linear widths are given or left to
    the config's defaults (heads A, d_k = int(0.75·D / H_k), d_v = 2·d_k); both head counts or neither,
    so that the value heads stay a multiple of the key heads."""
    kv = r.choice([1, 2])
    A = kv * r.choice([1, 2, 3])
    L = r.randint(2, 7)
    cfg: Cfg = {"model_type": "olmo_hybrid", "pad_token_id": None, "vocab_size": r.randint(50, 3000),
                "hidden_size": r.choice([32, 48, 50, 72]), "num_hidden_layers": L, "num_attention_heads": A,
                "num_key_value_heads": kv, "intermediate_size": r.randint(4, 200),
                "max_position_embeddings": r.choice([128, 4096])}
    knobs = _deltanet_knobs(r)
    if r.random() < 0.5:
        cfg |= {k: knobs[k] for k in ("linear_num_key_heads", "linear_num_value_heads")}
    _maybe(r, cfg, **{k: knobs[k] for k in ("linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim")})
    _maybe(r, cfg, tie_word_embeddings=r.random() < 0.5, attention_bias=r.random() < 0.5, head_dim=r.choice([8, 12]),
           attention_dropout=r.choice([0.0, 0.1]), linear_allow_neg_eigval=r.random() < 0.5)
    if r.random() < 0.5:
        types = [r.choice(["linear_attention", "full_attention"]) for _ in range(L)]
        types[r.randrange(L)] = "linear_attention"  # validate_architecture: one of each kind at least
        types[(types.index("linear_attention") + 1) % L] = "full_attention"
        cfg["layer_types"] = types
    return cfg


def _own_stream(gen: Callable[[R], Cfg], seed: int) -> Callable[[R], Cfg]:
    """The generator on a random stream of its own (the shared one is left untouched), so that adding
    these types does not shift the draws, and the fixtures, of the types sorted after them."""
    rng = random.Random(seed)
    return lambda _shared: gen(rng)


GENERATORS: dict[str, Callable[[R], Cfg]] = {
    "qwen3_next": _own_stream(gen_qwen3_next, 22_1),
    "qwen3_5": _own_stream(gen_qwen3_5, 22_2),
    "qwen3_5_moe": _own_stream(gen_qwen3_5_moe, 22_3),
    "bamba": _own_stream(gen_bamba, 22_4),
    "granitemoehybrid": _own_stream(gen_granitemoehybrid, 22_5),
    "falcon_h1": _own_stream(gen_falcon_h1, 22_6),
    "nemotron_h": _own_stream(gen_nemotron_h, 22_7),
    "lfm2": _own_stream(gen_lfm2, 22_8),
    "jamba": _own_stream(gen_jamba, 22_9),
    "minimax": _own_stream(gen_minimax, 22_10),
    "kimi_linear": _own_stream(gen_kimi_linear, 22_11),
    "zamba2": _own_stream(gen_zamba2, 22_12),
    "olmo_hybrid": _own_stream(gen_olmo_hybrid, 35_1),
}

_S = {"vocab_size": 300, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
      "linear_key_head_dim": 16, "linear_value_head_dim": 24, "linear_conv_kernel_dim": 4}  # fmt: skip
EDGE: list[tuple[str, Cfg]] = [
    ("minimal", {"model_type": "qwen3_next", "num_hidden_layers": 2, "num_experts": 4, "num_experts_per_tok": 2,
                 "vocab_size": 500, "hidden_size": 64, "head_dim": 16}),
    ("minimal", {"model_type": "qwen3_5", "text_config": {"num_hidden_layers": 4, "vocab_size": 500}}),
    ("minimal", {"model_type": "qwen3_5_moe", "text_config": {"num_hidden_layers": 2, "num_experts": 4, "num_experts_per_tok": 3,
                                                              "vocab_size": 500}}),
    ("no-text-config", {"model_type": "qwen3_5"}),
    ("text-type", {"model_type": "qwen3_5_text", **_S, "intermediate_size": 96}),
    ("dense-no-experts", {"model_type": "qwen3_next", **_S, "num_experts": 0, "intermediate_size": 96}),
    ("sparse-step-2-mlp-only", {"model_type": "qwen3_next", **_S, "num_hidden_layers": 6, "num_experts": 4,
                                "num_experts_per_tok": 2, "decoder_sparse_step": 2, "mlp_only_layers": [1, 4],
                                "intermediate_size": 96, "moe_intermediate_size": 32,
                                "shared_expert_intermediate_size": 48}),
    ("all-linear", {"model_type": "qwen3_next", **_S, "num_experts": 4, "num_experts_per_tok": 1,
                    "layer_types": ["linear_attention"] * 4}),
    ("all-full-bias-tied", {"model_type": "qwen3_5_moe_text", **_S, "num_experts": 4, "num_experts_per_tok": 4, "attention_bias": True,
                            "tie_word_embeddings": True, "layer_types": ["full_attention"] * 4}),
    ("interval-3-odd-layers", {"model_type": "qwen3_5", "text_config": {**_S, "num_hidden_layers": 7,
                                                                        "full_attention_interval": 3,
                                                                        "intermediate_size": 50}}),
    ("aperiodic", {"model_type": "qwen3_5_moe", "text_config": {**_S, "num_hidden_layers": 5, "num_experts": 2, "num_experts_per_tok": 2,
                   "layer_types": ["full_attention", "linear_attention", "linear_attention", "full_attention",
                                   "linear_attention"]}}),
    ("minimal", {"model_type": "bamba", "num_hidden_layers": 2, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "mamba_n_heads": 8,
                 "mamba_d_state": 16, "attn_layer_indices": [1]}),
    ("minimal", {"model_type": "granitemoehybrid", "num_hidden_layers": 2, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "mamba_n_heads": 8, "mamba_d_state": 16, "intermediate_size": 32,
                 "shared_intermediate_size": 48}),
    ("legacy-names-dense", {"model_type": "granitemoehybrid", "num_hidden_layers": 4, "vocab_size": 300,
                            "hidden_size": 48, "num_attention_heads": 4, "num_key_value_heads": 1,
                            "mamba_n_heads": 4, "mamba_n_groups": 2, "mamba_d_state": 8, "mamba_d_head": 24,
                            "num_local_experts": 0, "shared_intermediate_size": 40, "mamba_proj_bias": True,
                            "layer_types": ["mamba", "attention", "mamba", "mamba"], "tie_word_embeddings": True}),
    ("odd-head-dim", {"model_type": "bamba", "num_hidden_layers": 3, "vocab_size": 300, "hidden_size": 50,
                      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 70, "mamba_n_heads": 5,
                      "mamba_d_state": 8, "mamba_conv_bias": False, "attn_layer_indices": [0, 2]}),
    ("minimal", {"model_type": "falcon_h1", "num_hidden_layers": 2, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "mamba_n_heads": 8,
                 "mamba_d_state": 16, "mamba_d_ssm": 64}),
    ("expand-norm-biases", {"model_type": "falcon_h1", "num_hidden_layers": 3, "vocab_size": 300, "hidden_size": 48,
                            "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
                            "intermediate_size": 70, "mamba_n_heads": 6, "mamba_n_groups": 2, "mamba_d_state": 8,
                            "mamba_d_ssm": None, "mamba_rms_norm": True, "projectors_bias": True,
                            "mamba_proj_bias": True, "mlp_bias": True, "attention_bias": True}),
    ("minimal", {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*E", "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
                 "mamba_num_heads": 8, "mamba_head_dim": 8, "n_groups": 2, "ssm_state_size": 16,
                 "n_routed_experts": 4, "moe_intermediate_size": 32, "moe_shared_expert_intermediate_size": 48}),
    ("legacy-mamba-names", {"model_type": "nemotron_h", "hybrid_override_pattern": "ME*EME", "vocab_size": 300,
                            "hidden_size": 48, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 24,
                            "mamba_num_heads": 4, "mamba_head_dim": 12, "mamba_n_groups": 4, "ssm_state_size": 8,
                            "mamba_d_conv": 3, "mamba_chunk_size": 16, "mamba_conv_bias": False, "use_bias": True,
                            "n_routed_experts": 3, "num_experts_per_tok": 2, "moe_intermediate_size": 20,
                            "moe_shared_expert_intermediate_size": 12, "num_hidden_layers": 99}),
    ("dense-mlp-bias", {"model_type": "nemotron_h", "layers_block_type": ["mamba", "mlp", "attention", "mlp"],
                        "vocab_size": 300, "hidden_size": 40, "num_attention_heads": 4, "num_key_value_heads": 2,
                        "head_dim": 10, "intermediate_size": 56, "mlp_bias": True, "mamba_num_heads": 5,
                        "mamba_head_dim": 8, "n_groups": 1, "ssm_state_size": 8}),
    ("minimal", {"model_type": "lfm2", "num_hidden_layers": 4, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 192,
                 "full_attn_idxs": [1, 3]}),
    ("legacy-names-head-dim", {"model_type": "lfm2", "num_hidden_layers": 3, "vocab_size": 300, "hidden_size": 50,
                               "num_attention_heads": 4, "num_key_value_heads": 2, "block_ff_dim": 100,
                               "tie_embedding": False, "conv_bias": True, "layer_types": ["conv", "full_attention", "conv"]}),
    ("minimal", {"model_type": "jamba", "num_hidden_layers": 4, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "num_experts": 4,
                 "attn_layer_period": 2, "attn_layer_offset": 1}),
    ("dense-offset-biases", {"model_type": "jamba", "num_hidden_layers": 5, "vocab_size": 300, "hidden_size": 48,
                             "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 70,
                             "num_experts": 3, "expert_layer_period": 3, "expert_layer_offset": 0,
                             "attn_layer_period": 3, "attn_layer_offset": 2, "mamba_proj_bias": True,
                             "mamba_dt_rank": 7, "mamba_d_state": 8}),
    ("minimal", {"model_type": "minimax", "num_hidden_layers": 4, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "num_local_experts": 4,
                 "block_size": 8}),
    ("head-dim-pattern", {"model_type": "minimax", "num_hidden_layers": 5, "vocab_size": 300, "hidden_size": 48,
                          "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 24, "intermediate_size": 40,
                          "num_local_experts": 3, "num_experts_per_tok": 2, "block_size": 4,
                          "layer_types": ["linear_attention"] * 3 + ["full_attention", "linear_attention"]}),
    ("minimal", {"model_type": "kimi_linear", "pad_token_id": 0, "num_hidden_layers": 5, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 96, "moe_intermediate_size": 24, "num_local_experts": 4,
                 "num_experts_per_tok": 2, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
                 "v_head_dim": 16, "linear_num_heads": 2, "linear_head_dim": 16}),
    ("checkpoint-names", {"model_type": "kimi_linear", "pad_token_id": None, "num_hidden_layers": 4, "vocab_size": 300, "hidden_size": 48,
                          "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 70,
                          "moe_intermediate_size": 20, "num_experts": 3, "num_experts_per_token": 2, "num_shared_experts": 2,
                          "first_k_dense_replace": 2, "q_lora_rank": 24, "kv_lora_rank": 12, "qk_rope_head_dim": 4,
                          "qk_nope_head_dim": 12, "v_head_dim": 8, "model_max_length": 4096,
                          "linear_attn_config": {"head_dim": 12, "num_heads": 3, "short_conv_kernel_size": 3,
                                                 "full_attn_layers": [2, 4], "kda_layers": [1, 3]}}),
    ("latent-moe", {"model_type": "nemotron_h", "hybrid_override_pattern": "M-ME*E", "vocab_size": 500,
                    "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                    "intermediate_size": 96, "mamba_num_heads": 8, "mamba_head_dim": 8, "n_groups": 2,
                    "ssm_state_size": 16, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                    "moe_shared_expert_intermediate_size": 48, "moe_latent_size": 24,
                    "time_step_limit": [0.0, float("inf")]}),
    ("latent-moe-wider-than-d-tied", {"model_type": "nemotron_h", "layers_block_type": ["moe", "mamba", "moe", "attention"],
                                      "vocab_size": 300, "hidden_size": 40, "num_attention_heads": 4,
                                      "num_key_value_heads": 1, "head_dim": 10, "intermediate_size": 56,
                                      "mamba_num_heads": 5, "mamba_head_dim": 8, "n_groups": 1, "ssm_state_size": 8,
                                      "n_routed_experts": 3, "num_experts_per_tok": 3, "moe_intermediate_size": 20,
                                      "moe_shared_expert_intermediate_size": 12, "moe_latent_size": 48,
                                      "tie_word_embeddings": True}),
    ("minimal", {"model_type": "olmo_hybrid", "pad_token_id": None, "num_hidden_layers": 4, "vocab_size": 500,
                 "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96}),
    ("gqa-widths-bias-tied", {"model_type": "olmo_hybrid", "pad_token_id": 0, **_S, "num_hidden_layers": 5,
                              "intermediate_size": 70, "attention_bias": True, "tie_word_embeddings": True,
                              "linear_allow_neg_eigval": False,
                              "layer_types": ["linear_attention", "full_attention", "linear_attention",
                                              "linear_attention", "full_attention"]}),
    ("one-layer-is-full", {"model_type": "olmo_hybrid", "pad_token_id": None, "num_hidden_layers": 3, "vocab_size": 300,
                           "hidden_size": 50, "num_attention_heads": 4, "num_key_value_heads": 2,
                           "intermediate_size": 40, "linear_num_key_heads": 2, "linear_num_value_heads": 2}),
    ("minimal", {"model_type": "zamba2", "num_hidden_layers": 4, "vocab_size": 500, "hidden_size": 64,
                 "num_attention_heads": 4, "n_mamba_heads": 4, "mamba_d_state": 16,
                 "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"]}),
    ("two-blocks-qkv-adapters-rope", {"model_type": "zamba2", "num_hidden_layers": 7, "vocab_size": 300,
                                      "hidden_size": 48, "num_attention_heads": 4, "n_mamba_heads": 6,
                                      "mamba_ngroups": 2, "mamba_d_state": 8, "intermediate_size": 80,
                                      "num_mem_blocks": 2, "adapter_rank": 4, "use_shared_attention_adapter": True,
                                      "use_mem_rope": True, "chunk_size": 16,
                                      "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba",
                                                            "hybrid"]}),
    ("more-blocks-than-uses-gqa-bias", {"model_type": "zamba2", "num_hidden_layers": 3, "vocab_size": 300,
                                        "hidden_size": 40, "num_attention_heads": 4, "num_key_value_heads": 2,
                                        "n_mamba_heads": 5, "mamba_d_state": 4, "num_mem_blocks": 3,
                                        "add_bias_linear": True, "tie_word_embeddings": False,
                                        "layers_block_type": ["hybrid", "linear_attention", "hybrid"]}),
    ("no-hybrid-layers", {"model_type": "zamba2", "num_hidden_layers": 2, "vocab_size": 300, "hidden_size": 32,
                          "num_attention_heads": 2, "n_mamba_heads": 2, "mamba_d_state": 4,
                          "layers_block_type": ["mamba", "mamba"]}),
]  # fmt: skip
