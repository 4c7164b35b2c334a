"""`tcalc memory` as a table: the peak, its phase and breakdown, the fit."""

from __future__ import annotations

from typing import Any

from transformer_calc.render.common import bar, fmt_bytes, styled_table, with_assumed


def memory_table(r: Any) -> Any:
    """Per-GPU breakdown with a bar chart against the GPU's capacity (when --gpu is given), of a
    `results.memory.MemoryResult`."""
    from rich.text import Text

    lines = [_precision_line(r), *_setup_lines(r), *_layout_lines(r), *_fit_lines(r)]
    if getattr(r, "towers", None) is not None:  # a multimodal model: what this result does with its towers
        lines.append(f"towers: {r.towers.note}")
    return with_assumed(r, _breakdown_table(r), Text("\n".join(line for line in lines if line)))


def _breakdown_table(r: Any) -> Any:
    """The peak's terms, each a bar against the larger of the peak and the GPU's capacity, with its share."""
    mem, w, gpu = r.memory, r.workload, r.gpu
    peak = mem.peak
    scale = max(mem.peak_bytes, gpu.memory_bytes if gpu else 0) or 1
    title = (
        f"Peak training memory per GPU: {r.model.name or 'custom model'}, "
        f"S={w.seq_len} B={w.batch_size} (during the {mem.peak_phase})"
    )
    t = styled_table(title, "component", "bytes", "", "share")
    t.columns[2].justify = "left"
    t.columns[2].no_wrap = True
    t.columns[2].overflow = "crop"
    t.columns[2].min_width = 8
    rows = [
        ("weights", peak.weights_bytes),
        ("gradients", peak.gradients_bytes),
        ("optimizer states", peak.optimizer_bytes),
        ("activations", peak.activations_bytes),
        (f"{mem.peak_phase} temporaries", peak.transient_bytes),
        ("gathered parameters (ZeRO-3)", peak.gathered_bytes),
        ("gradient buckets", peak.buckets_bytes),
    ]
    total = mem.peak_bytes
    for label, value in rows:
        if value or label in ("weights", "activations"):
            t.add_row(label, fmt_bytes(value), bar(value / scale), f"{100 * value / total:.1f} %" if total else "")
    t.add_section()
    t.add_row("peak", fmt_bytes(total), bar(total / scale), "", style="bold")
    t.add_row("sum of every term (upper bound)", fmt_bytes(mem.sum_bytes), "", "", style="dim")
    if gpu:
        t.add_row(f"capacity ({gpu.name})", fmt_bytes(gpu.memory_bytes), bar(gpu.memory_bytes / scale), "", style="dim")
    return t


def _precision_line(r: Any) -> str:
    """Bytes per parameter: the adapters' for a fine-tune, else the precision's and where the parameters live."""
    par, tr, ft, bpp = r.parallelism, r.training, r.finetune, r.memory.bytes_per_param
    if ft:
        return (
            f"{ft.method.value} r={ft.lora_rank} on {','.join(target.value for target in ft.lora_targets)}: "
            f"{ft.trainable_params:,} trainable of {ft.frozen_params:,} ({100 * ft.trainable_fraction:.2f} %); "
            f"frozen weights {ft.frozen_weight_format}"
            + (f" ({bpp.quantized_weights * 8:.3f} bits)" if bpp.quantized_weights else "")
            + f"; trainable {bpp.trainable_weights}+{bpp.gradients}+{bpp.optimizer} bytes/param"
        )
    return (f"{tr.precision.value} precision, p={tr.p}, {tr.optimizer.value}: "
            f"{bpp.weights}+{bpp.gradients}+{bpp.optimizer} bytes/param; "
            + (f"{r.params.per_gpu:,} params per model-parallel rank, 1/{par.data} of them stored on this GPU "
               f"(ZeRO-3)" if par.zero == 3 and par.data > 1 else f"{r.params.per_gpu:,} params on this GPU"))


