"""DeepSeek-V4 (`deepseek_v4`) from a Hugging Face config.json, as transformers 5.23 reads it
(models/deepseek_v4/configuration_deepseek_v4.py DeepseekV4Config, modeling_deepseek_v4.py).

What is plain goes to the usual fields (n_heads, head_dim, the MoE, the sliding window, sinks); what is
DeepSeek-V4's own goes to `ModelConfig.deepseek_v4` (model/config.py DeepseekV4Blocks; the parameters:
estimators/deepseek_v4.py, docs/formulas.md §5.16). The config's `__post_init__` is followed:

- `layer_types` (sliding_attention / compressed_sparse_attention / heavily_compressed_attention), else
  the legacy per-layer `compress_ratios` (0, 4, 128 name the three kinds), else two HCA layers then CSA
  and HCA alternating; truncated to num_hidden_layers.
- `compress_rates` (a dict per kind; default CSA 4, HCA 128), the legacy `compress_rate_csa` /
  `compress_rate_hca` folded in.
- `mlp_layer_types` (hash_moe / moe), else the first `num_hash_layers` (default 3) hash_moe.
- one K/V head whatever num_key_value_heads says (DeepseekV4Attention builds kv_proj D x head_dim);
  the shared expert is one MLP of moe_intermediate_size whatever n_shared_experts says (DeepseekV4MLP
  reads `intermediate_size`, mapped to moe_intermediate_size by the config's attribute_map).
"""

from __future__ import annotations

from typing import Any

from transformer_calc.sources.hf_base import Family, Reader, gated_mlp_kind

SLIDING, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"
COMPRESS_RATIO_TO_TYPE = {0: SLIDING, 4: CSA, 128: HCA}  # configuration_deepseek_v4.py _COMPRESS_RATIO_TO_LAYER_TYPE
MLP_TYPES = ("hash_moe", "moe")
DEFAULT_NUM_HASH_LAYERS = 3  # DeepseekV4Config.default_num_hash_layers
DEFAULT_COMPRESS_RATES = {CSA: 4, HCA: 128}  # DeepseekV4Config.default_compress_rates
MAX_LAYERS = 4096  # the per-layer lists are read one entry a layer

DEEPSEEK_V4_DEFAULTS: dict[str, Any] = {  # configuration_deepseek_v4.py DeepseekV4Config
    "vocab_size": 129280, "hidden_size": 4096, "moe_intermediate_size": 2048, "num_hidden_layers": 43,
    "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "q_lora_rank": 1024,
    "num_experts_per_tok": 6, "n_routed_experts": 256, "n_shared_experts": 1, "max_position_embeddings": 1048576,
    "layer_types": None, "compress_rates": None, "mlp_layer_types": None, "hc_mult": 4, "sliding_window": 128,
    "o_groups": 8, "o_lora_rank": 1024, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
    "hidden_act": "silu", "tie_word_embeddings": False, "mlp_bias": False, "attention_dropout": 0.0,
    "compress_ratios": None, "compress_rate_csa": None, "compress_rate_hca": None, "num_hash_layers": None,
}  # fmt: skip


def _kinds(c: Reader, L: int) -> list[str]:
    given, legacy = c.values.get("layer_types"), c.values.get("compress_ratios")
    if given is None and legacy is not None:
        if not isinstance(legacy, list) or any(isinstance(r, bool) or r not in COMPRESS_RATIO_TO_TYPE for r in legacy):
            raise c._bad("compress_ratios", "a list of 0, 4 or 128 per layer (sliding, CSA, HCA)")
        given = [COMPRESS_RATIO_TO_TYPE[r] for r in legacy]
    if given is None:  # 2 HCA layers, then CSA and HCA alternating (the V4-Pro default)
        given = [HCA] * min(L, 2) + [CSA if i % 2 else HCA for i in range(max(L - 2, 0))]
    if not isinstance(given, list) or len(given[:L]) != L or any(t not in (SLIDING, CSA, HCA) for t in given[:L]):
        raise c._bad("layer_types", f"a list of at least {L} entries of {SLIDING}, {CSA} or {HCA}")
    return list(given[:L])


