"""`tcalc flops` and `tcalc mfu` as tables."""

from __future__ import annotations
from typing import Any
from transformer_calc.render.common import with_assumed, fmt_count, fmt_flops, fmt_pct, fmt_rate, styled_table


def flops_table(r: Any) -> Any:
    """Forward FLOPs per component, step totals, rules of thumb, training time, sizing (a FlopsResult)."""
    from rich.text import Text

    f, w, rules = r.flops, r.workload, r.rules_of_thumb
    L = r.model.n_layers
    name = r.model.name or "custom model"
    causal = " (causal: S²/2)" if f.causal else ""
    t = styled_table(f"Training FLOPs: {name}, S={w.seq_len} B={w.batch_size}{causal}", "forward", "per layer", "all layers", "share")
    fwd = f.forward
    for key, label in (("qkv", "Q, K, V projections"), ("scores", "scores QKᵀ"), ("reweight", "re-weighting ×V"),
                       ("attn_out", "output projection"), ("mlp", "MLP"), ("shared_expert", "shared expert"),
                       ("router", "MoE router")):
        per = getattr(f, f"per_layer_{key}")
        if per:
            t.add_row(label, fmt_flops(per), fmt_flops(per * L), f"{100 * per * L / fwd:.1f} %")
    shown = L * sum(getattr(f, f"per_layer_{k}")
                    for k in ("qkv", "scores", "reweight", "attn_out", "mlp", "shared_expert", "router"))
    if f.layers != shown:  # blocks unlike the one shown (dense and MoE, Gemma 4's full and kv-shared layers, mixers)
        diff = f.layers - shown
        label = "less: lighter layers" if diff < 0 else "plus: heavier layers"  # than the layer shown per layer
        t.add_row(label, "", ("−" if diff < 0 else "+") + fmt_flops(abs(diff)),
                  f"{100 * diff / fwd:.1f} %")
    for key, label in (("lm_head", "LM head"), ("embedding_projection", "embedding projections")):
        value = getattr(f, key)
        if value:
            t.add_row(label, "", fmt_flops(value), f"{100 * value / fwd:.1f} %")
    t.add_section()
    t.add_row("forward", "", fmt_flops(fwd), "")
    t.add_row("backward (2 × forward)", "", fmt_flops(f.backward), "")
    t.add_row("model FLOPs per step", "", f"{f.total:,}", fmt_flops(f.total), style="bold")
    recompute = r.conventions.recompute
    if recompute != "none":
        t.add_row(f"hardware FLOPs ({recompute} recompute)", "", f"{f.hardware:,}", fmt_flops(f.hardware))
    per_token = styled_table("Per token", "count", "FLOPs/token", "vs exact")
    exact = f.per_token
    per_token.add_row("exact (this model, this S)", f"{exact:,}", "")
    for key, label in (("six_n_per_token", "6·N"), ("six_n_non_embedding_per_token", "6·N (non-embedding)"),
                       ("palm_per_token", "PaLM 6·N + 12·L·H·Q·T")):
        value = getattr(rules, key)
        per_token.add_row(label, f"{value:,}", fmt_pct((value - exact) / exact))
    lines = [f"attention core share of the model FLOPs: {100 * f.attention_share:.1f} %"]
    tr = r.training
    if tr is not None:
        lines.append(f"training on {fmt_count(tr.tokens)} tokens: {fmt_flops(tr.flops)} "
                     f"(6·N·tokens: {fmt_flops(tr.flops_six_n)})")
        if tr.time_s is not None:
            lines.append(f"on {tr.gpus} × {tr.gpu} at {100 * tr.mfu:.0f} % MFU of "
                         f"{fmt_rate(tr.peak_flops_per_gpu, 'FLOP/s')} ({tr.dtype}): "
                         f"{tr.days:.2f} days, {tr.gpu_hours:,.0f} GPU-hours")
    p = r.compute_optimal.for_params
    lines.append(f"Chinchilla (≈20 tokens/param, an approximation): {fmt_count(p.params)} params → "
                 f"{fmt_count(p.tokens)} tokens, {fmt_flops(p.flops)}")
    b = r.compute_optimal.for_budget
    if b is not None:
        lines.append(f"compute-optimal for {fmt_flops(b.budget)}: {fmt_count(b.params)} params, "
                     f"{fmt_count(b.tokens)} tokens")
    if getattr(r, "towers", None) is not None:  # a multimodal model: what this result does with its towers
        lines.append(f"towers: {r.towers.note}")
    return with_assumed(r, t, per_token, Text("\n".join(lines)))


def mfu_table(r: Any) -> Any:
    """MFU and HFU with the throughput and peak they come from (an MfuResult)."""
    from rich.text import Text

    lines = [
        f"{r.model.name or 'custom model'} at S={r.seq_len} on {r.gpus} × "
        f"{r.gpu} ({r.dtype} dense peak {fmt_rate(r.peak_flops_per_gpu, 'FLOP/s')})",
        f"throughput: {r.tokens_per_s:,.0f} tokens/s",
        f"MFU: {100 * r.mfu:.2f} %  ({fmt_rate(r.achieved_flops_per_gpu, 'FLOP/s')} per GPU)",
        f"HFU: {100 * r.hfu:.2f} %  ("
        + ("no recompute" if r.flops.recompute == "none" else f"{r.flops.recompute} recompute") + ")",
        f"model FLOPs per token: {r.flops.per_token:,}",
    ]
    return with_assumed(r, Text("\n".join(lines)))
