"""`tcalc inference` as tables: memory against capacity, the roofline, expected latency."""

from __future__ import annotations

from typing import Any

from transformer_calc.render.common import with_assumed, bar, fmt_bytes, fmt_s, num, styled_table


def inference_table(r: Any) -> Any:
    """Memory per GPU against capacity, and the prefill/decode roofline (an InferenceResult)."""
    from rich.text import Text

    lines = _summary_lines(r) + _extra_lines(r)
    if r.serving is None:
        return with_assumed(r, _memory_table(r), _roofline_table(r), Text("\n".join(lines)))
    lines.append(_capacity_line(r))
    return with_assumed(r, _memory_table(r), _roofline_table(r), Text("\n".join(lines)), _budget_matrix(r.serving))


def _memory_table(r: Any) -> Any:
    """Weights, cache, decode state and workspace per GPU, each as a bar against the larger of total and capacity."""
    inf, mem, kv = r.inference, r.memory, r.kv_cache
    per, cap = mem.per_gpu, mem.capacity_bytes
    scale = max(per.total_bytes, cap) or 1
    title = (
        f"Inference: {r.model.name or 'custom model'} on {inf.gpus} × {inf.gpu}, "
        f"B={inf.batch_size} S={inf.prompt_len} new={inf.new_tokens}"
        + (f" ({inf.images} images in S)" if getattr(inf, "images", None) else "")
    )
    t = styled_table(title, "memory per GPU", "bytes", "")
    t.columns[2].justify = "left"
    t.columns[2].no_wrap = True
    t.columns[2].overflow = "crop"
    for label, value in (
        (f"weights ({inf.weight_dtype})", per.weights_bytes),
        (f"KV cache ({inf.kv_dtype}, {kv.context_len} tokens)", per.kv_cache_bytes),
        *([(f"decode state ({r.decode_state.state_dtype}, constant in S)", per.state_bytes)]
          if r.decode_state is not None and per.state_bytes is not None else []),
        ("workspace", per.workspace_bytes),
    ):
        t.add_row(label, fmt_bytes(value), bar(value / scale))
    t.add_section()
    t.add_row("total", fmt_bytes(per.total_bytes), bar(per.total_bytes / scale), style="bold")
    t.add_row("capacity", fmt_bytes(cap), bar(cap / scale), style="dim")
    return t


def _roofline_table(r: Any) -> Any:
    """Prefill, first and last decode step: the roofline's terms and the expected time, in ms."""
    rt = styled_table("Per GPU (ms): roofline bound, and expected", "step", "compute", "memory", "comm", "bound",
                      "limit", "FLOP/B", "expected")
    rt.columns[0].no_wrap = True
    ex, dec = r.expected, r.decode
    for label, st, xs in (("prefill", r.prefill, ex.prefill),
                          ("decode 1st", dec.first_step, ex.decode_first_step),
                          ("decode end", dec.last_step, ex.decode_last_step)):
        rt.add_row(label, num(1e3 * st.compute_s), num(1e3 * st.memory_s), num(1e3 * st.communication_s),
                   num(1e3 * st.time_s), st.bound, num(st.intensity), num(1e3 * xs.time_s))
    return rt


def _kv_what(r: Any) -> str:
    """What the KV cache holds: heads or MLA form, and the layers by attention kind."""
    inf, kv = r.inference, r.kv_cache
    if inf.mla_cache == "latent":
        what = "MLA latent, replicated on every GPU"
    elif inf.mla_cache == "decompressed":
        what = "MLA decompressed to per-head K/V"
    else:
        what = f"{inf.cache_kv_heads} K/V heads"
        if getattr(r.model, "sliding_kv_heads", None):  # MiMo-V2-Flash: the sliding layers have their own
            what += f" ({r.model.sliding_kv_heads} on the sliding layers)"
    kinds = kv.layers_by_kind
    if getattr(r, "deepseek_v4_state", None) is not None:  # its cache is the decode state below
        what, kinds = "one K = V head; window and compressed entries, by part below", {}
    if r.decode_state is not None and set(kinds) == {"full"}:  # a hybrid: only these layers cache K/V
        what += f"; the {kinds['full']} full-attention layers"
    if set(kinds) - {"full"}:
        spans = {"sliding": kv.sliding_window, "chunked": kv.attention_chunk_size}
        what += "; " + ", ".join(
            f"{n} {k}" + (f" (last {spans[k] - 1} tokens kept)" if spans.get(k) else "") for k, n in kinds.items()
        )
    return what


