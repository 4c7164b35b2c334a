"""OLMo Hybrid's Gated DeltaNet (AI2 2026, allenai/Olmo-Hybrid-7B): the linear-attention layers of
OLMo Hybrid, three of every four layers, between Olmo3-style attention layers.

Source: transformers 5.23 `models/olmo_hybrid/modular_olmo_hybrid.py` (OlmoHybridGatedDeltaNet, whose
recurrence is Qwen3-Next's: torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule,
causal_conv1d_fn and Qwen3NextRMSNormGated, imported from modeling_qwen3_next.py). Letters as in
`deltanet.py` (docs/notation.md):

    D d_model   H_k linear_key_heads   H_v linear_value_heads   d_k, d_v their head widths   K conv_kernel

What makes it a block of its own, beside Qwen3-Next's (`deltanet.py`):
- its Linear modules: seven, each its own nn.Linear without bias, q_proj, k_proj (D -> H_k·d_k),
  v_proj (D -> H_v·d_v), a_proj, b_proj (D -> H_v), a dedicated output gate g_proj (D -> H_v·d_v)
  and o_proj (H_v·d_v -> D), where Qwen3-Next fuses them into two (in_proj_qkvz, in_proj_ba) and Qwen3.5
  into four: adapters (one A and B per module), QLoRA and the weight formats see seven matrices;
- its q/k/v are concatenated from three projections before the conv (Qwen3-Next splits one fused
  output): the conv's input is the same tensor, so the stored activations are Gated DeltaNet's;
- `linear_allow_neg_eigval` scales beta = sigmoid(b) by 2 (eigenvalues of the state transition in
  [-1, 1]): an element-wise product by a Python scalar, which keeps no tensor and has no parameter.

The weights are the same tensors as Qwen3-Next's layer of the same widths (q, k, v, a, b, the gate and
the output: D·(2·H_k·d_k + 2·H_v·d_v + 2·H_v) + H_v·d_v·D; conv1d (2·H_k·d_k + H_v·d_v)·K without
bias; A_log, dt_bias; a gated RMSNorm of d_v), its recurrence is the same function, and so are its FLOPs, decode
state and stored activations: those methods are `GatedDeltaNet`'s, and the cross-checks
(tools/crosscheck: hf_params, flops_mixers, kv_cache, activations_mixers, peft_params,
lora_activations_mixers) compare them with OlmoHybridGatedDeltaNet itself.

Tensor parallelism: as Gated DeltaNet's (heads split T ways; the seven projections column-parallel
but o_proj row-parallel; the conv's channels, A_log and dt_bias split; the norm weight replicated).
"""

from __future__ import annotations

from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.estimators.mixers.base import WEIGHT, MixerLinear
from transformer_calc.estimators.mixers.deltanet import GatedDeltaNet


def _widths(m: ModelConfig) -> tuple[int, int, int]:
    """(H_v, H_k·d_k, H_v·d_v): the value heads and the key and value widths."""
    hk, hv, dk, dv = m.linear_key_heads, m.linear_value_heads, m.linear_key_head_dim, m.linear_value_head_dim
    assert hk and hv and dk and dv, "checks._check_pattern requires the Gated DeltaNet widths"
    return hv, hk * dk, hv * dv


class OlmoGatedDeltaNet(GatedDeltaNet):
    kind = LayerAttention.olmo_gdn
    name = "OLMo Gated DeltaNet"
    source = "transformers modular_olmo_hybrid.py OlmoHybridGatedDeltaNet (Yang et al. 2024, arXiv:2412.06464)"

    def linears(self, m: ModelConfig, T: int) -> tuple[MixerLinear, ...]:
        """OlmoHybridGatedDeltaNet.__init__, in its order: q_proj, k_proj (D -> key_dim), v_proj
        (D -> value_dim), a_proj, b_proj (D -> H, a per-head gate each), g_proj (D -> value_dim),
        o_proj (value_dim -> D, reading the gated norm's output). Column-parallel inputs, row-parallel
        o_proj (heads split T ways)."""
        self.check(m, T)
        hv, key_dim, value_dim = _widths(m)
        D, kd, vd, H = m.d_model, key_dim // T, value_dim // T, hv // T
        return (MixerLinear("q_proj", D, kd), MixerLinear("k_proj", D, kd), MixerLinear("v_proj", D, vd),
                MixerLinear("a_proj", D, H, per_head=True), MixerLinear("b_proj", D, H, per_head=True),
                MixerLinear("g_proj", D, vd), MixerLinear("o_proj", vd, D, "row", WEIGHT))


MIXER = OlmoGatedDeltaNet()
