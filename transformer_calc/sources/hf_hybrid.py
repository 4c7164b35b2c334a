"""Hugging Face config.json import for hybrid models: layers whose sequence mixer is not softmax
attention (issue 22). Gated DeltaNet: qwen3_next, qwen3_5 (its text model), qwen3_5_moe. Mamba-2:
bamba, granitemoehybrid, falcon_h1 (attention and Mamba-2 in parallel in every layer), nemotron_h
(one block per layer: Mamba-2, attention, MLP or MoE; `one_mixer_per_layer`), zamba2 (Mamba-2 blocks
and a shared attention+MLP block run at its hybrid layers, estimators/shared_block.py). Short convolution:
lfm2. Mamba(-1): jamba. Lightning attention: minimax. Kimi Delta Attention (with MLA full-attention
layers and a DeepSeek-style MoE): kimi_linear. OLMo Hybrid's Gated DeltaNet (olmo_gdn) between Olmo3
attention layers: olmo_hybrid.

Same contract as `transformer_calc.sources.hf`, whose reader these builders use: the spec's parameter
count equals what transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py), the
decode state equals transformers' cache objects (tools/crosscheck/kv_cache.py). Each builder cites
the modeling file it mirrors; the defaults are those of `models/<type>/configuration_<type>.py`.

`layer_types` (given, or derived as the config class derives it: every `full_attention_interval`-th
layer full attention, the others linear attention) becomes `attention_pattern` with the kinds
`deltanet` and `full`, reduced to its shortest period.
"""

from __future__ import annotations

from typing import Any

from transformer_calc.sources.hf_2024 import MAX_DERIVED_LAYERS, mla_spec, qwen_moe_layers, shortest_period
from transformer_calc.sources.hf_base import (
    LLAMA_DEFAULTS, Family, Reader, gated_mlp_kind, rotary_common,
)

_HYBRID_KIND = {"linear_attention": "deltanet", "full_attention": "full"}
# configuration_utils.py _LEGACY_LAYER_TYPE_REMAP: mamba -> linear_attention, attention -> full_attention
_MAMBA_KIND = {"linear_attention": "mamba2", "mamba": "mamba2", "full_attention": "full", "attention": "full"}


def _hybrid_pattern(c: Reader, L: int) -> dict[str, Any]:
    """attention_pattern from layer_types, or from full_attention_interval (configuration_qwen3_next.py
    __post_init__: layer i is full attention when (i + 1) % interval == 0)."""
    given = c.values.get("layer_types")
    if given is None:
        interval = c.int("full_attention_interval")
        if not 1 <= interval <= MAX_DERIVED_LAYERS:
            raise c._bad("full_attention_interval", f"a whole number from 1 to {MAX_DERIVED_LAYERS}")
        kinds = ["deltanet" if (i + 1) % interval else "full" for i in range(interval)]
        if L < interval:  # the pattern's period is the model when it is shorter than one interval
            kinds = kinds[:L]
        return {"attention_pattern": kinds}
    if not isinstance(given, list) or len(given) != L or any(k not in _HYBRID_KIND for k in given):
        raise c._bad("layer_types", f"a list of {L} kinds, each linear_attention or full_attention")
    return {"attention_pattern": shortest_period([_HYBRID_KIND[k] for k in given])}


def _deltanet(c: Reader) -> dict[str, Any]:
    """The Gated DeltaNet widths (Qwen3NextGatedDeltaNet, Qwen3_5GatedDeltaNet)."""
    out = {
        "linear_key_heads": c.int("linear_num_key_heads"),
        "linear_value_heads": c.int("linear_num_value_heads"),
        "linear_key_head_dim": c.int("linear_key_head_dim"),
        "linear_value_head_dim": c.int("linear_value_head_dim"),
        "conv_kernel": c.int("linear_conv_kernel_dim"),
    }
    for key, name in (("linear_key_heads", "linear_num_key_heads"), ("linear_value_heads", "linear_num_value_heads"),
                      ("linear_key_head_dim", "linear_key_head_dim"), ("linear_value_head_dim", "linear_value_head_dim"),
                      ("conv_kernel", "linear_conv_kernel_dim")):
        if out[key] < 1:
            raise c._bad(name, "a whole number >= 1")
    if out["linear_value_heads"] % out["linear_key_heads"]:  # fix_query_key_value_ordering needs it
        raise c._bad("linear_num_value_heads", f"a multiple of linear_num_key_heads ({out['linear_key_heads']})")
    return out


