"""Hugging Face config.json import for the attention-only families of 2025-26 (issue 22).

Same contract as `transformer_calc.sources.hf` and `hf_2024`: the spec's parameter count equals what
transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py), and the layer pattern is
what its cache layers follow (tools/crosscheck/kv_cache.py). Each builder cites the modeling file it
mirrors; the defaults are the field defaults of `models/<type>/configuration_<type>.py`.

New parts, each counted exactly: DeepSeek Sparse Attention's lightning indexer (deepseek_v32,
glm_moe_dsa: `index_topk`, `index_n_heads`, `index_head_dim`, GLM-5's shared-indexer layers),
squared-ReLU MLPs (arcee plain, bitnet gated), BitNet's sub-norms, Apertus's xIELU activation (two
learned scalars per MLP), ERNIE 4.5's e_score_correction_bias (a parameter there, counted as a
router bias). Per-layer MLP kinds given as `mlp_layer_types` ("dense"/"sparse") become
first_dense_layers + dense_layer_ids.
"""

from __future__ import annotations

from typing import Any

from transformer_calc.sources.hf_base import (
    LLAMA_DEFAULTS,
    Family,
    Reader,
    gated_mlp_kind,
    plain_mlp_kind,
    rotary_common,
)
from transformer_calc.sources.hf_2024 import MAX_DERIVED_LAYERS, mla_spec
from transformer_calc.sources.hf_2024 import given_or as _given_or
from transformer_calc.sources.hf_2024 import layer_pattern as _pattern
from transformer_calc.sources.hf_2024 import mtp_spec as _mtp
from transformer_calc.sources.hf_2024 import periodic as _periodic
from transformer_calc.sources.hf_2024 import refuse_long_layer_list as _too_many


def _gated(c: Reader, key: str = "hidden_act") -> str:
    """Gated MLP kind: silu -> swiglu, gelu* -> geglu, relu2 (squared ReLU on the gate) -> relu2_glu."""
    if c.values.get(key) == "relu2":
        c.activation = "relu2"
        return "relu2_glu"
    return gated_mlp_kind(c, key)


def _plain(c: Reader, key: str = "hidden_act") -> str:
    """Plain MLP kind (up, down): relu2, xielu, or relu / gelu*."""
    act = c.values.get(key)
    if act in ("relu2", "xielu"):
        c.activation = act
        return str(act)
    return plain_mlp_kind(c, key)


def _head_dim_or_floor(c: Reader, spec: dict[str, Any]) -> dict[str, Any]:
    """`head_dim` None -> hidden_size // num_attention_heads (the config classes' __post_init__):
    left for ModelConfig to derive (D/A) when A divides D, pinned to the floor otherwise."""
    D, A = spec["d_model"], spec["n_heads"]
    if spec.get("head_dim") is None and A > 0 and D % A:
        spec["head_dim"] = D // A
    return spec


# ---------------------------------------------------------------------------- dense families
def _olmo3(c: Reader) -> dict[str, Any]:
    """modeling_olmo3.py: OLMo-2's block (post-attention and post-feedforward RMSNorms, q_norm over
    A·h_d and k_norm over n_kv·h_d, q/k/v/o bias=attention_bias, SwiGLU); layers slide except every
    4th (configuration_olmo3.py layer_types), window sliding_window."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act"), "qk_norm": True,
                                                   "qk_norm_scope": "full"}
    L = spec["n_layers"]
    period = ["sliding_attention"] * 3 + ["full_attention"]
    return spec | _pattern(c, _given_or(c, lambda: _periodic(L, period)), L)


def _smollm3(c: Reader) -> dict[str, Any]:
    """modeling_smollm3.py: Llama's layout (attention_bias, mlp_bias), NoPE on every
    no_rope_layer_interval-th layer (no parameters); configuration_smollm3.py: a layer slides when
    use_sliding_window, sliding_window is set and it is a NoPE layer (no_rope_layers[i] == 0)."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, c.flag("mlp_bias")) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    L = spec["n_layers"]
    sliding = c.flag("use_sliding_window") and c.opt_int("sliding_window") is not None
    if c.values.get("layer_types") is None and not sliding:
        return spec
    interval = c.int("no_rope_layer_interval")
    if interval < 1 or interval > MAX_DERIVED_LAYERS:
        raise c._bad("no_rope_layer_interval", f"a whole number from 1 to {MAX_DERIVED_LAYERS}")
    no_rope = c.values.get("no_rope_layers")

    def derived() -> list[str]:
        if no_rope is not None:
            if not isinstance(no_rope, list) or len(no_rope) != L:
                raise c._bad("no_rope_layers", f"a list of {L} flags (1: RoPE, 0: NoPE)")
            return ["sliding_attention" if not flag else "full_attention" for flag in no_rope]
        period = ["full_attention"] * (interval - 1) + ["sliding_attention"]  # (i+1) % interval == 0: NoPE
        return _periodic(L, period)

    return spec | _pattern(c, _given_or(c, derived), L)


