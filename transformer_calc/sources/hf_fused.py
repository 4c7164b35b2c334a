"""The Hugging Face families whose modeling code fuses projections into one Linear module.

Its own module so that a preset (sources/presets.py) reads it without importing every config.json
reader (sources/hf.py re-exports it; issue 39).
"""

from __future__ import annotations

# Families whose modeling code builds q, k, v (gate, up) as one Linear module: the parameter count
# is the same, but an adapter on the fused module has one A and one B (PEFT targets modules).
FUSED_LINEARS: dict[str, dict[str, bool]] = {
    "gpt2": {"fused_qkv": True},  # modeling_gpt2.py: c_attn (Conv1D D -> 3D)
    "gpt_bigcode": {"fused_qkv": True},  # c_attn (D -> D + 2·h_d with multi_query)
    "gpt_neox": {"fused_qkv": True},  # attention.query_key_value
    "falcon": {"fused_qkv": True},  # self_attention.query_key_value
    "bloom": {"fused_qkv": True},  # self_attention.query_key_value
    "phi3": {"fused_qkv": True, "fused_gate_up": True},  # self_attn.qkv_proj, mlp.gate_up_proj
    "glm4v_text": {"fused_gate_up": True},  # modeling_glm4v.py Glm4vTextMLP.gate_up_proj
    "granitemoehybrid": {"fused_gate_up": True},  # modeling_granitemoehybrid.py shared_mlp.input_linear (D -> 2·F)
    # PEFT 0.21's all-linear on these transformers-5 MoE families is converted to their transformers-4
    # targets: the attention modules plus target_parameters gate_up_proj, down_proj, gate.weight (the
    # experts' w1 and w3, each of rank r, fused: rank 2r); dense MLPs and shared experts are not targets
    # (peft/utils/constants.py and tuners_utils' conversion; tools/crosscheck/peft_params.py).
    "mixtral": {"all_linear_experts": True},
    "qwen3_moe": {"all_linear_experts": True},
    "glm4_moe": {"all_linear_experts": True},
    "deepseek_v3": {"all_linear_experts": True},
    "kimi_k2": {"all_linear_experts": True},
    "minimax": {"all_linear_experts": True},  # transformers' conversion_mapping: minimax -> the mixtral pattern
}