def _qwen3_next_block(c: Reader) -> dict[str, Any]:
    """What the three families share: Qwen3-Next's gated attention (q_proj D x 2·A·h_d, the second
    half a sigmoid gate on the output; k/v/o; bias=attention_bias; per-head q_norm/k_norm), two
    RMSNorms per layer and a final one, SwiGLU, head_dim explicit (default 256), and the Gated
    DeltaNet layers (modeling_qwen3_next.py Qwen3NextAttention, Qwen3NextDecoderLayer)."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    spec |= {"qk_norm": True, "qk_norm_scope": "head", "attn_output_gate": True}
    return spec | _deltanet(c) | _hybrid_pattern(c, spec["n_layers"])


def _qwen3_next(c: Reader) -> dict[str, Any]:
    """modeling_qwen3_next.py: Qwen3NextSparseMoeBlock on layer i when num_experts > 0, i not in
    mlp_only_layers and (i + 1) % decoder_sparse_step == 0 (routed experts of moe_intermediate_size,
    a shared expert of shared_expert_intermediate_size with its Linear(D, 1) gate, router (E, D)
    without bias); the other layers Qwen3NextMLP(intermediate_size)."""
    spec = _qwen3_next_block(c)
    n = c.int("num_experts")
    spec |= {
        "n_experts": max(n, 1), "experts_per_token": c.int("num_experts_per_tok"), "router": n > 0,
        "moe_d_ff": c.int("moe_intermediate_size"),
        "shared_expert_d_ff": c.int("shared_expert_intermediate_size"), "shared_expert_gate": True,
    }
    return spec | qwen_moe_layers(c, spec, n)


def _qwen3_5_text(c: Reader) -> dict[str, Any]:
    """modeling_qwen3_5.py (Qwen3_5ForCausalLM): Qwen3-Next's layers with a dense
    Qwen3_5MLP(intermediate_size) on every layer; the DeltaNet's projections as four Linear modules
    (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: the same weights)."""
    return _qwen3_next_block(c) | {"deltanet_split_in_proj": True}


def _qwen3_5_moe_text(c: Reader) -> dict[str, Any]:
    """modeling_qwen3_5_moe.py (Qwen3_5MoeForCausalLM): a Qwen3_5MoeSparseMoeBlock on every layer
    (num_experts of moe_intermediate_size, router (E, D), a shared expert with its Linear(D, 1)
    gate); intermediate_size is not read."""
    spec = _qwen3_next_block(c) | {"deltanet_split_in_proj": True}  # modeling_qwen3_5_moe.py: four Linear modules
    n = c.int("num_experts")
    if n < 1:
        raise c._bad("num_experts", "a whole number >= 1 (every Qwen3.5-MoE layer is a MoE block)")
    return spec | {
        "n_experts": n, "experts_per_token": c.int("num_experts_per_tok"), "router": True,
        "d_ff": c.int("moe_intermediate_size"), "moe_d_ff": c.int("moe_intermediate_size"),
        "shared_expert_d_ff": c.int("shared_expert_intermediate_size"), "shared_expert_gate": True,
    }


# ---------------------------------------------------------------------------- Mamba-2 hybrids
def _mamba2(c: Reader, inner: int | None = None) -> dict[str, Any]:
    """The Mamba-2 widths (BambaMixer, GraniteMoeHybridMambaLayer, FalconH1Mixer): d_inner =
    int(mamba_expand·D) (Falcon-H1: mamba_d_ssm when set) must be mamba_n_heads·mamba_d_head
    ("auto": d_inner // heads), as the config validates."""
    D, H = c.int("hidden_size"), c.int("mamba_n_heads")
    if inner is None:
        expand = c.values.get("mamba_expand")
        if isinstance(expand, bool) or not isinstance(expand, (int, float)) or expand <= 0:
            raise c._bad("mamba_expand", "a positive number")
        inner = int(expand * D)
    if H < 1 or inner % H:
        raise c._bad("mamba_n_heads", f"a divisor of mamba_expand x hidden_size ({inner})")
    head = c.values.get("mamba_d_head")
    P = inner // H if head == "auto" else c.int("mamba_d_head")
    if P * H != inner:
        raise c._bad("mamba_d_head", f"mamba_expand x hidden_size / mamba_n_heads ({inner // H})")
    out = {
        "ssm_heads": H, "ssm_head_dim": P, "ssm_state_size": c.int("mamba_d_state"),
        "ssm_groups": c.int("mamba_n_groups"), "conv_kernel": c.int("mamba_d_conv"),
        "ssm_chunk_size": c.int("mamba_chunk_size"),
        "ssm_proj_bias": c.flag("mamba_proj_bias"), "ssm_conv_bias": c.flag("mamba_conv_bias"),
    }
    for key, name in (("ssm_state_size", "mamba_d_state"), ("ssm_groups", "mamba_n_groups"),
                      ("conv_kernel", "mamba_d_conv"), ("ssm_chunk_size", "mamba_chunk_size")):
        if out[key] < 1:
            raise c._bad(name, "a whole number >= 1")
    if H % out["ssm_groups"]:
        raise c._bad("mamba_n_groups", f"a divisor of mamba_n_heads ({H})")
    return out


def _floor_head_dim(spec: dict[str, Any]) -> dict[str, Any]:
    """`getattr(config, "head_dim", hidden_size // num_attention_heads)`: the floor, pinned when
    D/A is not whole (tcalc's default needs divisibility)."""
    D, A = spec["d_model"], spec["n_heads"]
    if "head_dim" not in spec and D % A:
        spec["head_dim"] = D // A
    return spec


def _bamba(c: Reader) -> dict[str, Any]:
    """modeling_bamba.py: BambaMixer (Mamba-2) layers, BambaAttention (q/k/v/o bias=attention_bias,
    no q/k norms) on attn_layer_indices, a gated BambaMLP(intermediate_size, bias=mlp_bias) on every
    layer, input_layernorm and pre_ff_layernorm, final_layernorm."""
    bias = c.flag("attention_bias")
    spec = _floor_head_dim(rotary_common(c, bias, bias, c.flag("mlp_bias")) | {"mlp": gated_mlp_kind(c, "hidden_act")})
    L = spec["n_layers"]
    indices = c.values.get("attn_layer_indices") or []
    if not isinstance(indices, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in indices):
        raise c._bad("attn_layer_indices", "a list of layer indices")
    if L > MAX_DERIVED_LAYERS:
        raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers")
    kinds = ["full" if i in set(indices) else "mamba2" for i in range(L)]
    return spec | _mamba2(c) | {"attention_pattern": shortest_period(kinds)}


def _granitemoehybrid(c: Reader) -> dict[str, Any]:
    """modeling_granitemoehybrid.py: GraniteMoeHybridMambaLayer (Mamba-2) or GraniteMoeHybridAttention
    (q/k/v/o bias=attention_bias) per layer_types (default: every layer Mamba-2); on every layer the
    shared_mlp (input_linear D x 2·shared_intermediate_size, output_linear back: a gated MLP) and,
    with num_local_experts > 0, a MoE of experts of intermediate_size (gate_up + down, no biases) and
    a router (E, D) without bias; two RMSNorms per layer and a final one. The multipliers and RoPE
    (position_embedding_type) carry no parameters."""
    bias = c.flag("attention_bias")
    spec = _floor_head_dim(rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act")})
    if c.values.get("position_embedding_type") != "rope":
        spec["positional"] = "none"
    shared = c.int("shared_intermediate_size")
    n = c.opt_int("num_local_experts") or 0
    spec["d_ff"] = shared
    if n > 0:
        spec |= {"n_experts": n, "experts_per_token": c.int("num_experts_per_tok"), "router": True,
                 "moe_d_ff": c.int("intermediate_size"), "shared_expert_d_ff": shared}
    L = spec["n_layers"]
    given = c.values.get("layer_types")
    if given is None:
        kinds = ["mamba2"]
    elif not isinstance(given, list) or len(given) != L or any(k not in _MAMBA_KIND for k in given):
        raise c._bad("layer_types", f"a list of {L} kinds, each mamba / linear_attention or attention / full_attention")
    else:
        kinds = shortest_period([_MAMBA_KIND[k] for k in given])
    return spec | _mamba2(c) | {"attention_pattern": kinds}


def _falcon_h1(c: Reader) -> dict[str, Any]:
    """modeling_falcon_h1.py: every layer runs FalconH1Mixer (Mamba-2 of d_inner = mamba_d_ssm, or
    mamba_expand·D; in_proj bias mamba_proj_bias, out_proj bias projectors_bias, the gated norm only
    with mamba_rms_norm) and FalconH1Attention (q/k/v/o bias=attention_bias) in parallel on the same
    input, then a gated FalconH1MLP(intermediate_size, bias=mlp_bias); input_layernorm,
    pre_ff_layernorm, final_layernorm. The mup multipliers (mup_vector is a buffer) carry no
    parameters."""
    bias = c.flag("attention_bias")
    spec = _floor_head_dim(rotary_common(c, bias, bias, c.flag("mlp_bias")) | {"mlp": gated_mlp_kind(c, "hidden_act")})
    inner = c.opt_int("mamba_d_ssm")
    if inner is not None and inner < 1:
        raise c._bad("mamba_d_ssm", "a whole number >= 1 (or null: mamba_expand x hidden_size)")
    mamba = _mamba2(c, inner)
    mamba |= {"ssm_out_bias": c.flag("projectors_bias"), "ssm_norm": c.flag("mamba_rms_norm")}
    return spec | mamba | {"attention_pattern": ["mamba2"], "mixer_beside_attention": True}


_NEMOTRON_BLOCKS = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}  # hybrid_override_pattern
_NEMOTRON_KIND = {"linear_attention": "mamba2", "mamba": "mamba2", "full_attention": "full", "attention": "full",
                  "mlp": "none", "moe": "none"}


def _nemotron_h(c: Reader) -> dict[str, Any]:
    """modeling_nemotron_h.py: one NemotronHBlock per layer (one RMSNorm and one mixer): Mamba-2
    (NemotronHMamba2Mixer: d_inner = mamba_num_heads·mamba_head_dim, in/out_proj bias=use_bias, conv
    bias=use_conv_bias), attention (q/k/v/o without bias, no positional encoding), a NemotronHMLP
    (up and down of intermediate_size, relu², bias=mlp_bias) or a NemotronHMoE (n_routed_experts
    non-gated experts of moe_intermediate_size, a router (E, D) whose e_score_correction_bias is a
    buffer, a shared NemotronHMLP of moe_shared_expert_intermediate_size; with moe_latent_size ℓ the routed
    experts work in ℓ between a D x ℓ and an ℓ x D projection: LatentMoE). The layers are
    layers_block_type (or hybrid_override_pattern: M, *, -, E); num_hidden_layers is not read. MTP
    layers (num_nextn_predict_layers) are not built."""
    types = _nemotron_types(c)
    L = len(types)
    mlp_bias = c.flag("mlp_bias")
    spec: dict[str, Any] = {
        "n_layers": L, "d_model": c.int("hidden_size"), "n_heads": c.int("num_attention_heads"),
        "vocab_size": c.int("vocab_size"), "d_ff": c.int("intermediate_size"),
        "max_seq_len": c.int("max_position_embeddings"), "positional": "none", "norm": "rmsnorm",
        # NemotronHForCausalLM._tied_weights_keys = {}: the head is its own tensor whatever the file says
        "norms_per_layer": 1, "tied_embeddings": False, "mlp": "relu",
        "bias": False, "mlp_bias": mlp_bias, "one_mixer_per_layer": True,
    }
    c.activation = c.text("mlp_hidden_act")  # relu2: up and down, no gate (two matrices as relu)
    if (head_dim := c.opt_int("head_dim")) is not None:
        spec["head_dim"] = head_dim
    if (kv := c.opt_int("num_key_value_heads")) is not None:
        spec["n_kv_heads"] = kv
    if "moe" in types:
        spec |= _nemotron_moe(c, types, mlp_bias)
    mamba = _nemotron_mamba(c)
    kinds = [_NEMOTRON_KIND[t] for t in types]
    return spec | (mamba if "mamba2" in kinds else {}) | {"attention_pattern": shortest_period(kinds)}


def _nemotron_types(c: Reader) -> list[str]:
    """The layer kinds: layers_block_type, else hybrid_override_pattern's letters, else the config's default."""
    types = c.values.get("layers_block_type")
    if types is None and c.values.get("hybrid_override_pattern") is not None:
        pattern = c.values["hybrid_override_pattern"]
        if not isinstance(pattern, str) or not pattern or any(ch not in _NEMOTRON_BLOCKS for ch in pattern):
            raise c._bad("hybrid_override_pattern", "a string of M, *, - and E (one per layer)")
        types = [_NEMOTRON_BLOCKS[ch] for ch in pattern]
    if types is None:
        types = ["linear_attention", "moe", "full_attention", "mlp"]  # configuration_nemotron_h.py default
    if not isinstance(types, list) or not types or any(t not in _NEMOTRON_KIND for t in types):
        raise c._bad("layers_block_type", "a list of linear_attention / full_attention / mlp / moe (one per layer)")
    if len(types) > MAX_DERIVED_LAYERS:
        raise c._bad("layers_block_type", f"at most {MAX_DERIVED_LAYERS} layers")
    return types


def _nemotron_moe(c: Reader, types: list[str], mlp_bias: bool) -> dict[str, Any]:
    """NemotronHMoE's fields: routed and shared experts, LatentMoE's width, and the dense (mlp) layers."""
    if mlp_bias:  # the experts have no bias, the dense and shared MLPs would: not one tcalc MLP
        raise c._bad("mlp_bias", "false with MoE layers (tcalc's experts and MLPs share one bias setting)")
    spec: dict[str, Any] = {
        "n_experts": c.int("n_routed_experts"), "experts_per_token": c.int("num_experts_per_tok"), "router": True,
        "moe_d_ff": c.int("moe_intermediate_size"),
        "shared_expert_d_ff": c.int("moe_shared_expert_intermediate_size"),
    }
    # LatentMoE (Nemotron 3 Super): NemotronHMoE's fc1_latent_proj / fc2_latent_proj and experts of that width
    if (latent := c.opt_int("moe_latent_size")) is not None:
        if latent < 1:
            raise c._bad("moe_latent_size", "a whole number >= 1 (or null: no latent projection)")
        spec["moe_latent_dim"] = latent
    dense = [i for i, t in enumerate(types) if t == "mlp"]
    if dense:
        spec["dense_layer_ids"] = dense
    return spec


def _nemotron_mamba(c: Reader) -> dict[str, Any]:
    """NemotronHMamba2Mixer's fields, each a whole number >= 1, the heads divisible into the groups."""
    H = c.int("mamba_num_heads")
    names = {"ssm_heads": "mamba_num_heads", "ssm_head_dim": "mamba_head_dim", "ssm_state_size": "ssm_state_size",
             "ssm_groups": "n_groups", "conv_kernel": "conv_kernel", "ssm_chunk_size": "chunk_size"}
    mamba: dict[str, Any] = {key: c.int(name) for key, name in names.items()}
    for key, value in mamba.items():
        if value < 1:
            raise c._bad(names[key], "a whole number >= 1")
    if H % mamba["ssm_groups"]:
        raise c._bad("n_groups", f"a divisor of mamba_num_heads ({H})")
    return mamba | {"ssm_proj_bias": c.flag("use_bias"), "ssm_conv_bias": c.flag("use_conv_bias")}


# ---------------------------------------------------------------------------- Zamba2
# configuration_zamba2.py __post_init__: the default layers_block_type of Zamba2-2.7B
_ZAMBA2_DEFAULT_TYPES = (["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3
                         + ["hybrid"] + ["mamba"] * 2)
_ZAMBA2_KINDS = frozenset({"mamba", "linear_attention", "hybrid"})  # mamba: the legacy name of linear_attention


def _zamba2(c: Reader) -> dict[str, Any]:
    """modeling_zamba2.py: every layer is a Zamba2MambaDecoderLayer (input_layernorm, a Mamba-2
    Zamba2MambaMixer: d_inner = int(mamba_expand·D) in n_mamba_heads heads of mamba_headdim, in/out_proj
    bias=add_bias_linear, conv1d bias=True whatever use_conv_bias says); a "hybrid" layer first runs a
    shared Zamba2AttentionDecoderLayer on [h; embedding] (2D wide; head_dim = 2D / A; q/k/v/o without
    bias; a gated Zamba2MLP of intermediate_size, default 4D, bias=add_bias_linear; per-application
    adapters of adapter_rank on gate_up and, with use_shared_attention_adapter, on q/k/v) and its own
    D x D linear (estimators/shared_block.py). num_mem_blocks distinct blocks, tied in turn
    (Zamba2Model.get_layers). RoPE only with use_mem_rope (no parameters either way); final_layernorm;
    lm_head tied by tie_word_embeddings."""
    types, L = _zamba2_types(c)
    D, A = c.int("hidden_size"), c.int("num_attention_heads")
    if D < 1 or A < 1:
        raise c._bad("hidden_size" if D < 1 else "num_attention_heads", "a whole number >= 1")
    expand = c.values.get("mamba_expand")
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or expand <= 0:
        raise c._bad("mamba_expand", "a positive number")
    inner, H = int(expand * D), c.int("n_mamba_heads")
    if H < 1 or inner % H:  # in_proj is int(expand·D) wide, the heads H·(inner // H): only equal when H divides it
        raise c._bad("n_mamba_heads", f"a divisor of mamba_expand x hidden_size ({inner})")
    hybrid = [i for i, t in enumerate(types) if t == "hybrid"]
    written = c.values.get("hybrid_layer_ids")  # a full save writes it; set after __post_init__, it wins
    if written is not None and written != hybrid:
        raise c._bad("hybrid_layer_ids", f"the hybrid layers of layers_block_type ({hybrid}), or absent")
    bias = c.flag("add_bias_linear")
    F = c.opt_int("intermediate_size") or 4 * D  # `self.intermediate_size or 4 * self.hidden_size`
    if c.flag("use_long_context"):  # __post_init__: max_position_embeddings = 16384
        c.values["max_position_embeddings"] = 16384
    spec: dict[str, Any] = {
        "n_layers": L, "d_model": D, "n_heads": A, "head_dim": 2 * D // A, "vocab_size": c.int("vocab_size"),
        "d_ff": F, "mlp": gated_mlp_kind(c, "hidden_act"), "max_seq_len": c.int("max_position_embeddings"),
        "positional": "rotary" if c.flag("use_mem_rope") else "none", "norm": "rmsnorm", "norms_per_layer": 1,
        "tied_embeddings": c.flag("tie_word_embeddings"), "bias": False, "mlp_bias": bias,
        "one_mixer_per_layer": True, "attention_pattern": ["mamba2"],
        "ssm_heads": H, "ssm_head_dim": inner // H, "ssm_state_size": c.int("mamba_d_state"),
        "ssm_groups": c.int("mamba_ngroups"), "conv_kernel": c.int("mamba_d_conv"), "ssm_chunk_size": c.int("chunk_size"),
        "ssm_proj_bias": bias, "ssm_conv_bias": True,
    }
    shared = {"shared_block_layer_ids": hybrid, "shared_blocks": c.int("num_mem_blocks"),
              "shared_block_adapter_rank": c.int("adapter_rank"),
              "shared_attention_adapters": c.flag("use_shared_attention_adapter"),
              # PreTrainedModel.get_expanded_tied_weights_keys ties nothing without tie_word_embeddings
              "shared_blocks_tied": spec["tied_embeddings"]}
    if (kv := c.opt_int("num_key_value_heads")) is not None:
        spec["n_kv_heads"] = kv
    _check_zamba2_sizes(c, spec, shared, H, D, A)
    return spec | (shared if hybrid else {})  # no hybrid layer: no shared block is built


def _zamba2_types(c: Reader) -> tuple[list[str], int]:
    """The layer kinds (layers_block_type, one per layer) and L."""
    if c.values.get("layer_types") is not None:
        # attribute_map layer_types -> layers_block_type is applied after __post_init__, which has derived
        # hybrid_layer_ids (the adapters' count) from the default 54-layer pattern: not this file's layers
        raise c._bad("layer_types", "absent: write the list as layers_block_type (transformers 5.23 derives the "
                                    "shared blocks' adapters from the default pattern when it is layer_types)")
    types = c.values.get("layers_block_type")
    L = c.int("num_hidden_layers")
    if types is None:
        types = list(_ZAMBA2_DEFAULT_TYPES)
    if not isinstance(types, list) or not types or any(t not in _ZAMBA2_KINDS for t in types):
        raise c._bad("layers_block_type", "a list of mamba / linear_attention and hybrid (one per layer)")
    if len(types) != L:  # configuration_utils.py validate_layer_type
        raise c._bad("num_hidden_layers", f"the number of layers_block_type entries ({len(types)})")
    if L > MAX_DERIVED_LAYERS:
        raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers")
    return types, L


def _check_zamba2_sizes(c: Reader, spec: dict[str, Any], shared: dict[str, Any], H: int, D: int, A: int) -> None:
    """The Mamba-2 and shared-block sizes that transformers would build: whole, positive and dividing."""
    for key, name in (("ssm_state_size", "mamba_d_state"), ("ssm_groups", "mamba_ngroups"),
                      ("conv_kernel", "mamba_d_conv"), ("ssm_chunk_size", "chunk_size"),
                      ("shared_blocks", "num_mem_blocks"), ("shared_block_adapter_rank", "adapter_rank")):
        if {**spec, **shared}[key] < 1:
            raise c._bad(name, "a whole number >= 1")
    if H % spec["ssm_groups"]:
        raise c._bad("mamba_ngroups", f"a divisor of n_mamba_heads ({H})")
    if 2 * D < A:
        raise c._bad("num_attention_heads", f"at most 2 x hidden_size ({2 * D}): head_dim = 2·hidden_size // heads")


# ---------------------------------------------------------------------------- short convolution
def _lfm2(c: Reader) -> dict[str, Any]:
    """modeling_lfm2.py: Lfm2ShortConv (in_proj D x 3D, a depthwise conv of conv_L_cache taps, out_proj;
    biases with conv_bias) or Lfm2Attention (q/k/v/out_proj without bias, q_layernorm/k_layernorm
    of head_dim) per layer_types (default: full attention on full_attn_idxs, all layers when not
    given); a SwiGLU Lfm2MLP (w1, w3, w2) whose width is intermediate_size, or with
    block_auto_adjust_ff_dim int(2/3 of it), times block_ffn_dim_multiplier rounded up to
    block_multiple_of; operator_norm and ffn_norm, and the model's embedding_norm (applied after the
    last layer: the final norm)."""
    spec = _floor_head_dim(rotary_common(c, False, False, False) | {"mlp": "swiglu", "qk_norm": True, "qk_norm_scope": "head"})
    c.activation = "silu"
    spec["tied_embeddings"] = c.flag("tie_word_embeddings")
    F = c.int("intermediate_size")
    if c.flag("block_auto_adjust_ff_dim"):
        F = int(2 * F / 3)
        mult = c.values.get("block_ffn_dim_multiplier")
        if mult is not None:
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or mult <= 0:
                raise c._bad("block_ffn_dim_multiplier", "a positive number")
            step = c.int("block_multiple_of")
            if step < 1:
                raise c._bad("block_multiple_of", "a whole number >= 1")
            F = int(mult * F)
            F = step * ((F + step - 1) // step)
    if F < 1:
        raise c._bad("intermediate_size", "large enough for a feed-forward width >= 1")
    spec["d_ff"] = F
    L = spec["n_layers"]
    types = c.values.get("layer_types")
    if types is None:
        idxs = c.values.get("full_attn_idxs")
        if idxs is not None and (not isinstance(idxs, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in idxs)):
            raise c._bad("full_attn_idxs", "a list of layer indices")
        if L > MAX_DERIVED_LAYERS:
            raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers")
        full = set(range(L)) if idxs is None else set(idxs)
        types = ["full_attention" if i in full else "conv" for i in range(L)]
    if not isinstance(types, list) or len(types) != L:
        raise c._bad("layer_types", f"a list of {L} kinds, each conv or full_attention")
    kinds = ["conv" if t == "conv" else "full" for t in types]  # modeling_lfm2.py: anything but conv is attention
    spec |= {"attention_pattern": shortest_period(kinds), "conv_kernel": c.int("conv_L_cache"),
             "short_conv_bias": c.flag("conv_bias")}
    if spec["conv_kernel"] < 1:
        raise c._bad("conv_L_cache", "a whole number >= 1")
    return spec


# ---------------------------------------------------------------------------- Mamba(-1)
def _jamba(c: Reader) -> dict[str, Any]:
    """modeling_jamba.py: JambaAttentionDecoderLayer (q/k/v/o without bias) where
    i % attn_layer_period == attn_layer_offset, JambaMambaDecoderLayer (JambaMambaMixer: d_inner =
    mamba_expand·D, dt rank mamba_dt_rank, "auto": ceil(D / 16)) elsewhere; a JambaSparseMoeBlock
    (num_experts gated experts of intermediate_size, router (E, D), no biases) where
    i % expert_layer_period == expert_layer_offset and num_experts > 1, else a gated JambaMLP;
    input_layernorm, pre_ff_layernorm, final_layernorm."""
    import math

    spec = _floor_head_dim(rotary_common(c, False, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")})
    spec["positional"] = "none"  # Jamba's attention has no positional encoding
    L = spec["n_layers"]
    period, offset = c.int("attn_layer_period"), c.int("attn_layer_offset")
    if period < 1 or not 0 <= offset < period:
        raise c._bad("attn_layer_offset", "a whole number from 0 to attn_layer_period - 1")
    if period > MAX_DERIVED_LAYERS:
        raise c._bad("attn_layer_period", f"at most {MAX_DERIVED_LAYERS}")
    kinds = ["full" if i == offset else "mamba" for i in range(period)]
    if L <= period:
        spec["attention_pattern"] = shortest_period(kinds[:L])  # the model is less than one period
    else:  # the smallest divisor d of the period that repeats it (a period's own border is no period)
        d = next(d for d in range(1, period + 1) if period % d == 0 and all(kinds[i] == kinds[i % d] for i in range(period)))
        spec["attention_pattern"] = kinds[:d]
    n = c.int("num_experts")
    if n > 1:
        e_period, e_offset = c.int("expert_layer_period"), c.int("expert_layer_offset")
        if e_period < 1 or not 0 <= e_offset < e_period:
            raise c._bad("expert_layer_offset", "a whole number from 0 to expert_layer_period - 1")
        spec |= {"n_experts": n, "experts_per_token": c.int("num_experts_per_tok"), "router": True}
        if e_offset == e_period - 1:  # MoE on every e_period-th layer, tcalc's moe_layer_step rule
            spec["moe_layer_step"] = e_period
        else:  # MoE on layers i ≡ e_offset (mod e_period): the others listed dense
            if L > MAX_DERIVED_LAYERS:
                raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers with this expert_layer_offset")
            spec["dense_layer_ids"] = [i for i in range(L) if i % e_period != e_offset]
    D = spec["d_model"]
    expand = c.int("mamba_expand")
    rank = c.values.get("mamba_dt_rank")
    R = math.ceil(D / 16) if rank == "auto" else c.int("mamba_dt_rank")
    mamba = {"ssm_inner": expand * D, "ssm_state_size": c.int("mamba_d_state"), "ssm_dt_rank": R,
             "conv_kernel": c.int("mamba_d_conv"), "ssm_proj_bias": c.flag("mamba_proj_bias"),
             "ssm_conv_bias": c.flag("mamba_conv_bias")}
    for key, name in (("ssm_inner", "mamba_expand"), ("ssm_state_size", "mamba_d_state"), ("ssm_dt_rank", "mamba_dt_rank"),
                      ("conv_kernel", "mamba_d_conv")):
        if mamba[key] < 1:
            raise c._bad(name, "a whole number >= 1")
    return spec | mamba


# ---------------------------------------------------------------------------- lightning attention
_MINIMAX_KIND = {"linear_attention": "lightning", "full_attention": "full", "attention": "full"}


def _minimax(c: Reader) -> dict[str, Any]:
    """modeling_minimax.py: MiniMaxLightningAttention (qkv_proj, output_gate, out_proj, a norm over
    the heads; head_dim = head_dim or D // A) on linear_attention layers (default: the odd layers),
    MiniMaxAttention (q/k/v/o without bias) on the others; a MiniMaxSparseMoeBlock on every layer
    (num_local_experts gated experts of intermediate_size, router (E, D), no biases); two RMSNorms
    per layer and a final one. The alpha/beta factors carry no parameters."""
    spec = rotary_common(c, False, False, False) | {"mlp": gated_mlp_kind(c, "hidden_act")}
    if c.values.get("head_dim") is None or c.values.get("head_dim") == 0:  # `head_dim or D // A`
        spec.pop("head_dim", None)
        spec = _floor_head_dim(spec)
    if c.values.get("sliding_window") is not None:
        raise c._bad("sliding_window", "null (a sliding mask over MiniMax's uncapped cache is not modeled)")
    n = c.int("num_local_experts")
    if n < 1:
        raise c._bad("num_local_experts", "a whole number >= 1")
    spec |= {"n_experts": n, "experts_per_token": c.int("num_experts_per_tok"), "router": True}
    L = spec["n_layers"]
    types = c.values.get("layer_types")
    if types is None:
        if L > MAX_DERIVED_LAYERS:
            raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers")
        types = ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(L)]  # configuration_minimax.py
    if not isinstance(types, list) or len(types) != L or any(t not in _MINIMAX_KIND for t in types):
        raise c._bad("layer_types", f"a list of {L} kinds, each linear_attention or full_attention")
    block = c.int("block_size")
    if block < 1:
        raise c._bad("block_size", "a whole number >= 1")
    return spec | {"attention_pattern": shortest_period([_MINIMAX_KIND[t] for t in types]), "lightning_block_size": block}


# ---------------------------------------------------------------------------- Kimi Delta Attention
_KIMI_KIND = {"linear_attention": "kda", "full_attention": "full"}


def _kimi_layer_types(c: Reader, L: int) -> list[str]:
    """configuration_kimi_linear.py __post_init__: layer_types given, else linear_attn_config's
    full_attn_layers / kda_layers (1-indexed), else layer i full attention when i and i % 4 == 0."""
    given = c.values.get("layer_types")
    lin = c.values.get("linear_attn_config") or {}
    if given is None and "full_attn_layers" in lin and "kda_layers" in lin:
        full, kda = lin["full_attn_layers"], lin["kda_layers"]
        ok = all(isinstance(x, list) and all(type(i) is int and 1 <= i <= L for i in x) for x in (full, kda))
        given = [None] * L
        if ok:
            for i in full:
                given[i - 1] = "full_attention"
            for i in kda:
                given[i - 1] = "linear_attention"
        if not ok or None in given:
            raise c._bad("linear_attn_config", f"full_attn_layers and kda_layers naming each of the {L} layers (from 1)")
    if given is None:
        if L > MAX_DERIVED_LAYERS:
            raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers")
        given = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(L)]
    if not isinstance(given, list) or len(given) != L or any(k not in _KIMI_KIND for k in given):
        raise c._bad("layer_types", f"a list of {L} kinds, each linear_attention or full_attention")
    return given


def _kimi_linear(c: Reader) -> dict[str, Any]:
    """modeling_kimi_linear.py: KimiLinearDeltaAttention (estimators/mixers/kda.py; linear_num_heads
    heads of linear_head_dim, kernel linear_conv_kernel_dim; linear_attn_config's num_heads, head_dim,
    short_conv_kernel_size win) on linear_attention layers, KimiLinearAttention (DeepSeek-V2's MLA:
    q_proj or q_a/q_b, kv_a_proj_with_mqa, kv_b_proj, o_proj; q_a, kv_a, o biases = attention_bias;
    no RoPE applied, no parameters either way) on full_attention layers; KimiLinearMLP
    (intermediate_size) on "dense" mlp_layer_types, KimiLinearMoE on "sparse" ones (num_experts of
    moe_intermediate_size, n_shared_experts x moe_intermediate_size shared, router (E, D) without
    bias; e_score_correction_bias is a buffer); default mlp_layer_types: the first
    first_k_dense_replace (default 1) dense. Two RMSNorms per layer and a final one."""
    L = c.int("num_hidden_layers")
    # KimiLinearForCausalLM._tied_weights_keys = {}: the head is its own tensor whatever the file says
    spec = mla_spec(c, False)
    lin = c.values.get("linear_attn_config") or {}
    if not isinstance(lin, dict):
        raise c._bad("linear_attn_config", "a mapping (num_heads, head_dim, short_conv_kernel_size, ...)")
    for sub, key in (("num_heads", "linear_num_heads"), ("head_dim", "linear_head_dim"),
                     ("short_conv_kernel_size", "linear_conv_kernel_dim")):
        if sub in lin:
            c.values[key] = lin[sub]
            c.written[key] = f"linear_attn_config.{sub}"
    H, d, K = c.int("linear_num_heads"), c.int("linear_head_dim"), c.int("linear_conv_kernel_dim")
    for value, key in ((H, "linear_num_heads"), (d, "linear_head_dim"), (K, "linear_conv_kernel_dim")):
        if value < 1:
            raise c._bad(key, "a whole number >= 1")
    kinds = [_KIMI_KIND[k] for k in _kimi_layer_types(c, L)]
    spec |= {
        "linear_key_heads": H, "linear_value_heads": H, "linear_key_head_dim": d, "linear_value_head_dim": d,
        "conv_kernel": K, "attention_pattern": shortest_period(kinds),
    }
    n, moe = c.int("num_local_experts"), c.int("moe_intermediate_size")
    mlp_types = c.values.get("mlp_layer_types")
    if mlp_types is None:
        first = c.values.get("first_k_dense_replace", 1)
        if isinstance(first, bool) or not isinstance(first, int):
            raise c._bad("first_k_dense_replace", "a whole number")
        first = min(max(first, 0), L)
    else:
        if not isinstance(mlp_types, list) or len(mlp_types) != L or any(t not in ("dense", "sparse") for t in mlp_types):
            raise c._bad("mlp_layer_types", f"a list of {L} kinds, each dense or sparse")
        first = mlp_types.index("sparse") if "sparse" in mlp_types else L
        if "dense" in mlp_types[first:]:
            raise c._bad("mlp_layer_types", "dense layers first, then sparse (tcalc models the first k layers dense)")
    if first < L and n < 1:
        raise c._bad("num_local_experts", "a whole number >= 1 (tcalc has no MoE layer without routed experts)")
    return spec | {
        "n_experts": max(n, 1), "experts_per_token": c.int("num_experts_per_tok"), "router": first < L,
        "moe_d_ff": moe, "shared_expert_d_ff": c.int("n_shared_experts") * moe, "first_dense_layers": first,
    }


# ---------------------------------------------------------------------------- OLMo Hybrid
_OLMO_HYBRID_KIND = {"linear_attention": "olmo_gdn", "full_attention": "full"}


def _olmo_hybrid(c: Reader) -> dict[str, Any]:
    """modular_olmo_hybrid.py: OlmoHybridAttention (Olmo3's: q/k/v/o bias=attention_bias, q_norm over
    A·h_d and k_norm over n_kv·h_d; head_dim the file's, else D // A; RoPE, without parameters, except
    for rope_parameters {"rope_theta": null}, the released checkpoints' NoPE: a null rope_parameters
    gets transformers' default rope_theta) on
    full_attention layers with post-attention and post-feedforward RMSNorms, OlmoHybridGatedDeltaNet (estimators/mixers/olmo_gdn.py) on
    linear_attention layers with two pre-norms; a bias-free SwiGLU OlmoHybridMLP on every layer.
    configuration_olmo_hybrid.py __post_init__: layer i is full attention when i % 4 == 3 (the last
    layer when none is), the linear heads default to A, d_k to int(0.75·D / H_k), d_v to 2·d_k."""
    bias = c.flag("attention_bias")
    spec = rotary_common(c, bias, bias, False) | {"mlp": gated_mlp_kind(c, "hidden_act"), "qk_norm": True,
                                                   "qk_norm_scope": "full"}
    spec = _floor_head_dim(spec)  # getattr(config, "head_dim", D // A): the class declares none, a file's is kept
    rope = c.values.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" in rope and rope["rope_theta"] is None:
        spec["positional"] = "none"  # the released files' NoPE: OlmoHybridModel builds no rotary_emb
    L, D, A = spec["n_layers"], spec["d_model"], spec["n_heads"]
    for key in ("linear_num_key_heads", "linear_num_value_heads"):
        c.values[key] = A if c.values.get(key) is None else c.values[key]
    hk = c.int("linear_num_key_heads")
    if hk < 1:
        raise c._bad("linear_num_key_heads", "a whole number >= 1")
    if c.values.get("linear_key_head_dim") is None:
        c.values["linear_key_head_dim"] = int(0.75 * D / hk)
    if c.values.get("linear_value_head_dim") is None:
        c.values["linear_value_head_dim"] = 2 * c.int("linear_key_head_dim")
    return spec | _deltanet(c) | {"attention_pattern": shortest_period(_olmo_hybrid_types(c, L))}


def _olmo_hybrid_types(c: Reader, L: int) -> list[str]:
    """The layers' kinds (configuration_olmo_hybrid.py __post_init__ and validate_architecture: at least
    one linear_attention and one full_attention layer)."""
    types = c.values.get("layer_types")
    if types is None:
        if L > MAX_DERIVED_LAYERS:
            raise c._bad("num_hidden_layers", f"at most {MAX_DERIVED_LAYERS} layers")
        types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(L)]
        if "full_attention" not in types:
            types[-1] = "full_attention"
    if (not isinstance(types, list) or len(types) != L or any(t not in _OLMO_HYBRID_KIND for t in types)
            or len(set(types)) < 2):
        raise c._bad("layer_types", f"a list of {L} kinds, each linear_attention or full_attention, with both kinds")
    return [_OLMO_HYBRID_KIND[t] for t in types]


_MAMBA_DEFAULTS = {  # the Mamba-2 fields of configuration_bamba.py and configuration_granitemoehybrid.py
    "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4,
    "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
}  # fmt: skip
_BAMBA_DEFAULTS = LLAMA_DEFAULTS | _MAMBA_DEFAULTS | {  # configuration_bamba.py
    "vocab_size": 128000, "intermediate_size": 14336, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 262144, "attn_layer_indices": None,
}  # fmt: skip
_FALCON_H1_DEFAULTS = LLAMA_DEFAULTS | _MAMBA_DEFAULTS | {  # configuration_falcon_h1.py
    "vocab_size": 128000, "intermediate_size": 14336, "num_key_value_heads": 8, "max_position_embeddings": 8192,
    "mamba_d_ssm": 1024, "mamba_norm_before_gate": True, "mamba_rms_norm": False, "projectors_bias": False,
}  # fmt: skip
_LFM2_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_lfm2.py
    "vocab_size": 65536, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 128000,
    "tie_word_embeddings": True, "conv_bias": False, "conv_L_cache": 3, "block_multiple_of": 256,
    "block_ffn_dim_multiplier": 1.0, "block_auto_adjust_ff_dim": True, "full_attn_idxs": None, "layer_types": None,
}  # fmt: skip
_JAMBA_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_jamba.py
    "vocab_size": 65536, "intermediate_size": 14336, "num_key_value_heads": 8, "max_position_embeddings": 262144,
    "num_experts_per_tok": 2, "num_experts": 16, "expert_layer_period": 2, "expert_layer_offset": 1,
    "attn_layer_period": 8, "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
    "mamba_dt_rank": "auto", "mamba_conv_bias": True, "mamba_proj_bias": False,
}  # fmt: skip
_MINIMAX_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_minimax.py
    "num_key_value_heads": 8, "head_dim": None, "max_position_embeddings": 4096 * 32, "sliding_window": None,
    "num_experts_per_tok": 2, "num_local_experts": 8, "layer_types": None, "block_size": 256,
}  # fmt: skip
_NEMOTRON_H_DEFAULTS = {  # configuration_nemotron_h.py
    "vocab_size": 131072, "hidden_size": 4096, "layers_block_type": None, "hybrid_override_pattern": None,
    "tie_word_embeddings": False, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 4096, "attention_dropout": 0.0, "intermediate_size": 21504, "mlp_hidden_act": "relu2",
    "mlp_bias": False, "ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8,
    "conv_kernel": 4, "use_conv_bias": True, "chunk_size": 128, "n_routed_experts": 8,
    "moe_intermediate_size": 7688, "moe_shared_expert_intermediate_size": 7688, "moe_latent_size": None,
    "num_experts_per_tok": 2, "use_bias": False, "hidden_dropout": 0.0,
}  # fmt: skip
_NEMOTRON_H_ALIASES = {  # attribute_map, and __post_init__'s backward-compatible names (they win)
    "layer_types": "layers_block_type", "num_local_experts": "n_routed_experts", "mamba_n_groups": "n_groups",
    "mamba_d_conv": "conv_kernel", "mamba_conv_bias": "use_conv_bias", "mamba_chunk_size": "chunk_size",
}  # fmt: skip
_GRANITEMOEHYBRID_DEFAULTS = LLAMA_DEFAULTS | _MAMBA_DEFAULTS | {  # configuration_granitemoehybrid.py
    "num_local_experts": 8, "num_experts_per_tok": 2, "shared_intermediate_size": 1024,
    "position_embedding_type": None, "layer_types": None,
}  # fmt: skip

