"""`tcalc flops` and `tcalc mfu` as tables."""

from __future__ import annotations
import json
from enum import Enum
from typing import Any
from transformer_calc.render.common import fmt_count, fmt_flops, fmt_pct, fmt_rate, styled_table


def flops_table(report: dict[str, Any]) -> Any:
    """Forward FLOPs per component, step totals, rules of thumb, training time, sizing."""
    from rich.console import Group
    from rich.text import Text

    f, w, rules = report["flops"], report["workload"], report["rules_of_thumb"]
    L = report["model"]["n_layers"]
    name = report["model"].get("name") or "custom model"
    causal = " (causal: S²/2)" if f["causal"] else ""
    t = styled_table(f"Training FLOPs: {name}, S={w['seq_len']} B={w['batch_size']}{causal}", "forward", "per layer", "all layers", "share")
    fwd = f["forward"]
    for key, label in (("qkv", "Q, K, V projections"), ("scores", "scores QKᵀ"), ("reweight", "re-weighting ×V"),
                       ("attn_out", "output projection"), ("mlp", "MLP"), ("router", "MoE router")):
        per = f[f"per_layer_{key}"]
        if per:
            t.add_row(label, fmt_flops(per), fmt_flops(per * L), f"{100 * per * L / fwd:.1f} %")
    for key, label in (("lm_head", "LM head"), ("embedding_projection", "embedding projections")):
        if f[key]:
            t.add_row(label, "", fmt_flops(f[key]), f"{100 * f[key] / fwd:.1f} %")
    t.add_section()
    t.add_row("forward", "", fmt_flops(fwd), "")
    t.add_row("backward (2 × forward)", "", fmt_flops(f["backward"]), "")
    t.add_row("model FLOPs per step", "", f"{f['total']:,}", fmt_flops(f["total"]), style="bold")
    conv = report["conventions"]
    if conv["recompute"] != "none":
        t.add_row(f"hardware FLOPs ({conv['recompute']} recompute)", "", f"{f['hardware']:,}", fmt_flops(f["hardware"]))
    r = styled_table("Per token", "count", "FLOPs/token", "vs exact")
    exact = f["per_token"]
    r.add_row("exact (this model, this S)", f"{exact:,}", "")
    for key, label in (("six_n_per_token", "6·N"), ("six_n_non_embedding_per_token", "6·N (non-embedding)"),
                       ("palm_per_token", "PaLM 6·N + 12·L·H·Q·T")):
        r.add_row(label, f"{rules[key]:,}", fmt_pct((rules[key] - exact) / exact))
    lines = [f"attention core share of the model FLOPs: {100 * f['attention_share']:.1f} %"]
    tr = report.get("training")
    if tr:
        lines.append(f"training on {fmt_count(tr['tokens'])} tokens: {fmt_flops(tr['flops'])} "
                     f"(6·N·tokens: {fmt_flops(tr['flops_six_n'])})")
        if "seconds" in tr:
            lines.append(f"on {tr['gpus']} × {tr['gpu']} at {100 * tr['mfu']:.0f} % MFU of "
                         f"{fmt_rate(tr['peak_flops_per_gpu'], 'FLOP/s')} ({tr['dtype']}): "
                         f"{tr['days']:.2f} days, {tr['gpu_hours']:,.0f} GPU-hours")
    opt = report["compute_optimal"]
    p = opt["for_params"]
    lines.append(f"Chinchilla (≈20 tokens/param, an approximation): {fmt_count(p['params'])} params → "
                 f"{fmt_count(p['tokens'])} tokens, {fmt_flops(p['flops'])}")
    if "for_budget" in opt:
        b = opt["for_budget"]
        lines.append(f"compute-optimal for {fmt_flops(b['budget'])}: {fmt_count(b['params'])} params, "
                     f"{fmt_count(b['tokens'])} tokens")
    return Group(t, r, Text("\n".join(lines)))


def mfu_table(report: dict[str, Any]) -> Any:
    from rich.text import Text

    lines = [
        f"{report['model'].get('name') or 'custom model'} at S={report['seq_len']} on {report['gpus']} × "
        f"{report['gpu']} ({report['dtype']} dense peak {fmt_rate(report['peak_flops_per_gpu'], 'FLOP/s')})",
        f"throughput: {report['tokens_per_s']:,.0f} tokens/s",
        f"MFU: {100 * report['mfu']:.2f} %  ({fmt_rate(report['achieved_flops_per_gpu'], 'FLOP/s')} per GPU)",
        f"HFU: {100 * report['hfu']:.2f} %  ({report['flops']['recompute']} recompute)",
        f"model FLOPs per token: {report['flops']['per_token']:,}",
    ]
    return Text("\n".join(lines))
