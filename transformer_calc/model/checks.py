"""A model spec's defaults and cross-field checks, run once on the raw mapping before pydantic
validates it (`fill_defaults`, called by `ModelConfig`): each check names the field, the value and
the fix.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from transformer_calc.errors import clip
from transformer_calc.model.kinds import DEFAULT_EXPANSION, LayerAttention, NormKind
from transformer_calc.model.mixer_blocks import DELTANET_FIELDS, MAMBA2_FIELDS, check_mixer_kinds  # noqa: F401  (re-exported)
from transformer_calc.model.parse import int_or_none as _int_or_none


MAX_PATTERN = 4096  # longest attention pattern accepted (it repeats over the layers)


def fill_defaults(d: dict[str, Any]) -> dict[str, Any]:
    """Fill the defaults that depend on other fields; validate cross-field constraints.

    Raises ValueError with the value and the fix; the single-field checks (positivity, types)
    are pydantic's and run afterwards.

    Longer than 60 lines on purpose: one default per field, in the order the fields depend on each
    other (MLA's head_dim before D/A, d_ff before the MoE widths), which a split would hide.
    """
    d = dict(d)
    D, A = _int_or_none(d.get("d_model")), _int_or_none(d.get("n_heads"))
    _check_mla(d)  # MLA fixes head_dim (d_nope + d_rope) before the D/A default applies
    if d.get("head_dim") is None and D is not None and A is not None and A > 0:
        if D % A != 0:
            raise ValueError(
                f"d_model ({D}) must be divisible by n_heads ({A}); "
                "choose another n_heads or give head_dim explicitly"
            )
        d["head_dim"] = D // A
    if d.get("n_kv_heads") is None and A is not None:
        d["n_kv_heads"] = A
    kv = _int_or_none(d.get("n_kv_heads"))
    if A is not None and kv is not None and kv > 0 and A % kv != 0:
        raise ValueError(
            f"n_heads ({A}) must be divisible by n_kv_heads ({kv}); use a divisor of {A}"
        )
    E = d.get("expansion")
    if E is not None and (
        isinstance(E, bool) or not isinstance(E, (int, float)) or not math.isfinite(E) or E <= 0
    ):
        raise ValueError(f"expansion E ({clip(E)}) must be a positive finite number, e.g. 4 or 3.5")
    if d.get("d_ff") is None and D is not None:
        if E is None:
            d["d_ff"] = DEFAULT_EXPANSION * D
        else:
            width = Fraction(str(E)) * D
            if width.denominator != 1:
                raise ValueError(
                    f"expansion E ({E}) times d_model ({D}) is {float(width)}, not an integer; "
                    "give d_ff explicitly"
                )
            d["d_ff"] = int(width)
    elif E is not None and D is not None and _int_or_none(d.get("d_ff")) is not None:
        if isinstance(E, (int, float)) and Fraction(str(E)) * D != d["d_ff"]:
            raise ValueError(
                f"d_ff ({d['d_ff']}) disagrees with expansion E ({E}) x d_model ({D}); give one"
            )
    if d.get("norm_bias") is None:
        norm = d.get("norm", NormKind.layernorm)
        d["norm_bias"] = (norm.value if isinstance(norm, NormKind) else norm) == "layernorm"
    bias = d.get("bias", True)
    for key in ("qkv_bias", "attn_out_bias", "mlp_bias"):
        if d.get(key) is None:
            d[key] = bias
    if d.get("moe_d_ff") is None and d.get("d_ff") is not None:
        d["moe_d_ff"] = d["d_ff"]
    _check_pattern(d)
    _check_dsa(d)
    _check_shared_blocks(d)
    n_exp, k_exp = _int_or_none(d.get("n_experts")), _int_or_none(d.get("experts_per_token"))
    if d.get("moe_latent_dim") is not None and not ((n_exp or 1) > 1 or d.get("router")):
        raise ValueError(f"moe_latent_dim ({clip(d['moe_latent_dim'])}) needs a mixture of experts; "
                         "set n_experts too (or drop it)")
    if d.get("router") is None:
        d["router"] = n_exp is not None and n_exp > 1
    _check_gemma4(d)
    _check_deepseek_v4(d)
    experts = 1 if n_exp is None else n_exp  # a dense model is one expert
    if k_exp is not None and k_exp > experts > 0:
        raise ValueError(
            f"experts_per_token ({k_exp}) exceeds n_experts ({experts}); use at most {experts}"
            + (" (the model is dense: set n_experts for a mixture of experts)" if experts == 1 else "")
        )
    return d


def _check_deepseek_v4(d: dict[str, Any]) -> None:
    """DeepSeek-V4's layer lists name layers of the model."""
    v4, L = d.get("deepseek_v4"), _int_or_none(d.get("n_layers"))
    if v4 is None or L is None:
        return
    get = v4.get if isinstance(v4, dict) else (lambda key, default=None: getattr(v4, key, default))
    for key in ("csa_layer_ids", "hca_layer_ids", "hash_moe_layer_ids"):
        ids = get(key, ()) or ()
        if isinstance(ids, (list, tuple)) and any(isinstance(i, int) and not 0 <= i < L for i in ids):
            raise ValueError(f"deepseek_v4.{key} ({clip(list(ids))}) holds a layer outside 0 .. n_layers - 1 ({L - 1}); "
                             "drop it or raise n_layers")
    n_exp = _int_or_none(d.get("n_experts"))
    if n_exp is None or n_exp < 2:
        raise ValueError("deepseek_v4 needs its mixture of experts: give n_experts (> 1), experts_per_token and moe_d_ff")


def _check_gemma4(d: dict[str, Any]) -> None:
    """Gemma 4's layer variants name what they vary."""
    L, shared = _int_or_none(d.get("n_layers")), _int_or_none(d.get("kv_shared_layers"))
    if L is not None and shared is not None and shared >= L > 0:
        raise ValueError(f"kv_shared_layers ({shared}) must be below n_layers ({L}): the first layer computes "
                         f"its own K/V; use at most {L - 1}")
    if d.get("kv_shared_double_mlp") is True and not shared:
        raise ValueError("kv_shared_double_mlp widens the MLP of the kv-shared layers: give kv_shared_layers too (or drop it)")
    if d.get("per_layer_vocab_size") is not None and not _int_or_none(d.get("per_layer_input_dim")):
        raise ValueError("per_layer_vocab_size sizes the per-layer embedding table: give per_layer_input_dim too (or drop it)")
    kv, A = _int_or_none(d.get("full_kv_heads")), _int_or_none(d.get("n_heads"))
    if kv is not None and A is not None and kv > 0 and A % kv:
        raise ValueError(f"n_heads ({A}) must be divisible by full_kv_heads ({kv}); use a divisor of {A}")
    if d.get("router_scales") is True and d.get("router") is not True:
        raise ValueError("router_scales scales a MoE router: give n_experts > 1 or router true too (or drop it)")
    if (d.get("kv_lora_rank") is not None and (d.get("full_head_dim") is not None or d.get("full_kv_heads") is not None
                                               or d.get("full_k_eq_v") is True or shared)):
        raise ValueError("full_head_dim, full_kv_heads, full_k_eq_v and kv_shared_layers vary standard attention; "
                         "they do not apply to multi-head latent attention (kv_lora_rank): drop them")


_MLA_KEYS = ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _check_mla(d: dict[str, Any]) -> None:
    """MLA: kv_lora_rank with its three head widths; head_dim is the q/k head (nope + rope)."""
    if d.get("kv_lora_rank") is None:
        # v_head_dim alone is a plain attention's value head width (MiMo-V2-Flash)
        extra = [k for k in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim") if d.get(k) is not None]
        if extra:
            raise ValueError(
                f"{extra[0]} ({clip(d[extra[0]])}) is a multi-head latent attention width; "
                "give kv_lora_rank too (or drop it)"
            )
        return
    missing = [k for k in _MLA_KEYS if d.get(k) is None]
    if missing:
        raise ValueError(f"multi-head latent attention (kv_lora_rank) needs {', '.join(missing)}; give them")
    nope, rope = _int_or_none(d["qk_nope_head_dim"]), _int_or_none(d["qk_rope_head_dim"])
    if nope is not None and rope is not None:
        hd = _int_or_none(d.get("head_dim"))
        if d.get("head_dim") is not None and hd is not None and hd != nope + rope:
            raise ValueError(
                f"head_dim ({hd}) must equal qk_nope_head_dim + qk_rope_head_dim ({nope + rope}) "
                "under multi-head latent attention; drop head_dim"
            )
        d["head_dim"] = nope + rope
    if d.get("n_kv_heads") is not None and d.get("n_kv_heads") != d.get("n_heads"):
        raise ValueError(
            f"n_kv_heads ({clip(d['n_kv_heads'])}) does not apply to multi-head latent attention "
            "(every head reads the shared latent); drop n_kv_heads"
        )


_DSA_KEYS = ("index_topk", "index_n_heads", "index_head_dim")


def _check_dsa(d: dict[str, Any]) -> None:
    """DSA (modeling_deepseek_v32.py DeepseekV32Indexer): the indexer's query comes from MLA's
    q_lora_rank latent (wq_b), so it needs MLA with a query low rank, and all three widths."""
    given = [k for k in _DSA_KEYS if d.get(k) is not None]
    if not given:
        if d.get("index_shared_layer_ids"):
            raise ValueError("index_shared_layer_ids needs DeepSeek Sparse Attention; give index_topk too (or drop it)")
        return
    missing = [k for k in _DSA_KEYS if d.get(k) is None]
    if missing:
        raise ValueError(f"DeepSeek Sparse Attention ({given[0]}) needs {', '.join(missing)}; give them")
    if d.get("kv_lora_rank") is None or d.get("q_lora_rank") is None:
        raise ValueError(
            "DeepSeek Sparse Attention (index_topk) is built on multi-head latent attention with a query low rank: "
            "give kv_lora_rank and q_lora_rank (the indexer's wq_b reads the q_lora_rank latent)"
        )
    rope = _int_or_none(d.get("qk_rope_head_dim"))
    width = _int_or_none(d.get("index_head_dim"))
    if rope is not None and width is not None and width < rope:
        raise ValueError(
            f"index_head_dim ({width}) must be >= qk_rope_head_dim ({rope}): the indexer rotates that many of its dims"
        )


MAX_SHARED_BLOCK_LAYERS = 65536  # most applications of a shared block (its layer list is read one by one)


def _check_shared_blocks(d: dict[str, Any]) -> None:
    """Shared transformer blocks (Zamba2, estimators/shared_block.py): the layers they run at are
    distinct layer indices in increasing order; the adapter fields need them."""
    ids = d.get("shared_block_layer_ids")
    if not ids:
        for key in ("shared_block_adapter_rank", "shared_attention_adapters"):  # (shared_blocks_tied: a default True)
            if d.get(key):
                raise ValueError(f"{key} ({clip(d[key])}) needs shared blocks; give shared_block_layer_ids too (or drop it)")
        return
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise ValueError(f"shared_block_layer_ids ({clip(ids)}) must be a list of layer indices, e.g. [5, 11]")
    if len(ids) > MAX_SHARED_BLOCK_LAYERS:
        raise ValueError(f"shared_block_layer_ids has {len(ids)} entries; give at most {MAX_SHARED_BLOCK_LAYERS}")
    L = _int_or_none(d.get("n_layers"))
    bad = next((i for i in ids if isinstance(i, bool) or not isinstance(i, int) or i < 0
                or (L is not None and i >= L)), None)
    if bad is not None:
        raise ValueError(
            f"shared_block_layer_ids holds {clip(bad)}; each entry is a layer index from 0 to n_layers - 1 ({clip(L)})"
        )
    if any(b <= a for a, b in zip(ids, ids[1:])):
        raise ValueError(f"shared_block_layer_ids ({clip(list(ids))}) must be distinct and increasing; sort it")
    if d.get("shared_attention_adapters") and d.get("shared_block_adapter_rank") is None:
        raise ValueError("shared_attention_adapters needs shared_block_adapter_rank (the adapters' rank); give it")


def _check_pattern(d: dict[str, Any]) -> None:
    """The attention pattern names the window sizes it needs, and each mixer kind in it the fields its
    declaration requires (model/mixer_blocks.py); each check names the field, the value and the fix."""
    pat = d.get("attention_pattern")
    if pat is None:
        for key in ("sliding_kv_heads", "sliding_sinks"):
            if d.get(key):
                raise ValueError(f"{key} ({clip(d[key])}) needs sliding layers in attention_pattern; drop it or add them")
        return
    if isinstance(pat, (str, bytes)) or not isinstance(pat, (list, tuple)):
        raise ValueError(
            f"attention_pattern ({clip(pat)}) must be a list of {'/'.join(k.value for k in LayerAttention)}, e.g. [sliding, full]"
        )
    if not pat or len(pat) > MAX_PATTERN:
        raise ValueError(
            f"attention_pattern has {len(pat)} entries; give 1 to {MAX_PATTERN} (it repeats over the layers)"
        )
    bad = next((k for k in pat if not isinstance(k, (str, LayerAttention))), None)
    if bad is not None:
        raise ValueError(f"attention_pattern holds {clip(bad)}; each entry is full, sliding or chunked")
    kinds = {k.value if isinstance(k, LayerAttention) else k for k in pat}
    check_mixer_kinds(d, kinds)  # each mixer kind's fields and their checks (model/mixer_blocks.py)
    if "none" in kinds and d.get("one_mixer_per_layer") is not True:
        raise ValueError("attention_pattern has none layers (no sequence mixer) but one_mixer_per_layer is not set; set it")
    if d.get("one_mixer_per_layer") is True:
        L = _int_or_none(d.get("n_layers"))
        if L is not None and L > MAX_BLOCK_LAYERS:
            raise ValueError(f"n_layers ({L}) is above {MAX_BLOCK_LAYERS}, the most a one_mixer_per_layer model takes")
    for key in ("sliding_kv_heads", "sliding_sinks"):
        if d.get(key) and "sliding" not in kinds:
            raise ValueError(f"{key} ({clip(d[key])}) needs sliding layers in attention_pattern; drop it or add them")
    skv, A = _int_or_none(d.get("sliding_kv_heads")), _int_or_none(d.get("n_heads"))
    if skv and A and A % skv:
        raise ValueError(f"n_heads ({A}) must be divisible by sliding_kv_heads ({skv}); use a divisor of {A}")
    if d.get("sliding_sinks") and d.get("attention_sinks"):
        raise ValueError("sliding_sinks (sinks on the sliding layers only) and attention_sinks (every layer) "
                         "exclude one another; keep one")
    if "sliding" in kinds and d.get("sliding_window") is None:
        raise ValueError("attention_pattern has sliding layers but sliding_window is not given; give it")
    if "chunked" in kinds and d.get("attention_chunk_size") is None:
        raise ValueError("attention_pattern has chunked layers but attention_chunk_size is not given; give it")


MAX_BLOCK_LAYERS = 65536  # most layers of a one_mixer_per_layer model (its MoE layers are counted one by one)