_QWEN3_NEXT_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_qwen3_next.py
    "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 48,
    "num_attention_heads": 16, "num_key_value_heads": 2, "max_position_embeddings": 32768,
    "head_dim": 256, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "decoder_sparse_step": 1,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 10,
    "num_experts": 512, "mlp_only_layers": None, "layer_types": None, "full_attention_interval": 4,
}  # fmt: skip
_QWEN3_5_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_qwen3_5.py (Qwen3_5TextConfig)
    "vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32,
    "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 32768,
    "head_dim": 256, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "layer_types": None, "full_attention_interval": 4,
}  # fmt: skip
_QWEN3_5_MOE_DEFAULTS = _QWEN3_5_DEFAULTS | {  # configuration_qwen3_5_moe.py (Qwen3_5MoeTextConfig)
    "hidden_size": 2048, "num_hidden_layers": 40, "num_key_value_heads": 2, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "num_experts_per_tok": 8, "num_experts": 256,
}  # fmt: skip

_ZAMBA2_DEFAULTS = {  # configuration_zamba2.py Zamba2Config
    "vocab_size": 32000, "max_position_embeddings": 4096, "hidden_size": 2560, "num_hidden_layers": 54,
    "layers_block_type": None, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1,
    "n_mamba_heads": 8, "chunk_size": 256, "add_bias_linear": False, "intermediate_size": None, "hidden_act": "gelu",
    "num_attention_heads": 32, "num_key_value_heads": None, "attention_dropout": 0.0, "num_mem_blocks": 1,
    "use_shared_attention_adapter": False, "adapter_rank": 128, "use_mem_rope": False, "use_long_context": False,
    "tie_word_embeddings": True,
}  # fmt: skip