def _state_lines(r: Any) -> list[str]:
    """The KV cache, and the decode state of a hybrid or of DeepSeek-V4, in words."""
    kv = r.kv_cache
    v4 = getattr(r, "deepseek_v4_state", None)
    lines = [
        f"KV cache: {fmt_bytes(kv.total_bytes)} in all ("
        + ("" if v4 is not None else f"{fmt_bytes(kv.bytes_per_token)} per token, ")
        + f"{_kv_what(r)}), {fmt_bytes(kv.per_gpu_bytes)} per GPU"
    ]
    if (d := r.decode_state) is not None:
        lines.append(
            f"decode state ({', '.join(f'{n} {k} layers' for k, n in d.layers_by_kind.items())}): "
            f"{fmt_bytes(d.bytes_per_sequence)} per sequence whatever the context (conv "
            f"{fmt_bytes(d.conv_bytes_per_sequence)} in {d.conv_dtype}, recurrent "
            f"{fmt_bytes(d.recurrent_bytes_per_sequence)} in {d.state_dtype}), "
            f"{fmt_bytes(d.per_gpu_bytes)} per GPU")
    if (v := v4) is not None:
        lines.append(
            f"DeepSeek-V4 decode state (the KV cache; {v.layers_by_kind['csa']} CSA layers m={v.compress_rates['csa']}, "
            f"{v.layers_by_kind['hca']} HCA m'={v.compress_rates['hca']}, {v.layers_by_kind['sliding']} sliding only) "
            f"at {v.context_len:,} tokens: window {fmt_bytes(v.window_bytes_per_sequence)}, compressed entries "
            f"{fmt_bytes(v.compressed_bytes_per_sequence)} (growing, "
            f"{fmt_bytes(v.compressed_bytes_per_sequence / v.context_len)} per token on average), open windows "
            f"{fmt_bytes(v.buffer_bytes_per_sequence + v.overlap_bytes_per_sequence)}; "
            f"{fmt_bytes(v.bytes_per_sequence)} per sequence, {fmt_bytes(v.per_gpu_bytes)} per GPU")
    return lines


def _summary_lines(r: Any) -> list[str]:
    """The cache and state, whether it fits, the bound and expected latencies, and the compute-bound batch."""
    inf, mem, ex, dec = r.inference, r.memory, r.expected, r.decode
    a = ex.assumptions
    cb = r.compute_bound_batch
    sb = mem.static_batch
    return [
        *_state_lines(r),
        (f"B={inf.batch_size} " + ("fits" if mem.fits else "does NOT fit")) + f"; headroom {fmt_bytes(mem.headroom_bytes)}; "
        f"smallest T at which it fits: {mem.min_tensor_parallel or 'none'}",
        *([f"static batch (HF generate, --static-batch): largest batch at this context: {sb.max_batch_size}; "
           f"longest prompt at this batch: {sb.max_prompt_len}"] if sb is not None else []),
        f"bound: time to first token {fmt_s(r.time_to_first_token_s)}; time per output token "
        f"{fmt_s(dec.time_per_output_token_s)} ({dec.bound}-bound); {dec.tokens_per_s:,.0f} tokens/s decoding; "
        f"total {fmt_s(r.total_s)}",
        f"expected: time to first token {fmt_s(ex.time_to_first_token_s)}; time per output token "
        f"{fmt_s(ex.time_per_output_token_s)}; {ex.decode_tokens_per_s:,.0f} tokens/s decoding; total "
        f"{fmt_s(ex.total_s)} (matmuls at {a.matmul_efficiency:.0%} of peak, HBM at "
        f"{a.memory_efficiency:.0%}, {a.kernels_per_step} kernels/step at {1e6 * a.kernel_launch_s:g} µs "
        f"{'with' if a.cuda_graphs else 'without'} CUDA graphs)",
        f"λ_math = {r.prefill.math_bandwidth:.0f} FLOP/B; "
        + (f"decode turns compute-bound at B ≈ {cb}" if cb else
           "decode stays memory-bound at every B (each sequence's KV reads grow with B as its FLOPs do)")
        + f"; counting the weights alone it would turn at B ≈ {r.compute_bound_batch_weights_only:.0f}",
    ]