def _seed_oss(c: Reader) -> dict[str, Any]:
    """modeling_seed_oss.py: q/k/v bias=attention_bias, o_proj bias=attention_out_bias, MLP
    bias=mlp_bias, head_dim (default 128; None -> D // A), SwiGLU, untied head."""
    spec = rotary_common(c, c.flag("attention_bias"), c.flag("attention_out_bias"), c.flag("mlp_bias"))
    return _head_dim_or_floor(c, spec | {"mlp": gated_mlp_kind(c, "hidden_act")})


def _ernie4_5(c: Reader) -> dict[str, Any]:
    """modeling_ernie4_5.py: q/k/v/o and gate/up/down bias=use_bias, head_dim (default 128),
    SwiGLU, tied head by default (lm_head without bias)."""
    bias = c.flag("use_bias")
    return _head_dim_or_floor(c, rotary_common(c, bias, bias, bias) | {"mlp": gated_mlp_kind(c, "hidden_act")})


def _apertus(c: Reader) -> dict[str, Any]:
    """modeling_apertus.py: q/k/v/o bias=attention_bias, per-head q_norm/k_norm (RMSNorm(head_dim)),
    a plain MLP up_proj/down_proj without biases whose activation is xIELU (XIELUActivation:
    alpha_p, alpha_n, two learned scalars per MLP) or any ACT2FN; attention_layernorm and
    feedforward_layernorm."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": _plain(c)}
    return spec | {"qk_norm": True, "qk_norm_scope": "head"}


def _arcee(c: Reader) -> dict[str, Any]:
    """modeling_arcee.py (AFM): Llama's attention (attention_bias), a plain MLP up_proj/down_proj
    (bias=mlp_bias) with ReLU² (hidden_act relu2) by default."""
    bias = c.flag("attention_bias")
    return rotary_common(c, bias, bias, c.flag("mlp_bias")) | {"mlp": _plain(c)}


def _bitnet(c: Reader) -> dict[str, Any]:
    """modeling_bitnet.py: q/k/v/o bias=attention_bias, attn_sub_norm RMSNorm(D) before o_proj, a
    gated MLP act(gate)·up with ReLU² (relu2) and ffn_sub_norm RMSNorm(intermediate_size) before
    down_proj, no MLP biases. BitNet b1.58's ternary weights are stored packed; the count is the
    parameters transformers builds."""
    bias = c.flag("attention_bias")
    return rotary_common(c, bias, bias, False) | {"mlp": _gated(c), "sub_norms": True}


def _ministral3(c: Reader) -> dict[str, Any]:
    """modeling_ministral3.py: Mistral's layout (every projection bias-free), head_dim (default
    128), a sliding window on every layer when sliding_window is set (mask and DynamicCache)."""
    spec = _head_dim_or_floor(c, rotary_common(c, False, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")})
    window = c.opt_int("sliding_window")
    if window:
        spec |= {"attention_pattern": ["sliding"], "sliding_window": window}
    return spec


def _exaone4(c: Reader) -> dict[str, Any]:
    """modeling_exaone4.py: bias-free q/k/v/o, per-head q_norm/k_norm, post-attention and
    post-feedforward RMSNorms (two per layer), SwiGLU; configuration_exaone4.py: layer i slides
    unless (i + 1) % sliding_window_pattern == 0 (no window: every layer full). A string pattern
    such as "LLLG" (EXAONE's own configs, which carry layer_types too) is read letter by letter."""
    spec = rotary_common(c, False, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    spec |= {"qk_norm": True, "qk_norm_scope": "head"}
    L = spec["n_layers"]
    window = c.opt_int("sliding_window")
    every = c.values.get("sliding_window_pattern")

    def derived() -> list[str]:
        if window is None:
            return _periodic(L, ["full_attention"])
        if isinstance(every, str) and every and set(every) <= {"L", "G"}:
            return _periodic(L, ["sliding_attention" if ch == "L" else "full_attention" for ch in every][:MAX_DERIVED_LAYERS])
        n = c.int("sliding_window_pattern")
        if not 1 <= n <= MAX_DERIVED_LAYERS:
            raise c._bad("sliding_window_pattern", f"a whole number from 1 to {MAX_DERIVED_LAYERS}")
        return _periodic(L, ["sliding_attention"] * (n - 1) + ["full_attention"])

    return spec | _pattern(c, _given_or(c, derived), L)


def _cohere2(c: Reader) -> dict[str, Any]:
    """modeling_cohere2.py: Cohere's block (one weight-only LayerNorm feeding attention and MLP in
    parallel, q/k/v/o bias=attention_bias, SwiGLU, tied head); head_dim is hidden_size // num_attention_heads unless the file
    gives one (configuration_cohere2.py sets it before the extra keys); layers slide except every
    sliding_window_pattern-th (a backward-compatible key, default 4)."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {
        "mlp": gated_mlp_kind(c, "hidden_act"), "norm": "layernorm", "norm_bias": False,
        "norms_per_layer": 1, "parallel_attn": True,
    }
    _head_dim_or_floor(c, spec)  # a head_dim in the file is set after __post_init__'s D // A: it wins
    L = spec["n_layers"]
    every = c.int("sliding_window_pattern") if "sliding_window_pattern" in c.values else 4
    if not 1 <= every <= MAX_DERIVED_LAYERS:
        raise c._bad("sliding_window_pattern", f"a whole number from 1 to {MAX_DERIVED_LAYERS}")
    period = ["sliding_attention"] * (every - 1) + ["full_attention"]
    return spec | _pattern(c, _given_or(c, lambda: _periodic(L, period)), L)


def _hunyuan_attention(c: Reader) -> dict[str, Any]:
    """modeling_hunyuan_v1_{dense,moe}.py: q/k/v/o bias=attention_bias, query_layernorm and
    key_layernorm RMSNorm(head_dim); head_dim None -> hidden_size // num_attention_heads (what
    `getattr(config, "head_dim", D // A)` means; transformers 5.23 fails on an explicit null)."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    return _head_dim_or_floor(c, spec | {"qk_norm": True, "qk_norm_scope": "head"})


# ---------------------------------------------------------------------------- MoE families
def _ernie4_5_moe(c: Reader) -> dict[str, Any]:
    """modeling_ernie4_5_moe.py: ERNIE 4.5's attention (use_bias); layer i is MoE when
    (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <= moe_layer_end_index (-1: the
    last layer); a MoE layer holds moe_num_experts bias-free experts of moe_intermediate_size, the
    router gate (E, D) and moe_statics.e_score_correction_bias (1, E) -- a parameter here, counted as
    the router's bias --, and moe_num_shared_experts x moe_intermediate_size shared; lm_head
    bias=use_bias."""
    bias = c.flag("use_bias")
    if bias:
        raise c._bad("use_bias", "false (tcalc cannot represent ERNIE's biased dense and shared MLPs beside "
                                 "bias-free experts)")
    spec = _head_dim_or_floor(c, rotary_common(c, False, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")})
    L = spec["n_layers"]
    n, F = c.int("moe_num_experts"), c.int("moe_intermediate_size")
    if n < 1:
        raise c._bad("moe_num_experts", "a whole number >= 1")
    step, start, end = c.int("moe_layer_interval"), c.int("moe_layer_start_index"), c.int("moe_layer_end_index")
    if step < 1:
        raise c._bad("moe_layer_interval", "a whole number >= 1")
    end = L - 1 if end == -1 else end
    after = [i for i in range(max(end + 1, 0), L) if (i + 1) % step == 0] if end + 1 < L else []
    if len(after) > MAX_DERIVED_LAYERS:
        raise c._bad("moe_layer_end_index", f"at most {MAX_DERIVED_LAYERS} MoE-step layers after it")
    spec |= {
        "n_experts": n, "experts_per_token": c.int("moe_k"), "router": True, "router_bias": True,
        "moe_d_ff": F, "shared_expert_d_ff": max(c.int("moe_num_shared_experts"), 0) * F,
        "first_dense_layers": min(max(start, 0), L), "moe_layer_step": step,
    }
    if after:
        spec["dense_layer_ids"] = after
    return spec


def _hunyuan_v1_moe(c: Reader) -> dict[str, Any]:
    """modeling_hunyuan_v1_moe.py: HunYuan's attention; every layer is MoE: num_experts experts of
    intermediate_size (HunYuanMoEV1Experts), the gate wg (E, D) without bias, and one shared_mlp of
    intermediate_size; moe_topk an int or one per layer."""
    spec = _hunyuan_attention(c)
    k = c.values.get("moe_topk")
    if isinstance(k, list) and k and all(isinstance(x, int) and not isinstance(x, bool) for x in k) and len(set(k)) == 1:
        k = k[0]
    if isinstance(k, bool) or not isinstance(k, int):
        raise c._bad("moe_topk", "a whole number (or a list of one repeated number: tcalc has one top-k)")
    F = spec["d_ff"]
    return spec | {"n_experts": c.int("num_experts"), "experts_per_token": k, "router": True, "moe_d_ff": F,
                   "shared_expert_d_ff": F}


def _minimax_m2(c: Reader) -> dict[str, Any]:
    """modeling_minimax_m2.py: bias-free q/k/v/o, q_norm over A·h_d and k_norm over n_kv·h_d (full
    width), head_dim (default 128); every layer MoE: num_local_experts experts of
    intermediate_size, the router gate (E, D) without bias (e_score_correction_bias is a buffer)."""
    spec = _head_dim_or_floor(c, rotary_common(c, False, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")})
    return spec | {
        "qk_norm": True, "qk_norm_scope": "full", "n_experts": c.int("num_local_experts"),
        "experts_per_token": c.int("num_experts_per_tok"), "router": True, "moe_d_ff": spec["d_ff"],
    }


def _mlp_layer_types(c: Reader, L: int, default_dense: int) -> dict[str, Any]:
    """first_dense_layers + dense_layer_ids from `mlp_layer_types` ("dense"/"sparse" per layer;
    default: the first `default_dense` layers dense)."""
    kinds = c.values.get("mlp_layer_types")
    if kinds is None:
        return {"first_dense_layers": min(max(default_dense, 0), L)}
    if not isinstance(kinds, list) or len(kinds) != L or any(k not in ("dense", "sparse") for k in kinds):
        raise c._bad("mlp_layer_types", f"a list of {L} 'dense' / 'sparse' entries")
    lead = next((i for i, k in enumerate(kinds) if k == "sparse"), L)
    out: dict[str, Any] = {"first_dense_layers": lead}
    rest = [i for i in range(lead, L) if kinds[i] == "dense"]
    if rest:
        out["dense_layer_ids"] = rest
    return out


def _mla(c: Reader) -> dict[str, Any]:
    """Multi-head latent attention as modeling_deepseek_v3.py builds it (q_a/q_b or q_proj,
    kv_a_proj_with_mqa, kv_b_proj, o_proj; q_a/kv_a RMSNorms; q_a, kv_a, o biases = attention_bias);
    shared by glm4_moe_lite, deepseek_v32 and glm_moe_dsa."""
    spec = mla_spec(c, c.flag("tie_word_embeddings"))
    n = c.int("n_routed_experts")
    if n < 1:
        raise c._bad("n_routed_experts", "a whole number >= 1 (tcalc has no MoE layer without routed experts)")
    F = c.int("moe_intermediate_size")
    return spec | {
        "n_experts": n, "experts_per_token": c.int("num_experts_per_tok"), "router": True,
        "moe_d_ff": F, "shared_expert_d_ff": c.int("n_shared_experts") * F,
    } | _mtp(c)


def _glm4_moe_lite(c: Reader) -> dict[str, Any]:
    """modeling_glm4_moe_lite.py (GLM-4.7-Flash): DeepSeek-V3's MLA and MoE (n_shared_experts x
    moe_intermediate_size shared, router (E, D)); mlp_layer_types (default: layer 0 dense)."""
    spec = _mla(c)
    return spec | _mlp_layer_types(c, spec["n_layers"], 1)


def _dsa(c: Reader, spec: dict[str, Any]) -> dict[str, Any]:
    """DeepSeek Sparse Attention's indexer widths (modeling_deepseek_v32.py DeepseekV32Indexer)."""
    if spec.get("q_lora_rank") is None:
        raise c._bad("q_lora_rank", "a whole number (the DSA indexer's wq_b reads the q_lora_rank latent)")
    out = {"index_topk": c.int("index_topk"), "index_n_heads": c.int("index_n_heads"),
           "index_head_dim": c.int("index_head_dim")}
    if out["index_head_dim"] < spec["qk_rope_head_dim"]:
        raise c._bad("index_head_dim", f"at least qk_rope_head_dim ({spec['qk_rope_head_dim']})")
    return out


def _deepseek_v32(c: Reader) -> dict[str, Any]:
    """modeling_deepseek_v32.py (DeepSeek-V3.2): DeepSeek-V3's MLA and MoE plus a lightning indexer
    in every layer (wq_b, wk, k_norm, weights_proj); mlp_layer_types, default the first
    first_k_dense_replace layers dense. head_dim is overwritten with qk_rope_head_dim."""
    spec = _mla(c)
    L = spec["n_layers"]
    return spec | _dsa(c, spec) | _mlp_layer_types(c, L, c.int("first_k_dense_replace"))


def _glm_moe_dsa(c: Reader) -> dict[str, Any]:
    """modeling_glm_moe_dsa.py (GLM-5): DeepSeek-V3.2's DSA with cross-layer top-k sharing: layer i
    runs its indexer when indexer_types[i] == "full" and reuses the previous layer's top-k (no
    indexer) when "shared"; configuration_glm_moe_dsa.py derives indexer_types from
    index_topk_pattern ("F"/"S" per layer) or from index_topk_freq and index_skip_topk_offset."""
    spec = _deepseek_v32(c)
    L = spec["n_layers"]
    kinds = c.values.get("indexer_types")
    if kinds is None:
        pattern = c.values.get("index_topk_pattern")
        if pattern is not None:
            if isinstance(pattern, str):
                if set(pattern) - {"F", "S"}:
                    raise c._bad("index_topk_pattern", "a string of F (full) and S (shared), one per layer")
                kinds = [{"F": "full", "S": "shared"}[ch] for ch in pattern]
            else:
                kinds = pattern
        else:
            freq = c.int("index_topk_freq") if "index_topk_freq" in c.values else 1
            offset = c.int("index_skip_topk_offset") if "index_skip_topk_offset" in c.values else 2
            freq = max(freq, 1)
            if freq == 1:
                kinds = None  # every layer runs its indexer: no list to build
            else:
                _too_many(c, L)
                kinds = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(L)]
    if kinds is not None:
        if not isinstance(kinds, list) or len(kinds) != L or any(k not in ("full", "shared") for k in kinds):
            raise c._bad("indexer_types", f"a list of {L} 'full' / 'shared' entries")
        shared = [i for i, k in enumerate(kinds) if k == "shared"]
        if shared and shared[0] == 0:
            raise c._bad("indexer_types", "'full' for layer 0 (a shared layer reuses an earlier layer's top-k)")
        if shared:
            spec["index_shared_layer_ids"] = shared
    return spec


# ---------------------------------------------------------------------------- MiMo-V2-Flash
# hub (remote-code) keys transformers 5.23's MiMoV2FlashConfig does not read, with what it builds instead:
# a file whose value disagrees with the built model is refused rather than counted as transformers builds it
_MIMO_IGNORED = ("hybrid_layer_pattern", "moe_layer_freq", "swa_num_key_value_heads", "swa_num_attention_heads",
                 "swa_head_dim", "swa_v_head_dim", "add_swa_attention_sink_bias", "add_full_attention_sink_bias")


def _mimo_v2_flash(c: Reader) -> dict[str, Any]:
    """modeling_mimo_v2_flash.py: MiMoV2FlashAttention with q/k of head_dim (192) and values of
    v_head_dim (128), q/k/v bias=attention_bias, o_proj without bias; its sliding layers have
    2·num_key_value_heads K/V heads and a sink logit per head (`sinks`), the full ones neither;
    layer_types default: full on layer 0 and every 6th, sliding elsewhere (window sliding_window,
    or sliding_window_size + 1); a SwiGLU MLP of intermediate_size on the dense layers of mlp_layer_types
    (default layer 0), else MiMoV2FlashMoE: n_routed_experts experts of moe_intermediate_size (gate_up, down),
    a router (E, D) without bias (e_score_correction_bias is a buffer), no shared expert; two RMSNorms per
    layer and a final one; lm_head untied by default. MTP layers are not built."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    L, A, kv = spec["n_layers"], spec["n_heads"], spec.get("n_kv_heads", spec["n_heads"])
    if (size := c.opt_int("sliding_window_size")) is not None:  # __post_init__: sliding_window = size + 1
        c.values["sliding_window"] = size + 1

    def derived() -> list[str]:  # configuration_mimo_v2_flash.py: full on layer 0 and when (i + 1) % 6 == 0
        if L > MAX_DERIVED_LAYERS:
            raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers (or give layer_types)")
        return ["full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention" for i in range(L)]

    types = _given_or(c, derived)
    if isinstance(types, list) and "sliding_attention" in types and not c.opt_int("sliding_window"):
        # MiMoV2FlashAttention widens K/V and adds sinks by layer type, window or not
        raise c._bad("sliding_window", "a whole number >= 1 for the sliding_attention layers")
    spec |= _pattern(c, types, L)
    v = c.int("v_head_dim")
    if v < 1:
        raise c._bad("v_head_dim", "a whole number >= 1")
    spec["v_head_dim"] = v
    n = c.int("n_routed_experts")
    if n < 1:
        raise c._bad("n_routed_experts", "a whole number >= 1 (tcalc has no MoE layer without routed experts)")
    spec |= {"n_experts": n, "experts_per_token": c.int("num_experts_per_tok"), "router": True,
             "moe_d_ff": c.int("moe_intermediate_size")} | _mlp_layer_types(c, L, 1)
    if "sliding" in spec.get("attention_pattern", []):
        spec |= {"sliding_kv_heads": 2 * kv, "sliding_sinks": True}
    built = {"swa_num_key_value_heads": 2 * kv, "swa_num_attention_heads": A, "swa_head_dim": spec.get("head_dim"),
             "swa_v_head_dim": v, "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False}
    for key in _MIMO_IGNORED:
        value = c.values.get(key)
        if value is None or key in ("hybrid_layer_pattern", "moe_layer_freq"):
            continue
        if key == "swa_head_dim" and built[key] is None:
            built[key] = spec["d_model"] // A
        if value != built[key]:
            raise c._bad(key, f"{built[key]!r}, what transformers 5.23 builds (it does not read {key}); "
                              "tcalc counts the model transformers builds")
    pattern = c.values.get("hybrid_layer_pattern")  # 1: sliding, 0: full (the hub's remote code)
    if pattern is not None and (not isinstance(pattern, list) or len(pattern) != L or pattern != [
            0 if t == "full_attention" else 1 for t in types[:L]]):
        raise c._bad("hybrid_layer_pattern", "the sliding (1) / full (0) layers transformers 5.23 derives, or "
                                             "absent (it reads layer_types, not this key)")
    freq = c.values.get("moe_layer_freq")  # 1: MoE, 0: dense
    if freq is not None and freq != [0 if k == "dense" else 1 for k in (c.values.get("mlp_layer_types")
                                                                         or ["dense"] + ["sparse"] * (L - 1))]:
        raise c._bad("moe_layer_freq", "the MoE (1) / dense (0) layers transformers 5.23 derives, or absent "
                                       "(it reads mlp_layer_types, not this key)")
    return spec


# ---------------------------------------------------------------------------- defaults
_DS_MLA = {  # the MLA/MoE keys every DeepSeek-style reader takes
    "moe_intermediate_size": 2048, "n_shared_experts": 1, "n_routed_experts": 256, "num_experts_per_tok": 8,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "mlp_layer_types": None, "num_nextn_predict_layers": None, "attention_bias": False,
}  # fmt: skip
_MLA_ALIASES = {"num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"}

FAMILIES: dict[str, Family] = {
    "olmo3": Family(
        _olmo3,
        LLAMA_DEFAULTS | {"vocab_size": 50304, "sliding_window": 4096, "layer_types": None},  # configuration_olmo3.py
        ("attention_dropout",),
    ),
    "smollm3": Family(
        _smollm3,
        LLAMA_DEFAULTS | {  # configuration_smollm3.py
            "vocab_size": 128256, "hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16,
            "num_key_value_heads": 4, "max_position_embeddings": 32768, "use_sliding_window": False,
            "sliding_window": None, "no_rope_layers": None, "no_rope_layer_interval": 4, "layer_types": None,
            "tie_word_embeddings": True,
        },
        ("attention_dropout",),
    ),
    "seed_oss": Family(
        _seed_oss,
        LLAMA_DEFAULTS | {  # configuration_seed_oss.py
            "vocab_size": 155136, "intermediate_size": 27648, "num_hidden_layers": 64, "num_attention_heads": 80,
            "num_key_value_heads": 8, "max_position_embeddings": 524288, "attention_bias": True,
            "attention_out_bias": False, "attention_dropout": 0.1, "residual_dropout": 0.1, "head_dim": 128,
        },
        ("attention_dropout", "residual_dropout"),
    ),
    "ernie4_5": Family(
        _ernie4_5,
        LLAMA_DEFAULTS | {  # configuration_ernie4_5.py
            "vocab_size": 103424, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 18,
            "num_attention_heads": 16, "num_key_value_heads": 2, "max_position_embeddings": 131072,
            "tie_word_embeddings": True, "use_bias": False, "head_dim": 128,
        },
        ("attention_dropout",),  # not a field: read as 0 unless the file has it
    ),
    "ernie4_5_moe": Family(
        _ernie4_5_moe,
        LLAMA_DEFAULTS | {  # configuration_ernie4_5_moe.py
            "vocab_size": 103424, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
            "num_attention_heads": 20, "num_key_value_heads": 4, "max_position_embeddings": 131072,
            "tie_word_embeddings": True, "use_bias": False, "moe_intermediate_size": 1536, "moe_k": 6,
            "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1,
            "moe_layer_end_index": -1, "moe_layer_interval": 1, "head_dim": None,
        },
        ("attention_dropout",),
        {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k"},  # attribute_map
        frozenset({"num_experts", "num_experts_per_tok"}),
    ),
    "apertus": Family(
        _apertus,
        LLAMA_DEFAULTS | {  # configuration_apertus.py
            "vocab_size": 131072, "intermediate_size": 14336, "hidden_act": "xielu",
            "max_position_embeddings": 65536,
        },
        ("attention_dropout",),
    ),
    "arcee": Family(
        _arcee,
        LLAMA_DEFAULTS | {  # configuration_arcee.py
            "hidden_size": 2560, "intermediate_size": 18432, "hidden_act": "relu2", "max_position_embeddings": 4096,
        },
        ("attention_dropout",),
    ),
    "bitnet": Family(
        _bitnet,
        LLAMA_DEFAULTS | {  # configuration_bitnet.py
            "vocab_size": 128256, "hidden_size": 2560, "intermediate_size": 6912, "num_hidden_layers": 30,
            "num_attention_heads": 20, "num_key_value_heads": 5, "hidden_act": "relu2",
        },
        ("attention_dropout",),
    ),
    "ministral3": Family(
        _ministral3,
        LLAMA_DEFAULTS | {  # configuration_ministral3.py
            "vocab_size": 131072, "intermediate_size": 14336, "num_hidden_layers": 34, "num_key_value_heads": 8,
            "head_dim": 128, "max_position_embeddings": 262144, "sliding_window": None,
        },
        ("attention_dropout",),
    ),
    "exaone4": Family(
        _exaone4,
        LLAMA_DEFAULTS | {  # configuration_exaone4.py
            "vocab_size": 102400, "intermediate_size": 16384, "num_key_value_heads": 32, "sliding_window": 4096,
            "sliding_window_pattern": 4, "layer_types": None,
        },
        ("attention_dropout",),
    ),
    "cohere2": Family(
        _cohere2,
        LLAMA_DEFAULTS | {  # configuration_cohere2.py
            "vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40,
            "num_attention_heads": 64, "max_position_embeddings": 8192, "tie_word_embeddings": True,
            "sliding_window": 4096, "layer_types": None,
        },
        ("attention_dropout",),
    ),
    "hunyuan_v1_dense": Family(
        _hunyuan_attention,
        LLAMA_DEFAULTS | {"vocab_size": 290943},  # configuration_hunyuan_v1_dense.py
        ("attention_dropout",),
    ),
    "hunyuan_v1_moe": Family(
        _hunyuan_v1_moe,
        LLAMA_DEFAULTS | {"vocab_size": 290943, "num_experts": 1, "moe_topk": 1},  # configuration_hunyuan_v1_moe.py
        ("attention_dropout",),
        {"num_experts_per_tok": "moe_topk", "num_local_experts": "num_experts"},  # attribute_map
        frozenset({"num_experts_per_tok", "num_local_experts"}),
    ),
    "minimax_m2": Family(
        _minimax_m2,
        LLAMA_DEFAULTS | {  # configuration_minimax_m2.py
            "vocab_size": 200064, "hidden_size": 3072, "intermediate_size": 1536, "num_hidden_layers": 62,
            "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 196608,
            "num_experts_per_tok": 8, "num_local_experts": 256,
        },
        ("attention_dropout",),
        {"num_experts": "num_local_experts"},  # attribute_map
        frozenset({"num_experts"}),
    ),
    "glm4_moe_lite": Family(
        _glm4_moe_lite,
        LLAMA_DEFAULTS | _DS_MLA | {  # configuration_glm4_moe_lite.py
            "vocab_size": 154880, "hidden_size": 2048, "intermediate_size": 10240, "moe_intermediate_size": 1536,
            "num_hidden_layers": 47, "num_attention_heads": 20, "num_key_value_heads": 20, "n_routed_experts": 64,
            "kv_lora_rank": 512, "q_lora_rank": 768, "qk_rope_head_dim": 64, "v_head_dim": 256,
            "qk_nope_head_dim": 192, "num_experts_per_tok": 4, "max_position_embeddings": 202752,
        },
        ("attention_dropout",),
        # attribute_map: head_dim is qk_rope_head_dim there (applied after the fields)
        _MLA_ALIASES | {"head_dim": "qk_rope_head_dim"},
        frozenset({*_MLA_ALIASES, "head_dim"}),
    ),
    "deepseek_v32": Family(
        _deepseek_v32,
        LLAMA_DEFAULTS | _DS_MLA | {  # configuration_deepseek_v32.py
            "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61,
            "num_attention_heads": 128, "num_key_value_heads": 128, "max_position_embeddings": 163840,
            "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64, "first_k_dense_replace": 3,
        },
        ("attention_dropout",),
        _MLA_ALIASES,
        frozenset(_MLA_ALIASES),
    ),
    "mimo_v2_flash": Family(
        _mimo_v2_flash,
        LLAMA_DEFAULTS | {  # configuration_mimo_v2_flash.py MiMoV2FlashConfig
            "vocab_size": 152576, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 48,
            "num_attention_heads": 64, "num_key_value_heads": 4, "max_position_embeddings": 131072,
            "moe_intermediate_size": 2048, "num_experts_per_tok": 8, "n_routed_experts": 256, "head_dim": 192,
            "v_head_dim": 128, "sliding_window": 129, "layer_types": None, "mlp_layer_types": None,
        },
        ("attention_dropout",),
        {"num_local_experts": "n_routed_experts"},  # attribute_map
        frozenset({"num_local_experts"}),
    ),
    "glm_moe_dsa": Family(
        _glm_moe_dsa,
        LLAMA_DEFAULTS | _DS_MLA | {  # configuration_glm_moe_dsa.py
            "vocab_size": 154880, "hidden_size": 6144, "intermediate_size": 12288, "num_hidden_layers": 78,
            "num_attention_heads": 64, "num_key_value_heads": 64, "kv_lora_rank": 512, "q_lora_rank": 2048,
            "qk_rope_head_dim": 64, "v_head_dim": 256, "qk_nope_head_dim": 192, "max_position_embeddings": 202752,
            "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32, "first_k_dense_replace": 3,
            "indexer_types": None,
        },
        ("attention_dropout",),
        _MLA_ALIASES | {"num_experts": "n_routed_experts"},  # __post_init__: num_experts re-routed
        frozenset({*_MLA_ALIASES, "num_experts"}),
    ),
}