_KIMI_LINEAR_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_kimi_linear.py
    "vocab_size": 163840, "hidden_size": 2304, "intermediate_size": 9216, "moe_intermediate_size": 1024,
    "num_hidden_layers": 27, "num_attention_heads": 32, "num_key_value_heads": 32, "n_shared_experts": 1,
    "kv_lora_rank": 512, "q_lora_rank": None, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
    "num_experts_per_tok": 8, "hidden_act": "silu", "max_position_embeddings": 1048576, "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False, "attention_bias": False, "num_local_experts": 256, "mlp_layer_types": None,
    "layer_types": None, "linear_head_dim": 128, "linear_num_heads": 32, "linear_conv_kernel_dim": 4,
}  # fmt: skip
_KIMI_LINEAR_ALIASES = {  # attribute_map: the name in the file -> the field it sets (it wins)
    "num_experts": "num_local_experts", "num_experts_per_token": "num_experts_per_tok",
    "num_shared_experts": "n_shared_experts", "model_max_length": "max_position_embeddings",
}  # fmt: skip

_OLMO_HYBRID_DEFAULTS = LLAMA_DEFAULTS | {  # configuration_olmo_hybrid.py
    "vocab_size": 100352, "hidden_size": 3840, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 30, "max_position_embeddings": 65536, "layer_types": None,
    "linear_num_key_heads": None, "linear_num_value_heads": None, "linear_key_head_dim": None,
    "linear_value_head_dim": None, "linear_conv_kernel_dim": 4,
}  # fmt: skip

