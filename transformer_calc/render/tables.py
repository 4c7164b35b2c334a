"""Report dicts -> output: rich renderables for people, JSON/YAML/CSV text for scripts.

Formatting to GiB/TFLOP/... happens only here. Renderers return renderables or strings; the CLI
prints them. rich is imported only when a table is rendered.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"
    csv = "csv"


GIB = 2**30
GB = 10**9


# ---------------------------------------------------------------------------- number formatting
def fmt_count(n: int) -> str:
    """1_557_611_200 -> '1.56 B' (decimal: K, M, B, T)."""
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return str(n)


def fmt_bytes(n: int | float) -> str:
    """Binary units (GiB = 2^30 bytes), as GPU memory is reported by nvidia-smi and PyTorch."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.4g} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_rate(x: float, unit: str) -> str:
    """Decimal prefixes for rates: 3.12e14 FLOP/s -> '312 TFLOP/s'."""
    for prefix, scale in (("Y", 1e24), ("Z", 1e21), ("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


def fmt_pct(x: float) -> str:
    return f"{100 * x:+.2f} %"


# ---------------------------------------------------------------------------- machine formats
def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def to_yaml(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _cell(value: Any) -> Any:
    """A CSV scalar: booleans lowercase (as JSON writes them), None empty."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists of scalars become ';'-joined strings, lists of records
    dotted columns with an index (for CSV: every cell a scalar)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            if any(isinstance(v, (dict, list)) for v in value):
                for i, v in enumerate(value):
                    out.update(flatten(v if isinstance(v, dict) else {"value": v}, f"{name}.{i}."))
            else:
                out[name] = ";".join(str(_cell(v)) for v in value)
        else:
            out[name] = _cell(value)
    return out


def _width() -> int:
    """The terminal's width (80 when stdout is a pipe, as rich assumes)."""
    import shutil
    import sys

    if not sys.stdout.isatty() and "COLUMNS" not in __import__("os").environ:
        return 80
    return shutil.get_terminal_size((80, 24)).columns


def to_csv(rows: list[dict[str, Any]]) -> str:
    """One header row, one row per record; nested keys flattened with dots."""
    import csv
    import io

    flat = [flatten(r) for r in rows]
    header: list[str] = []
    for row in flat:
        header.extend(k for k in row if k not in header)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    return buf.getvalue()


def to_text(data: Any, fmt: OutputFormat) -> str:
    """JSON, YAML or CSV text of a report (a dict, or a list of row dicts)."""
    if fmt is OutputFormat.json:
        return to_json(data)
    if fmt is OutputFormat.yaml:
        return to_yaml(data)
    if fmt is OutputFormat.csv:
        return to_csv(data if isinstance(data, list) else [data])
    raise ValueError(f"no text form for {fmt}")


# ---------------------------------------------------------------------------- tables
def _table(title: str, *columns: str, **kwargs: Any) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left", **kwargs)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    return table


def model_summary(model: dict[str, Any]) -> str:
    m = model
    attn = "MHA" if m["n_kv_heads"] == m["n_heads"] else ("MQA" if m["n_kv_heads"] == 1 else "GQA")
    heads = f"A={m['n_heads']} ({attn}, kv={m['n_kv_heads']}, head_dim={m['head_dim']})"
    if m.get("kv_lora_rank") is not None:
        heads = (f"A={m['n_heads']} (MLA, r_kv={m['kv_lora_rank']}, r_q={m.get('q_lora_rank')}, "
                 f"h_d={m['head_dim']}, h_v={m.get('v_head_dim')})")
    parts = [
        f"L={m['n_layers']}",
        f"D={m['d_model']}",
        heads,
        f"d_ff={m['d_ff']} {m['mlp']}",
        f"V={m['vocab_size']}",
        f"K={m['max_seq_len']}",
        f"{m['positional']}",
        f"{m['norm']}",
    ]
    pattern = m.get("attention_pattern") or ["full"]
    if set(pattern) != {"full"}:
        window = {"sliding": m.get("sliding_window"), "chunked": m.get("attention_chunk_size")}
        kinds = sorted(set(pattern) - {"full"})
        spans = ", ".join(f"{k} {window[k]}" for k in kinds)
        parts.append(f"layers {'/'.join(pattern) if len(pattern) <= 6 else str(len(pattern)) + '-layer pattern'} ({spans})")
    if m["n_experts"] > 1:
        moe = f"MoE {m['experts_per_token']}/{m['n_experts']}"
        if m.get("moe_d_ff") and m["moe_d_ff"] != m["d_ff"]:
            moe += f" of width {m['moe_d_ff']}"
        if m.get("shared_expert_d_ff"):
            moe += f" + shared {m['shared_expert_d_ff']}"
        parts.append(moe)
    if m["parallel_attn"]:
        parts.append("parallel attn")
    parts.append("tied" if m["tied_embeddings"] else "untied")
    return " ".join(parts)


def params_table(report: dict[str, Any]) -> Any:
    """The per-component breakdown, the seed's approximations, and weight bytes."""
    from rich.console import Group
    from rich.text import Text

    p, model, approx, w = report["params"], report["model"], report["approximations"], report["weights"]
    total = p["total"]
    name = model.get("name") or "custom model"
    t = _table(f"Parameters: {name}", "component", "per layer", "total", "share")

    def row(label: str, per_layer: int | None, value: int) -> None:
        if value or per_layer:
            t.add_row(
                label,
                f"{per_layer:,}" if per_layer is not None else "",
                f"{value:,}",
                f"{100 * value / total:.2f} %",
            )

    L = p["n_layers"]
    row("token embedding", None, p["embedding"])
    row("position embedding", None, p["position"])
    row("embedding projections", None, p["embedding_projection"])
    row("embedding norm", None, p["embedding_norm"])
    for key, label in (
        ("attn_q", "attention W_Q"),
        ("attn_k", "attention W_K"),
        ("attn_v", "attention W_V"),
        ("attn_o", "attention W_O"),
        ("attn_bias", "attention biases"),
        ("qk_norm", "q/k norms"),
        ("latent_norms", "MLA latent norms"),
        ("sinks", "attention sinks"),
        ("mlp_weights", "MLP weights" + (" (all routed experts)" if model["n_experts"] > 1 else "")),
        ("mlp_bias", "MLP biases"),
        ("shared_expert", "shared expert (+ gate)"),
        ("router", "MoE router"),
        ("norms", "block norms"),
    ):
        # "per layer" is one MoE block's (a dense model's block); the total sums every block
        row(label, p[f"per_layer_{key}"], p[f"layers_{key}"])
    del L
    row("final norm", None, p["final_norm"])
    row("LM head", None, p["lm_head"])
    row("LM head bias", None, p["lm_head_bias"])
    t.add_section()
    t.add_row("total", f"{p['per_layer']:,}", f"{total:,}", f"{fmt_count(total)}", style="bold")
    if p["active"] != total:
        t.add_row("active per token (MoE)", "", f"{p['active']:,}", fmt_count(p["active"]))
    if p["n_moe_layers"] and p["n_dense_layers"]:
        t.add_row(
            f"  {p['n_moe_layers']} MoE + {p['n_dense_layers']} dense blocks",
            f"{p['per_dense_layer']:,}", "(per dense block)", "",
        )
    if p["mtp"]:
        t.add_row("MTP modules (checkpoint only)", "", f"{p['mtp']:,}", fmt_count(p["total_with_mtp"]) + " with")
    t.add_row("non-embedding (Kaplan N)", "", f"{p['non_embedding']:,}", fmt_count(p["non_embedding"]))

    a = _table("Seed approximations vs exact", "formula", "value", "vs exact")
    a.add_row("(4+2E)·L·D²  (blocks only)", f"{approx['seed_blocks']:,}", fmt_pct(approx["seed_blocks_rel_error"]))
    a.add_row("12·L·D² + V·D", f"{approx['seed_total']:,}", fmt_pct(approx["seed_total_rel_error"]))

    weights = (
        f"weights at p={w['bytes_per_param']} bytes/param: {fmt_bytes(w['bytes'])} ({w['bytes']:,} B)"
    )
    if w["tensor_parallel"] > 1:
        weights += (
            f"; per tensor-parallel rank (T={w['tensor_parallel']}): {w['params_per_rank']:,} params, "
            f"{fmt_bytes(w['bytes_per_rank'])}"
        )
    return Group(Text(model_summary(model), style="dim"), t, a, Text(weights))


def short_source(source: str | None) -> str:
    """'https://huggingface.co/org/name/blob/main/config.json; paper' -> 'hf:org/name'."""
    import re

    first = (source or "").split(";")[0].strip()
    first = re.sub(r"https://huggingface\.co/([^/]+/[^/]+)/.*", r"hf:\1", first)
    first = re.sub(r"\s*\(arXiv:[^)]*\)", "", first)
    return first.split(": ")[0]


def presets_table(rows: list[dict[str, Any]]) -> Any:
    """The presets; narrow terminals (and pipes: 80 columns) drop d_ff, the MLP and the source,
    never the name users type."""
    wide = _width() >= 120
    cols = ["name", "params", "L", "D", "A", "kv", "V"] + (["d_ff", "mlp", "source"] if wide else [])
    t = _table("Model presets (" + ("full sources" if wide else "d_ff, MLP and sources") + ": -f json)", *cols)
    t.columns[0].no_wrap = True
    t.columns[0].overflow = "fold"
    for r in rows:
        cells = [r["name"], fmt_count(r["params"]), str(r["n_layers"]), str(r["d_model"]), str(r["n_heads"]),
                 str(r["n_kv_heads"]), str(r["vocab_size"])]
        if wide:
            mlp = r["mlp"] + (f" {r['n_experts']}x" if r["n_experts"] > 1 else "")
            cells += [str(r["d_ff"]), mlp, short_source(r["source"])]
        t.add_row(*cells)
    if wide:
        t.columns[-1].justify = "left"
    return t


def hardware_table(rows: list[dict[str, Any]]) -> Any:
    """Numbers in the header's unit so the table fits a terminal; `-f json` has everything."""
    wide = _width() >= 110
    cols = ["name", "alias", "GB", "GB/s", "16-bit TF", "fp8 TF"] + (["fp32 TF", "λ_math", "link GB/s"] if wide else [])
    t = _table("Accelerators: dense peaks, GB = 1e9 B" + (" (λ_math = 16-bit peak / bandwidth)" if wide else ""), *cols)
    t.columns[0].no_wrap = True
    t.columns[1].no_wrap = True  # the alias users type is never cut
    for r in rows:
        peaks, lam = r["peak_flops"], r["math_bandwidth"]
        half = "bf16" if "bf16" in peaks else ("fp16" if "fp16" in peaks else None)
        link = r["interconnect_bytes_s"]
        def num(x: float) -> str:  # short enough for 80 columns; -f json has every digit
            return f"{x:.0f}" if x >= 100 else f"{x:.3g}"

        cells = [
            r["name"],
            min(r["aliases"], key=len) if r["aliases"] else "",
            num(r["memory_bytes"] / GB),
            num(r["memory_bw_bytes_s"] / GB),
            num(peaks[half] / 1e12) if half else "-",
            num(peaks["fp8"] / 1e12) if "fp8" in peaks else "-",
        ]
        if wide:
            cells += [f"{peaks['fp32'] / 1e12:g}" if "fp32" in peaks else "-",
                      f"{lam[half]:.0f}" if half else "-", f"{link / GB:g}" if link else "-"]
        t.add_row(*cells)
    return t


def gpu_detail(r: dict[str, Any]) -> Any:
    """One accelerator: every dtype's dense peak and λ_math, links, source and notes."""
    from rich.console import Group
    from rich.text import Text

    head = (
        f"{r['name']} ({r['vendor']}; also: {', '.join(r['aliases'])})\n"
        f"memory {r['memory_bytes'] / GB:g} GB = {fmt_bytes(r['memory_bytes'])}, "
        f"bandwidth {r['memory_bw_bytes_s'] / GB:g} GB/s"
    )
    if r["interconnect_bytes_s"]:
        head += f", {r['interconnect'] or 'interconnect'} {r['interconnect_bytes_s'] / GB:g} GB/s (bidirectional)"
    t = _table("Dense peak per dtype", "dtype", "TFLOP/s (TOPS for int)", "λ_math FLOP/B")
    for dtype, peak in r["peak_flops"].items():
        t.add_row(dtype, f"{peak / 1e12:g}", f"{r['math_bandwidth'][dtype]:.1f}")
    foot = f"source: {r['source']}" + ("" if r["verified"] else " (not re-verified)")
    if r["notes"]:
        foot += f"\nnotes: {r['notes']}"
    return Group(Text(head), t, Text(foot, style="dim"))


def _bar(fraction: float, width: int = 24) -> str:
    """A horizontal bar of `fraction` (0..1) of `width` cells, eighth-block resolution."""
    eighths = max(0, min(width * 8, round(fraction * width * 8)))
    full, part = divmod(eighths, 8)
    return "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")


def memory_table(report: dict[str, Any]) -> Any:
    """Per-GPU breakdown with a bar chart against the GPU's capacity (when --gpu is given)."""
    from rich.console import Group
    from rich.text import Text

    mem, par, tr, w = report["memory"], report["parallelism"], report["training"], report["workload"]
    per = mem["per_gpu"]
    peak = mem["peak"]
    gpu = report.get("gpu")
    scale = max(mem["peak_bytes"], gpu["memory_bytes"] if gpu else 0) or 1
    title = (
        f"Peak training memory per GPU: {report['model'].get('name') or 'custom model'}, "
        f"S={w['seq_len']} B={w['batch_size']} (during the {mem['peak_phase']})"
    )
    t = _table(title, "component", "bytes", "", "share")
    t.columns[2].justify = "left"
    t.columns[2].no_wrap = True
    t.columns[2].overflow = "crop"
    t.columns[2].min_width = 8
    rows = [
        ("weights", peak["weights_bytes"]),
        ("gradients", peak["gradients_bytes"]),
        ("optimizer states", peak["optimizer_bytes"]),
        ("activations", peak["activations_bytes"]),
        (f"{mem['peak_phase']} temporaries", peak["transient_bytes"]),
        ("gathered parameters (ZeRO-3)", peak["gathered_bytes"]),
        ("gradient buckets", peak["buckets_bytes"]),
    ]
    total = mem["peak_bytes"]
    for label, value in rows:
        if value or label in ("weights", "activations"):
            t.add_row(label, fmt_bytes(value), _bar(value / scale), f"{100 * value / total:.1f} %" if total else "")
    t.add_section()
    t.add_row("peak", fmt_bytes(total), _bar(total / scale), "", style="bold")
    t.add_row("sum of every term (upper bound)", fmt_bytes(mem["sum_bytes"]), "", "", style="dim")
    if gpu:
        t.add_row(f"capacity ({gpu['name']})", fmt_bytes(gpu["memory_bytes"]), _bar(gpu["memory_bytes"] / scale), "", style="dim")
    phases = "  ".join(f"{ph['phase']} {fmt_bytes(ph['total_bytes'])}" for ph in mem["phases"])
    acts = mem["activations"]
    bpp = mem["bytes_per_param"]
    ft = report.get("finetune")
    if ft:
        first = (
            f"{ft['method']} r={ft['lora_rank']} on {','.join(ft['lora_targets'])}: "
            f"{ft['trainable_params']:,} trainable of {ft['frozen_params']:,} ({100 * ft['trainable_fraction']:.2f} %); "
            f"frozen weights {ft['frozen_weight_format']}"
            + (f" ({bpp['quantized_weights'] * 8:.3f} bits)" if bpp.get("quantized_weights") else "")
            + f"; trainable {bpp['trainable_weights']}+{bpp['gradients']}+{bpp['optimizer']} bytes/param"
        )
    else:
        first = (f"{tr['precision']} precision, p={tr['p']}, {tr['optimizer']}: "
                 f"{bpp['weights']}+{bpp['gradients']}+{bpp['optimizer']} bytes/param; "
                 f"{report['params']['per_gpu']:,} params on this GPU")
    groups = mem.get("optimizer_groups", {}).get("groups", [])
    lines = [
        first,
        ("optimizer groups: " + "; ".join(
            f"{g['group']} {g['bytes_per_param']:.3g} B/param" for g in groups if g["bytes_per_param"] is not None)
         + (" (paged: unified memory, counted on the GPU)" if mem["optimizer_groups"].get("paged") else ""))
        if len(groups) > 1 or tr["optimizer"] not in ("adamw", "adam", "sgd", "sgd-momentum", "lion") else "",
        (f"FP8 ({tr['fp8_recipe']}): weight copies and scaling state {fmt_bytes(mem['weights_detail']['fp8_copies_bytes'])}"
         if tr.get("fp8_recipe", "none") != "none" else ""),
        f"T={par['tensor']}{' +SP' if par['sequence_parallel'] else ''} P={par['pipeline']} "
        f"dp={par['data']} ZeRO-{par['zero']}; recompute={tr['recompute']}"
        f"{', flash' if tr['flash'] else ''}; activations profile: {tr['activations']}",
        f"activations / model states = {mem['activation_ratio']:.3g}"
        if mem["activation_ratio"] is not None
        else "",
        f"phases: {phases}",
        f"stored activations: attention {fmt_bytes(acts['attention_bytes'])}, MLP {fmt_bytes(acts['mlp_bytes'])}, "
        f"norms {fmt_bytes(acts['norm_bytes'])}, embedding/head/loss {fmt_bytes(acts['other_bytes'])}"
        + (f", recompute working set {fmt_bytes(acts['recompute_working_bytes'])}" if acts["recompute_working_bytes"] else ""),
        f"framework conventions: {tr['framework']}; nvidia-smi would show about "
        f"{fmt_bytes(mem['nvidia_smi_bytes'])} (+ CUDA context {fmt_bytes(mem['cuda_context_bytes'])}, "
        f"allocator reserve {fmt_bytes(mem['allocator_reserve_bytes'])})",
    ]
    off = report.get("offload")
    if off:
        where = "NVMe" if off["device"] == "nvme" else "host memory"
        per_gpu = off["nvme_bytes_per_gpu"] if off["device"] == "nvme" else off["host_bytes_per_gpu"]
        per_node = off["nvme_bytes_per_node"] if off["device"] == "nvme" else off["host_bytes_per_node"]
        lines.append(f"offload {off['what']} to {where}: {fmt_bytes(per_gpu)} per GPU, {fmt_bytes(per_node)} per node "
                     f"of {off['gpus_per_node']} GPUs (the GPU holds the peak above)")
    if par["pipeline"] > 1:
        lines.append(f"most loaded pipeline stage: {mem['stage']} ({mem['in_flight_micro_batches']} micro-batches in flight)")
    lines.append(f"seed B_min (mixed precision saves memory above it): {report['b_min']:.3g}")
    if gpu:
        fit = report["fit"]
        verdict = "fits" if report["fits"] else "does NOT fit"
        lines.append(
            f"{verdict} on {gpu['name']} (usable {fmt_bytes(gpu['usable_bytes'])} after the CUDA context): "
            f"headroom {fmt_bytes(gpu['headroom_bytes'])}"
        )
        lines.append(f"largest micro-batch that fits: {fit['max_micro_batch']}")
        tp = fit["min_tensor_parallel"]
        lines.append(f"smallest T that fits (P={par['pipeline']}): {tp if tp else 'none up to 64'}")
        tpp = fit["min_tensor_pipeline"]
        lines.append("smallest T·P that fits: " + (f"T={tpp['T']} P={tpp['P']}" if tpp else "none"))
    return Group(t, Text("\n".join(line for line in lines if line)))


def check_lines(report: dict[str, Any]) -> str:
    """`tcalc check`: one plain line per file (greppable in CI logs), then a summary line."""
    lines = []
    for r in report["files"]:
        if r["status"] == "invalid":
            error = r["error"].removeprefix(f"{r['file']}: ").removeprefix(f"{r['file']} ")
            lines.append(f"INVALID {r['file']}: {error}")
            continue
        parts = []
        for c in r["checks"]:
            name = c["check"]
            if name in ("inference_min_tokens_per_s", "inference_max_ttft_s", "inference_max_tpot_s"):
                higher = name.endswith("tokens_per_s")
                verb = (">=" if c["ok"] else "<") if higher else ("<=" if c["ok"] else ">")
                what = {"inference_min_tokens_per_s": "decode tokens/s", "inference_max_ttft_s": "time to first token (s)",
                        "inference_max_tpot_s": "time per output token (s)"}[name]
                parts.append(f"{what} {c['value']:.4g} {verb} {c['limit']:g}")
                continue
            value = fmt_bytes(c["value"])
            if name.endswith("_fits_gpu"):
                verb = "fits" if c["ok"] else "exceeds"
                parts.append(f"{name.split('_')[0]} {value}/GPU {verb} {c['gpu']} ({fmt_bytes(c['limit'])})")
            elif c["limit"] is not None:
                verb = "<=" if c["ok"] else ">"
                parts.append(f"{c['check'].replace('_', ' ')} {value} {verb} {fmt_bytes(c['limit'])}")
            else:
                parts.append(f"{c['check'].replace('_', ' ')} {value}/GPU")
        detail = "; ".join(parts) if parts else "valid"
        lines.append(f"{r['status'].upper():5} {r['file']}: {detail}")
    lines.append(f"{report['passed']} passed, {report['failed']} failed, {report['invalid']} invalid")
    return "\n".join(lines) + "\n"


def fmt_flops(n: int | float) -> str:
    return fmt_rate(float(n), "FLOP")


def flops_table(report: dict[str, Any]) -> Any:
    """Forward FLOPs per component, step totals, rules of thumb, training time, sizing."""
    from rich.console import Group
    from rich.text import Text

    f, w, rules = report["flops"], report["workload"], report["rules_of_thumb"]
    L = report["model"]["n_layers"]
    name = report["model"].get("name") or "custom model"
    causal = " (causal: S²/2)" if f["causal"] else ""
    t = _table(f"Training FLOPs: {name}, S={w['seq_len']} B={w['batch_size']}{causal}", "forward", "per layer", "all layers", "share")
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
    r = _table("Per token", "count", "FLOPs/token", "vs exact")
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


def _num(x: float) -> str:
    """4 significant digits without exponents for table cells: 10180 -> '10,180', 4.443 -> '4.443'."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def fmt_s(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def inference_table(report: dict[str, Any]) -> Any:
    """Memory per GPU against capacity, and the prefill/decode roofline."""
    from rich.console import Group
    from rich.text import Text

    inf, mem, kv = report["inference"], report["memory"], report["kv_cache"]
    per, cap = mem["per_gpu"], mem["capacity_bytes"]
    scale = max(per["total_bytes"], cap) or 1
    title = (
        f"Inference: {report['model'].get('name') or 'custom model'} on {inf['gpus']} × {inf['gpu']}, "
        f"B={inf['batch_size']} S={inf['prompt_len']} new={inf['new_tokens']}"
    )
    t = _table(title, "memory per GPU", "bytes", "")
    t.columns[2].justify = "left"
    t.columns[2].no_wrap = True
    t.columns[2].overflow = "crop"
    for label, value in (
        (f"weights ({inf['weight_dtype']})", per["weights_bytes"]),
        (f"KV cache ({inf['kv_dtype']}, {kv['context_len']} tokens)", per["kv_cache_bytes"]),
        ("workspace", per["workspace_bytes"]),
    ):
        t.add_row(label, fmt_bytes(value), _bar(value / scale))
    t.add_section()
    t.add_row("total", fmt_bytes(per["total_bytes"]), _bar(per["total_bytes"] / scale), style="bold")
    t.add_row("capacity", fmt_bytes(cap), _bar(cap / scale), style="dim")

    r = _table("Per GPU (ms): roofline bound, and expected", "step", "compute", "memory", "comm", "bound",
               "limit", "FLOP/B", "expected")
    r.columns[0].no_wrap = True
    ex = report.get("expected") or {}
    for label, st, xs in (("prefill", report["prefill"], ex.get("prefill")),
                          ("decode, first", report["decode"]["first_step"], ex.get("decode_first_step")),
                          ("decode, last", report["decode"]["last_step"], ex.get("decode_last_step"))):
        r.add_row(label, _num(1e3 * st["compute_s"]), _num(1e3 * st["memory_s"]),
                  _num(1e3 * st["communication_s"]), _num(1e3 * st["time_s"]), st["bound"], _num(st["intensity"]),
                  _num(1e3 * xs["time_s"]) if xs else "")
    dec = report["decode"]
    lam = report["prefill"]["math_bandwidth"]
    cb = report["compute_bound_batch"]
    if inf.get("mla_cache") == "latent":
        what = "MLA latent, replicated on every GPU"
    elif inf.get("mla_cache") == "decompressed":
        what = "MLA decompressed to per-head K/V"
    else:
        what = f"{inf['cache_kv_heads']} K/V heads"
    kinds = kv.get("layers_by_kind") or {}
    if set(kinds) - {"full"}:
        spans = {"sliding": kv.get("sliding_window"), "chunked": kv.get("attention_chunk_size")}
        what += "; " + ", ".join(
            f"{n} {k}" + (f" (last {spans[k] - 1} tokens kept)" if spans.get(k) else "") for k, n in kinds.items()
        )
    lines = [
        f"KV cache: {fmt_bytes(kv['total_bytes'])} in all ({fmt_bytes(kv['bytes_per_token'])} per token, "
        f"{what}), {fmt_bytes(kv['per_gpu_bytes'])} per GPU",
        ("fits" if mem["fits"] else "does NOT fit") + f"; headroom {fmt_bytes(mem['headroom_bytes'])}; "
        f"largest batch at this context: {mem['max_batch_size']}; longest prompt at this batch: {mem['max_prompt_len']}; "
        f"smallest T that fits: {mem['min_tensor_parallel'] or 'none'}",
        f"time to first token {fmt_s(report['time_to_first_token_s'])}; time per output token "
        f"{fmt_s(dec['time_per_output_token_s'])} ({dec['bound']}-bound); {dec['tokens_per_s']:,.0f} tokens/s decoding; "
        f"total {fmt_s(report['total_s'])}",
        f"λ_math = {lam:.0f} FLOP/B; decode turns compute-bound at B ≈ {cb if cb else 'never (KV reads dominate)'} "
        f"(weights only: {report['compute_bound_batch_weights_only']:.0f})",
    ]
    if ex:
        a = ex["assumptions"]
        lines[2] = "bound: " + lines[2]
        lines.insert(3, (
            f"expected: time to first token {fmt_s(ex['time_to_first_token_s'])}; time per output token "
            f"{fmt_s(ex['time_per_output_token_s'])}; {ex['decode_tokens_per_s']:,.0f} tokens/s decoding; total "
            f"{fmt_s(ex['total_s'])} (matmuls at {a['matmul_efficiency']:.0%} of peak, HBM at "
            f"{a['memory_efficiency']:.0%}, {a['kernels_per_step']} kernels/step at {1e6 * a['kernel_launch_s']:g} µs "
            f"{'with' if a['cuda_graphs'] else 'without'} CUDA graphs)"))
    sp = report.get("speculative")
    if sp:
        be = sp["break_even_acceptance_rate"]
        lines.append(
            f"speculative ({sp['kind']}: {sp['draft']}, k={sp['speculative_tokens']}, α={sp['acceptance_rate']:g}): "
            f"{sp['expected_tokens_per_step']:.2f} tokens per step of {fmt_s(sp['step_s'])} "
            f"(draft {fmt_s(sp['draft_step_s'])} × k + verify {fmt_s(sp['verify_step_s'])}); time per output token "
            f"{fmt_s(sp['time_per_output_token_s'])} vs {fmt_s(sp['baseline_time_per_output_token_s'])}, "
            f"speed-up {sp['speedup']:.2f}×; pays above α = {'never' if be is None else f'{be:.3f}'}")
    sv = report.get("serving")
    if sv:
        g = sv["per_gpu"]
        lines.append(
            f"serving (paged KV, block {sv['engine']['block_size']}, {sv['engine']['memory_utilization']:.0%} of memory): "
            f"KV budget {fmt_bytes(max(g['kv_budget_bytes'], 0))} per GPU ({g['kv_blocks']:,} blocks) after weights, "
            f"CUDA context {fmt_bytes(g['cuda_context_bytes'])}, activation peak {fmt_bytes(g['activation_peak_bytes'])}, "
            f"engine workspace {fmt_bytes(g['engine_workspace_bytes'])}; {sv['max_concurrent_sequences']:,} concurrent "
            f"sequences of {sv['context_len']:,} tokens per replica ({sv['per_replica']['gpus']} GPU"
            f"{'s' if sv['per_replica']['gpus'] > 1 else ''}); longest context at B={inf['batch_size']}: "
            f"{sv['longest_context_at_batch_size']:,}")
        bm = sv["budget_matrix"]
        mt = _table("KV budget matrix: share of the cache (≤ 100 % fits)", "context",
                    *[f"B={n}" for n in bm["concurrency"]], "max B")
        for c, row, most in zip(bm["contexts"], bm["kv_fraction"], bm["max_concurrent_sequences"]):
            mt.add_row(f"{c:,}", *[("—" if f is None else f"{100 * f:,.0f} %") for f in row], f"{most:,}")
        return Group(t, r, Text("\n".join(lines)), mt)
    return Group(t, r, Text("\n".join(lines)))


def serve_table(report: dict[str, Any]) -> Any:
    """Layouts, best first: throughput, TTFT and TPOT at their concurrency; rejections with reasons."""
    from rich.console import Group
    from rich.text import Text

    sv = report["serve"]
    tg = sv["targets"]
    title = (f"Serve: {report['model'].get('name') or 'custom model'} on {sv['gpus']} × {sv['gpu']}, "
             f"prompt {sv['prompt_len']:,} + output {sv['output_len']:,} tokens")
    t = _table(title, "T", "replicas", "B", "TTFT", "TPOT", "tok/s", "tok/s/GPU", "verdict")
    for row in report["layouts"]:
        if row["concurrency"] is None:
            t.add_row(str(row["tensor_parallel"]), str(row["replicas"]), "—", "—", "—", "—", "—",
                      row["reason"] or "", style="dim")
            continue
        t.add_row(str(row["tensor_parallel"]), str(row["replicas"]), str(row["concurrency"]), fmt_s(row["ttft_s"]),
                  fmt_s(row["tpot_s"]), f"{row['tokens_per_s']:,.0f}", f"{row['tokens_per_s_per_gpu']:,.0f}",
                  "meets targets" if row["feasible"] else row["reason"] or "",
                  style=None if row["feasible"] else "dim")
    targets = ", ".join(f"{k} ≤ {v:g} s" for k, v in (("TTFT", tg["ttft_s"]), ("TPOT", tg["tpot_s"])) if v is not None)
    lines = [
        f"targets: {targets or 'none'}" + (f"; load {sv['request_rate']:g} requests/s" if sv["request_rate"] else ""),
        f"model: {sv['batching']}",
        "best: " + (f"T={report['best']['tensor_parallel']} × {report['best']['replicas']} replicas, "
                    f"B={report['best']['concurrency']}, {report['best']['tokens_per_s']:,.0f} output tokens/s"
                    if report["best"] else "no layout meets the targets"),
    ]
    return Group(t, Text("\n".join(lines)))


TABLE_MAX_ROWS = 200  # a terminal table of 10,000 rows helps nobody and takes rich seconds

_SWEEP_FORMATS: dict[str, Any] = {
    **{m: fmt_bytes for m in ("peak_bytes", "weights_bytes", "activations_bytes", "headroom_bytes", "kv_cache_bytes",
                              "inference_memory_bytes")},
    "model_flops": fmt_flops, "hardware_flops": fmt_flops,
    **{m: (lambda x: fmt_s(x)) for m in ("time_to_first_token_s", "time_per_output_token_s", "total_s")},
    "tokens_per_s": lambda x: f"{x:,.0f}", "decode_tokens_per_s": lambda x: f"{x:,.0f}",
    "train_days": lambda x: f"{x:.2f}",
}  # fmt: skip


def sweep_table(report: dict[str, Any]) -> Any:
    """One row per point; axes with a single value are shown once in the title instead.
    `shown_of` (when the report holds only the first rows) is how many points were kept."""
    from rich.console import Group
    from rich.text import Text

    rows = report["points"]
    kept = report.get("shown_of", len(rows))
    varying = [a for a, v in report["axes"].items() if len(v) > 1]
    fixed = {a: v[0] for a, v in report["axes"].items() if len(v) == 1}
    title = "Sweep: " + (", ".join(f"{k}={_cell(v)}" for k, v in fixed.items()) or "all axes vary")
    t = _table(title, *varying, *report["metrics"])
    for r in rows[:TABLE_MAX_ROWS]:
        cells = [str(r.get(a)) for a in varying]
        for m in report["metrics"]:
            value = r.get(m)
            fmt = _SWEEP_FORMATS.get(m)
            cells.append("-" if value is None else (fmt(value) if fmt else str(value)))
        t.add_row(*cells)
    shown = min(len(rows), TABLE_MAX_ROWS)
    foot = f"{shown} of {report['points_total']} points shown"
    if kept > shown:
        foot += f" (the table stops at {TABLE_MAX_ROWS}: use --sort/--limit, or --format csv|json for all {kept})"
    if report["skipped"]:
        foot += f"; {report['skipped']} skipped (the model cannot run them), e.g. {report['skipped_reasons'][0]}"
    return Group(t, Text(foot, style="dim"))


def sweep_csv(columns: tuple[str, ...] | list[str], rows: Any) -> Any:
    """CSV text of sweep rows, piece by piece (a generator): the header, then the rows as they
    come. Cells as `to_csv` writes them (booleans lowercase, None empty)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    n = 0
    for row in rows:
        writer.writerow([_cell(row[c]) for c in columns])
        n += 1
        if n % 512 == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def sweep_json(head: dict[str, Any], rows: Any, tail: Any) -> Any:
    """Exactly `to_json({**head, "points": rows, **tail()})`, piece by piece (a generator): the
    points are written as they come, and `tail()` is called after the last one."""

    def item(key: str, value: Any) -> str:
        return f"  {json.dumps(key)}: " + json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")

    yield "{\n" + "".join(item(k, v) + ",\n" for k, v in head.items()) + '  "points": ['
    pieces, n = [], 0
    for row in rows:
        pieces.append(("\n    " if n == 0 else ",\n    ")
                      + json.dumps(row, indent=2, ensure_ascii=False).replace("\n", "\n    "))
        n += 1
        if n % 512 == 0:
            yield "".join(pieces)
            pieces = []
    yield "".join(pieces) + ("\n  ]" if n else "]")
    yield "".join(",\n" + item(k, v) for k, v in tail().items()) + "\n}\n"


_PLOT_UNITS: dict[str, tuple[float, str]] = {
    **{m: (2**30, "GiB") for m in ("peak_bytes", "weights_bytes", "activations_bytes", "headroom_bytes",
                                   "kv_cache_bytes", "inference_memory_bytes")},
    "model_flops": (1e12, "TFLOP"), "hardware_flops": (1e12, "TFLOP"),
    **{m: (1e-3, "ms") for m in ("time_to_first_token_s", "time_per_output_token_s", "total_s")},
    "tokens_per_s": (1.0, "tokens/s"), "decode_tokens_per_s": (1.0, "tokens/s"), "train_days": (1.0, "days"),
}  # fmt: skip


def plot_sweep(report: dict[str, Any], path: str, x: str, y: str, series: str | None, capacity: int | None) -> None:
    """A line per series value of y against x; a dashed capacity line for memory metrics.

    Needs matplotlib (`pip install 'transformer-calc[plot]'`); the format follows the file suffix
    (png, svg, pdf).
    """
    from transformer_calc.errors import TcalcError

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TcalcError("--plot needs matplotlib: pip install 'transformer-calc[plot]'") from None
    scale, unit = _PLOT_UNITS.get(y, (1.0, ""))
    groups: dict[Any, list[tuple[Any, float]]] = {}
    for r in report["points"]:
        if r.get(y) is None or isinstance(r.get(y), (bool, str)):
            continue
        groups.setdefault(r.get(series) if series else None, []).append((r[x], r[y] / scale))
    if not groups:
        raise TcalcError(f"--plot: no numeric values of {y} to plot")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, pts in groups.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{series}={key}" if series else y)
    if capacity and unit == "GiB":
        ax.axhline(capacity / scale, color="red", linestyle="--", label="GPU capacity")
    numeric_x = all(isinstance(p[0], (int, float)) and not isinstance(p[0], bool) for pts in groups.values() for p in pts)
    if numeric_x and len({p[0] for pts in groups.values() for p in pts}) > 2:
        xs = [p[0] for pts in groups.values() for p in pts]
        if min(xs) > 0 and max(xs) / min(xs) >= 8:
            ax.set_xscale("log", base=2)
    ax.set_xlabel(x)
    ax.set_ylabel(f"{y} ({unit})" if unit else y)
    ax.set_title(f"tcalc sweep: {y} vs {x}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise TcalcError(f"--plot {path!r}: cannot write the figure ({exc})") from None
    finally:
        plt.close(fig)


def train_table(report: dict[str, Any]) -> Any:
    """`tcalc train`: the step-time breakdown, throughput, MFU, memory, budget."""
    from rich.console import Group
    from rich.text import Text

    lay, batch = report["layout"], report["batch"]
    step = report["step_time_s"]
    t = _table(
        f"Training step: {report['model'].get('name') or 'custom model'} on {lay['gpus']} x {report['gpu']}",
        "term", "seconds", "share",
    )
    for key, value in report["breakdown"].items():
        if value:
            t.add_row(key.removesuffix("_s").replace("_", " "), f"{value:.4g}", f"{100 * value / step:.1f} %")
    t.add_section()
    t.add_row("step time", f"{step:.4g}", "", style="bold")
    mem = report["memory"]
    lines = [
        f"T={lay['tensor']}{' +SP' if lay['sequence_parallel'] else ''} P={lay['pipeline']} v={lay['virtual_stages']} "
        f"CP={lay['context']} EP={lay['expert']} dp={lay['data']} ZeRO-{lay['zero']}; S={batch['seq_len']}, global batch "
        f"{batch['global_batch']} sequences ({batch['global_batch_tokens']:,} tokens), micro-batch {batch['micro_batch']}"
        + (" (the fastest that fits)" if batch["micro_batch_chosen"] else "") + f", {batch['micro_batches']} micro-batches per replica",
        f"MFU {100 * report['mfu']:.1f} %, HFU {100 * report['hfu']:.1f} %, {report['tflops_per_gpu']:.0f} TFLOP/s per GPU (model), "
        f"{report['tokens_per_s']:,.0f} tokens/s ({report['tokens_per_s_per_gpu']:,.0f} per GPU)",
        f"peak memory {fmt_bytes(mem['peak_bytes'])} ({mem['peak_phase']}) of {fmt_bytes(mem['usable_bytes'])} usable: "
        + ("fits" if mem["fits"] else "does NOT fit"),
        "assumptions: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in report["assumptions"].items()),
    ]
    if "budget" in report:
        b = report["budget"]
        lines.append(f"{b['tokens']:,} tokens: {b['days']:.1f} days, {b['gpu_hours']:,.0f} GPU-hours"
                     + (f", cost {b['cost']:,.0f}" if "cost" in b else ""))
    return Group(t, Text("\n".join(lines)))


def plan_table(report: dict[str, Any]) -> Any:
    """`tcalc plan`: the fastest layouts that fit, and the rejected counted by reason."""
    from rich.console import Group
    from rich.text import Text

    t = _table(
        f"Layouts for {report['model'].get('name') or 'custom model'} on {report['gpus']} x {report['gpu']}, "
        f"S={report['seq_len']}, global batch {report['global_batch']}",
        "T", "P", "v", "CP", "EP", "dp", "b", "recompute", "step s", "MFU", "peak",
    )
    for r in report["plans"]:
        lay = r["layout"]
        t.add_row(str(lay["tensor"]), str(lay["pipeline"]), str(lay["virtual_stages"]), str(lay["context"]),
                  str(lay["expert"]), str(lay["data"]), str(r["micro_batch"]), r["recompute"],
                  f"{r['step_time_s']:.3g}", f"{100 * r['mfu']:.1f} %", fmt_bytes(r["peak_bytes"]))
    lines = [f"{report['feasible']} of {report['evaluated']} layouts fit"]
    lines += [f"  rejected {n}: {why}" for why, n in sorted(report["rejected"].items(), key=lambda kv: -kv[1])]
    if report["best_command"]:
        lines.append("best: " + report["best_command"])
    return Group(t, Text("\n".join(lines)))


def checkpoint_table(ck: dict[str, Any]) -> Any:
    """What a checkpoint stores (its headers), per component and per dtype, beside the config."""
    from rich.console import Group
    from rich.text import Text

    if not ck.get("available"):
        return Text(f"checkpoint: stored bytes unknown ({ck.get('note')})", style="dim")
    t = _table(f"Checkpoint: {ck['source']} ({ck['format']}, {ck['files']} file{'s' if ck['files'] != 1 else ''}, "
               f"{ck['tensors']:,} tensors)", "component", "params", "config's", "bytes", "scales")
    for comp, row in ck["by_component"].items():
        t.add_row(comp, f"{row['params']:,}", f"{row['expected_params']:,}", fmt_bytes(row["bytes"]),
                  fmt_bytes(row["scale_bytes"]) if row["scale_bytes"] else "")
    t.add_section()
    t.add_row("total", f"{ck['params']:,}", f"{ck['expected_params']:,}", fmt_bytes(ck["stored_bytes"] - ck["scale_bytes"]),
              fmt_bytes(ck["scale_bytes"]) if ck["scale_bytes"] else "", style="bold")
    dtypes = ", ".join(f"{name} {fmt_bytes(row['bytes'])}" for name, row in ck["by_dtype"].items())
    lines = [f"stored: {fmt_bytes(ck['stored_bytes'])} ({ck['stored_bytes']:,} B) in {dtypes}"
             + (f"; quantization {ck['quantization']}" if ck.get("quantization") else "")]
    if ck["resident_bytes"] != ck["stored_bytes"]:
        lines.append(f"loaded for serving: {fmt_bytes(ck['resident_bytes'])} (MTP modules left out)")
    for comp, row in ck["unaccounted"].items():
        sign = "more" if row["params"] > 0 else "fewer"
        lines.append(f"{comp}: the checkpoint stores {abs(row['params']):,} {sign} parameters than the config accounts for"
                     + (f" (e.g. {', '.join(row['examples'])})" if row["examples"] else ""))
    if ck.get("note"):
        lines.append(ck["note"])
    return Group(t, Text("\n".join(lines)))