def _extra_lines(r: Any) -> list[str]:
    """Speculative decoding, towers, calibration and an assumed KV dtype, each when present."""
    lines = []
    sp = r.speculative
    if sp is not None:
        be = sp.break_even_acceptance_rate
        lines.append(
            f"speculative ({sp.kind}: {sp.draft}, k={sp.speculative_tokens}, α={sp.acceptance_rate:g}): "
            f"{sp.expected_tokens_per_step:.2f} tokens per step of {fmt_s(sp.step_s)} "
            f"(draft {fmt_s(sp.draft_step_s)} × k + verify {fmt_s(sp.verify_step_s)}); time per output token "
            f"{fmt_s(sp.time_per_output_token_s)} vs {fmt_s(sp.baseline_time_per_output_token_s)}, "
            f"speed-up {sp.speedup:.2f}×; pays above α = {'never' if be is None else f'{be:.3f}'}")
    if getattr(r, "towers", None) is not None:  # a multimodal model: what this result does with its towers
        lines.append(f"towers: {r.towers.note}")
    if getattr(r, "calibration", None) is not None:
        from transformer_calc.render.calibrate import calibration_line

        lines.append(calibration_line(r.calibration))
    source = getattr(r.inference, "kv_dtype_source", None)
    if source not in (None, "given"):
        lines.append(f"KV cache {r.inference.kv_dtype}: assumed, {source}")
    return lines


def _capacity_line(r: Any) -> str:
    """The paged cache's budget after weights, context and workspace, and the concurrency it holds."""
    sv, inf = r.serving, r.inference
    g, eng = sv.per_gpu, sv.engine
    of = {"total": "of all memory", "static": "of all memory for weights + cache", "free": "of the memory left free"}
    cap = "no cap" if eng.max_num_seqs is None else f"max {eng.max_num_seqs:,}"
    return (
        f"capacity (paged KV cache, {eng.engine}: block {eng.block_size}, {eng.memory_utilization:.0%} "
        f"{of.get(eng.memory_fraction_of, '')}): KV budget {fmt_bytes(max(g.kv_budget_bytes, 0))} per GPU "
        f"({g.kv_blocks:,} blocks) after weights, CUDA context {fmt_bytes(g.cuda_context_bytes)}, activation peak "
        f"{fmt_bytes(g.activation_peak_bytes)}, engine workspace {fmt_bytes(g.engine_workspace_bytes)}; "
        f"{sv.max_concurrent_sequences:,} concurrent sequences of {sv.context_len:,} tokens per replica "
        f"({sv.per_replica.gpus} GPU{'s' if sv.per_replica.gpus > 1 else ''}; the engine's {cap} per step); "
        f"longest context at B={inf.batch_size}: {sv.longest_context_at_batch_size:,}"
        + (" (the model's context window K; the cache would hold more)"
           if sv.longest_context_at_batch_size == r.model.max_seq_len else ""))


def _budget_matrix(sv: Any) -> Any:
    """The share of the cache that each (context, concurrency) pair takes."""
    bm = sv.budget_matrix
    mt = styled_table("KV budget matrix: share of the cache (≤ 100 % fits)", "context",
                      *[f"B={n}" for n in bm.concurrency], "max B")
    for c, row, most in zip(bm.contexts, bm.kv_fraction, bm.max_concurrent_sequences):
        mt.add_row(f"{c:,}", *[("—" if f is None else f"{100 * f:,.0f} %") for f in row], f"{most:,}")
    return mt