FAMILIES: dict[str, Family] = {
    "qwen3_next": Family(_qwen3_next, _QWEN3_NEXT_DEFAULTS, ("attention_dropout",)),
    "qwen3_5_text": Family(_qwen3_5_text, _QWEN3_5_DEFAULTS, ("attention_dropout",)),
    "qwen3_5_moe_text": Family(_qwen3_5_moe_text, _QWEN3_5_MOE_DEFAULTS, ("attention_dropout",)),
    "bamba": Family(_bamba, _BAMBA_DEFAULTS, ("attention_dropout",)),
    "falcon_h1": Family(_falcon_h1, _FALCON_H1_DEFAULTS, ("attention_dropout",)),
    "jamba": Family(_jamba, _JAMBA_DEFAULTS, ("attention_dropout",)),
    "minimax": Family(_minimax, _MINIMAX_DEFAULTS, ("attention_dropout",)),
    "olmo_hybrid": Family(_olmo_hybrid, _OLMO_HYBRID_DEFAULTS, ("attention_dropout",)),
    "kimi_linear": Family(_kimi_linear, _KIMI_LINEAR_DEFAULTS, ("attention_dropout",), _KIMI_LINEAR_ALIASES,
                          frozenset(_KIMI_LINEAR_ALIASES)),
    "lfm2": Family(_lfm2, _LFM2_DEFAULTS, (), {"tie_embedding": "tie_word_embeddings", "block_ff_dim": "intermediate_size"},
                   frozenset({"tie_embedding", "block_ff_dim"})),
    "nemotron_h": Family(_nemotron_h, _NEMOTRON_H_DEFAULTS, ("attention_dropout", "hidden_dropout"),
                         _NEMOTRON_H_ALIASES, frozenset(_NEMOTRON_H_ALIASES)),
    "zamba2": Family(_zamba2, _ZAMBA2_DEFAULTS, ("attention_dropout",)),
    "granitemoehybrid": Family(
        _granitemoehybrid, _GRANITEMOEHYBRID_DEFAULTS, ("attention_dropout",),
        {"layers_block_type": "layer_types"},  # attribute_map
    ),
}

# Multimodal wrappers whose language model is a hybrid (text_config); their vision tower is not
# counted (a checkpoint's tower tensors are listed apart, as for gemma3 / llama4 / mistral3).
WRAPPERS: dict[str, str] = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