def _mlp_kinds(c: Reader, L: int) -> list[str]:
    given = c.values.get("mlp_layer_types")
    if given is None:
        n_hash = c.opt_int("num_hash_layers")
        n_hash = DEFAULT_NUM_HASH_LAYERS if n_hash is None else n_hash
        if n_hash < 0:
            raise c._bad("num_hash_layers", "a whole number >= 0")
        given = ["hash_moe"] * min(L, n_hash) + ["moe"] * max(0, L - n_hash)
    if not isinstance(given, list) or len(given[:L]) != L or any(t not in MLP_TYPES for t in given[:L]):
        raise c._bad("mlp_layer_types", f"a list of at least {L} entries of hash_moe or moe")
    return list(given[:L])


def _rates(c: Reader) -> dict[str, int]:
    rates = c.values.get("compress_rates")
    rates = dict(DEFAULT_COMPRESS_RATES) if rates is None else rates
    if not isinstance(rates, dict):
        raise c._bad("compress_rates", "a mapping of layer type to compression rate")
    rates = dict(rates)
    for key, kind in (("compress_rate_csa", CSA), ("compress_rate_hca", HCA)):
        if c.values.get(key) is not None:
            rates[kind] = c.int(key)
    return rates


def _deepseek_v4(c: Reader) -> dict[str, Any]:
    """modeling_deepseek_v4.py DeepseekV4ForCausalLM (see the module docstring)."""
    L = c.int("num_hidden_layers")
    if not 0 < L <= MAX_LAYERS:
        raise c._bad("num_hidden_layers", f"a whole number from 1 to {MAX_LAYERS}")
    kinds, mlp_kinds, rates = _kinds(c, L), _mlp_kinds(c, L), _rates(c)
    csa = [i for i, t in enumerate(kinds) if t == CSA]
    hca = [i for i, t in enumerate(kinds) if t == HCA]
    for kind, ids in ((CSA, csa), (HCA, hca)):
        rate = rates.get(kind, 1)
        if ids and (isinstance(rate, bool) or not isinstance(rate, int) or rate < 1):
            raise c._bad("compress_rates", f"a whole number >= 1 for {kind} (its layers' compression rate)")
    E = c.int("n_routed_experts")
    F = c.int("moe_intermediate_size")
    spec: dict[str, Any] = c.shape() | {
        "n_kv_heads": 1,  # shared-KV MQA: kv_proj D x head_dim, read as key and value
        "head_dim": c.int("head_dim"),
        "d_ff": F,
        "moe_d_ff": F,
        "mlp": gated_mlp_kind(c, "hidden_act"),
        "max_seq_len": c.int("max_position_embeddings"),
        "positional": "rotary",
        "norm": "rmsnorm",
        "tied_embeddings": c.flag("tie_word_embeddings"),
        "bias": False,
        "mlp_bias": c.flag("mlp_bias"),  # the shared expert's only
        "n_experts": E,
        "experts_per_token": c.int("num_experts_per_tok"),
        "router": True,
        "shared_expert_d_ff": F,
        "attention_sinks": True,
        "attention_pattern": ["sliding"],  # every layer attends its window; CSA/HCA add compressed entries
        "sliding_window": c.int("sliding_window"),
        "deepseek_v4": {
            "hc_mult": c.int("hc_mult"), "q_lora_rank": c.int("q_lora_rank"), "o_groups": c.int("o_groups"),
            "o_lora_rank": c.int("o_lora_rank"), "csa_layer_ids": csa, "hca_layer_ids": hca,
            "csa_compress_rate": rates.get(CSA, DEFAULT_COMPRESS_RATES[CSA]),
            "hca_compress_rate": rates.get(HCA, DEFAULT_COMPRESS_RATES[HCA]),
            "index_n_heads": c.int("index_n_heads"), "index_head_dim": c.int("index_head_dim"),
            "index_topk": c.int("index_topk"),
            "hash_moe_layer_ids": [i for i, t in enumerate(mlp_kinds) if t == "hash_moe"],
        },
    }
    return spec


FAMILIES: dict[str, Family] = {
    "deepseek_v4": Family(
        _deepseek_v4, DEEPSEEK_V4_DEFAULTS, ("attention_dropout",),
        aliases={"num_local_experts": "n_routed_experts", "intermediate_size": "moe_intermediate_size"},
        late=frozenset({"num_local_experts", "intermediate_size"}),
    ),
}
