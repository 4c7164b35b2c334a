"""`tcalc params` as a table."""

from __future__ import annotations
from typing import Any
from transformer_calc.render.common import fmt_bytes, fmt_count, fmt_pct, model_summary, styled_table


def params_table(r: Any) -> Any:
    """The per-component breakdown, the seed's approximations, and weight bytes (a ParamsResult)."""
    from rich.console import Group
    from rich.text import Text

    p, model, approx, w = r.params, r.model, r.approximations, r.weights
    t = styled_table(f"Parameters: {model.name or 'custom model'}", "component", "per layer", "total", "share")
    row = _row_adder(t, p.total)
    _component_rows(row, p, model.n_experts)
    tw = getattr(r, "towers", None)
    if tw is not None and tw.counted:  # a multimodal model: the parts beside the language model
        t.add_section()
        row("language model", None, tw.language_model)
        row("vision tower", None, tw.vision)
        row("audio tower", None, tw.audio)
        row("multimodal projector", None, tw.projector)
    _total_rows(t, p)

    a = styled_table("Seed approximations vs exact", "formula", "value", "vs exact")
    a.add_row("(4+2E)·L·D²  (blocks only)", f"{approx.seed_blocks:,}", fmt_pct(approx.seed_blocks_rel_error))
    a.add_row("12·L·D² + V·D", f"{approx.seed_total:,}", fmt_pct(approx.seed_total_rel_error))

    weights = f"weights at p={w.bytes_per_param} bytes/param: {fmt_bytes(w.bytes)} ({w.bytes:,} B)"
    if w.tensor > 1:
        weights += (
            f"; per tensor-parallel rank (T={w.tensor}): {w.params_per_rank:,} params, "
            f"{fmt_bytes(w.bytes_per_rank)}"
        )
    lines = [Text(model_summary(model), style="dim"), t, a, Text(weights)]
    if tw is not None:
        encoder = f"{tw.image_patches:,} patches" if tw.image_patches else "no patches: a convolutional encoder"
        lines.append(Text(f"towers: {tw.note}; one image = {tw.image_tokens:,} LM tokens ({encoder}, "
                          f"{tw.image_flops / 1e9:,.1f} GFLOPs to encode)", style="bold" if not tw.counted else ""))
    return Group(*lines)


def _row_adder(t: Any, total: int) -> Any:
    """A function adding one component's row (label, per layer, total, share) when it has any parameters."""
    def row(label: str, per_layer: int | None, value: int) -> None:
        if value or per_layer:
            t.add_row(
                label,
                f"{per_layer:,}" if per_layer is not None else "",
                f"{value:,}",
                f"{100 * value / total:.2f} %",
            )
    return row


def _component_rows(row: Any, p: Any, n_experts: int) -> None:
    """One row per component of the language model, in the order of a forward pass."""
    row("token embedding", None, p.embedding)
    row("per-layer embedding table (Gemma 4)", None, p.per_layer_embedding)
    row("per-layer input projections", None, p.per_layer_inputs)
    row("position embedding", None, p.position)
    row("embedding projections", None, p.embedding_projection)
    row("embedding norm", None, p.embedding_norm)
    v4 = bool(p.hyper_connections)  # DeepSeek-V4: its attention's own parts (docs/formulas.md §5.16)
    for key, label in (
        ("attn_q", "attention W_Q (q_a + q_b)" if v4 else "attention W_Q"),
        ("attn_k", "attention K = V (kv_proj)" if v4 else "attention W_K"),
        ("attn_v", "attention W_V"),
        ("attn_o", "grouped W_O (o_a + o_b)" if v4 else "attention W_O"),
        ("attn_bias", "attention biases"),
        ("qk_norm", "q/k norms"),
        ("latent_norms", "q_a / kv norms" if v4 else "MLA latent norms"),
        ("sinks", "attention sinks"),
        ("mlp_weights", "MLP weights" + (" (all routed experts)" if n_experts > 1 else "")),
        ("mlp_bias", "MLP biases"),
        ("shared_expert", "shared expert (+ gate)"),
        ("router", "MoE router"),
        ("norms", "block norms"),
    ):
        # "per layer" is one MoE block's (a dense model's block); the total sums every block
        row(label, getattr(p, f"per_layer_{key}"), getattr(p, f"layers_{key}"))
    row("lightning indexers" + (" (CSA layers)" if v4 else ""), p.per_layer_indexer or None, p.layers_indexer)
    row("KV compressors (CSA, HCA layers)", None, p.compressors or 0)  # DeepSeek-V4
    row("hyper-connections (mHC)", None, p.hyper_connections or 0)  # DeepSeek-V4
    row("sequence mixers (not attention)", None, p.mixers)  # hybrids: Gated DeltaNet, Mamba-2, ... layers
    row("shared blocks (Zamba2)", None, p.shared_blocks or 0)  # attention+MLP once, adapters and linears per use
    row("sliding layers' extra K/V heads, sinks", None, p.sliding_extra or 0)  # MiMo-V2-Flash
    row("kv-shared layers' second MLP width", None, p.mlp_variants)
    row("final norm", None, p.final_norm)
    row("LM head", None, p.lm_head)
    row("LM head bias", None, p.lm_head_bias)


def _total_rows(t: Any, p: Any) -> None:
    """The total, the active count of a MoE, the MTP modules and Kaplan's non-embedding N."""
    total = p.total
    t.add_section()
    t.add_row("total", f"{p.per_layer:,}", f"{total:,}", f"{fmt_count(total)}", style="bold")
    if p.active != total:
        t.add_row("active per token (MoE)", "", f"{p.active:,}", fmt_count(p.active))
    if p.n_moe_layers and p.n_dense_layers:
        t.add_row(
            f"  {p.n_moe_layers} MoE + {p.n_dense_layers} dense blocks",
            f"{p.per_dense_layer:,}", "(per dense block)", "",
        )
    if p.mtp:
        # issue 38: the share column said "684 B with" (the total with the MTP modules, in a cut phrase)
        t.add_row("MTP modules (checkpoint only)", "", f"{p.mtp:,}", fmt_count(p.mtp))
        t.add_row("total with the MTP modules", "", f"{p.total_with_mtp:,}", fmt_count(p.total_with_mtp))
    t.add_row("non-embedding (Kaplan N)", "", f"{p.non_embedding:,}", fmt_count(p.non_embedding))