def _setup_lines(r: Any) -> list[str]:
    """Optimizer groups, FP8 copies, the layout, the phases and the stored activations ('' where absent)."""
    mem, par, tr = r.memory, r.parallelism, r.training
    acts = mem.activations
    groups = mem.optimizer_groups.groups
    phases = "  ".join(f"{ph.phase} {fmt_bytes(ph.total_bytes)}" for ph in mem.phases)
    return [
        ("optimizer groups: " + "; ".join(
            f"{g.group} {g.bytes_per_param:.3g} B/param" for g in groups if g.bytes_per_param is not None)
         + (" (paged: unified memory, counted on the GPU)" if mem.optimizer_groups.paged else ""))
        if len(groups) > 1 or tr.optimizer.value not in ("adamw", "adam", "sgd", "sgd-momentum", "lion") else "",
        (f"FP8 ({tr.fp8_recipe.value}): weight copies and scaling state {fmt_bytes(mem.weights_detail.fp8_copies_bytes)}"
         if tr.fp8_recipe.value != "none" else ""),
        f"T={par.tensor}{' +SP' if par.sequence_parallel else ''} P={par.pipeline} "
        f"dp={par.data} ZeRO-{par.zero}; recompute={tr.recompute.value}"
        f"{', flash' if tr.flash else ''}; activations profile: {tr.activations.value}",
        f"activations / model states = {mem.activation_ratio:.3g}"
        if mem.activation_ratio is not None
        else "",
        f"phases: {phases}",
        f"stored activations: attention {fmt_bytes(acts.attention_bytes)}, MLP {fmt_bytes(acts.mlp_bytes)}, "
        f"norms {fmt_bytes(acts.norm_bytes)}, embedding/head/loss {fmt_bytes(acts.other_bytes)}"
        + (f", recompute working set {fmt_bytes(acts.recompute_working_bytes)}" if acts.recompute_working_bytes else ""),
        f"framework conventions: {tr.framework.value}; nvidia-smi would show about "
        f"{fmt_bytes(mem.nvidia_smi_bytes)} (+ CUDA context {fmt_bytes(mem.cuda_context_bytes)}, "
        f"allocator reserve {fmt_bytes(mem.allocator_reserve_bytes)})",
    ]


def _layout_lines(r: Any) -> list[str]:
    """Offload, the most loaded pipeline stage and the seed's B_min."""
    mem, par, off = r.memory, r.parallelism, r.offload
    lines = []
    if off:
        nvme = off.device.value == "nvme"
        where = "NVMe" if nvme else "host memory"
        per_gpu = off.nvme_bytes_per_gpu if nvme else off.host_bytes_per_gpu
        per_node = off.nvme_bytes_per_node if nvme else off.host_bytes_per_node
        lines.append(f"offload {off.what.value} to {where}: {fmt_bytes(per_gpu)} per GPU, {fmt_bytes(per_node)} per node "
                     f"of {off.gpus_per_node} GPUs (the GPU holds the peak above)")
    if par.pipeline > 1:
        alive = "micro-batches" if par.virtual_stages == 1 else "model-chunk forwards"
        lines.append(f"most loaded pipeline stage: {mem.stage} ({mem.in_flight_micro_batches} {alive} in flight)")
    lines.append(f"seed B_min (mixed precision saves memory above it): {r.b_min:.3g}")
    return lines


def _fit_lines(r: Any) -> list[str]:
    """Whether it fits the GPU, the largest micro-batch and the smallest T and T·P that fit (with --gpu)."""
    gpu, par, fit = r.gpu, r.parallelism, r.fit
    if not gpu:
        return []
    verdict = "fits" if r.fits else "does NOT fit"
    tp, tpp = fit.min_tensor_parallel, fit.min_tensor_pipeline
    return [
        f"{verdict} on {gpu.name} (usable {fmt_bytes(gpu.usable_bytes)} after the CUDA context): "
        f"headroom {fmt_bytes(gpu.headroom_bytes)}",
        f"largest micro-batch that fits: {fit.max_micro_batch}" if fit.max_micro_batch
        else "no micro-batch fits: even B=1 needs more than the usable memory",
        f"smallest T that fits (P={par.pipeline}): {tp if tp else 'none up to 64'}",
        "smallest T·P that fits: " + (f"T={tpp.T} P={tpp.P}" if tpp else "none"),
    ]
