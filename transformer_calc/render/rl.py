"""`tcalc rl` as tables: the step's phases with their time and share, then memory per GPU per phase."""

from __future__ import annotations

from typing import Any

from transformer_calc.render.common import bar, fmt_bytes, fmt_s, styled_table, with_assumed

PHASE_NAMES = {"policy_log_prob": "policy log-prob", "reference_log_prob": "reference log-prob",
               "critic_values": "critic values", "policy_update": "policy update", "critic_update": "critic update",
               "weight_sync": "weight sync"}


def rl_table(r: Any) -> Any:
    """`tcalc rl`: the phases (time, share), the throughput, the memory of each phase (an RlResult)."""
    from rich.console import Group
    from rich.text import Text

    s, ro, tr = r.rl, r.rollout, r.trainer
    where = (f"{s.gpus} x {s.gpu} colocated" if s.placement == "colocated" else
             f"{s.trainer_gpus} trainer + {s.rollout_gpus} engine x {s.gpu}")
    t = styled_table(f"RL step ({s.algorithm}): {r.model.name or 'custom model'} on {where}", "phase", "time",
                     "share", "")
    for p in r.phases:
        if p.time_s:
            t.add_row(PHASE_NAMES.get(p.phase, p.phase), fmt_s(p.time_s), f"{100 * p.share:.1f} %", bar(p.share))
    t.add_section()
    overlap = " (one step off-policy: generation overlaps the trainer)" if s.off_policy_steps else ""
    t.add_row("step time" + overlap, fmt_s(r.step_time_s), "", "", style="bold")
    lines = [
        f"{s.prompts_per_step} prompts x G={s.group_size} = {s.samples_per_step} samples; P={s.prompt_len}, "
        f"responses {s.response_len_dist} mean {s.response_len_mean:.0f}, max {s.max_response_len} "
        f"({100 * s.clipped_fraction:.1f} % clipped)" + (", partial rollouts" if s.partial_rollouts else ""),
        f"rollout: {ro.replicas} x {ro.engine.engine} T={ro.tensor}, {ro.samples_per_replica} samples per replica, "
        f"{ro.concurrency} in flight (KV room for {ro.max_concurrent_sequences}); queue {fmt_s(ro.queue_s)}, "
        f"tail {fmt_s(ro.tail_s)} to the longest ({ro.longest_response_len:.0f} tokens); {ro.tokens_per_s:,.0f} tokens/s",
        f"trainer: {tr.framework} T={tr.layout.tensor} P={tr.layout.pipeline} CP={tr.layout.context} "
        f"dp={tr.layout.data} ZeRO-{tr.layout.zero}, recompute {tr.recompute}; {tr.global_batch} sequences of "
        f"{tr.seq_len} per optimizer step, {fmt_s(tr.update_step_s)} each, MFU {100 * tr.mfu:.1f} %",
        f"sync: {fmt_bytes(r.sync.bytes)} in {r.sync.dtype} over {r.sync.link}",
        f"{r.samples_per_s:.3g} samples/s, {r.tokens_per_s:,.0f} tokens/s ({r.tokens_per_s_per_gpu:,.0f} per GPU); "
        f"generation {100 * r.generation_share:.1f} % of the step",
    ]
    mem = r.memory
    # one column per phase (the components down the side): four phases fit 80 columns, seven components do not
    split = len({row.pool for row in mem.phases}) > 1  # the pool row only when the pools differ
    mt = styled_table(f"Memory per GPU: peak {fmt_bytes(mem.peak_bytes)} ({mem.peak_phase}, {mem.peak_pool}) of "
                      f"{fmt_bytes(mem.capacity_bytes)}: " + ("fits" if mem.fits else "does NOT fit"),
                      "per GPU", *(row.phase for row in mem.phases))
    mt.columns[0].min_width = len("ref + critic")  # the longest label, never wrapped
    engine = [row.engine_weights_bytes + row.kv_cache_bytes + row.engine_reserve_bytes for row in mem.phases]
    if split:
        mt.add_row("pool", *(row.pool for row in mem.phases))
    mt.add_row("trainer", *(fmt_bytes(row.trainer_bytes) for row in mem.phases))
    mt.add_row("work", *(fmt_bytes(row.trainer_work_bytes + row.sync_buffer_bytes) for row in mem.phases))
    mt.add_row("ref + critic", *(fmt_bytes(row.reference_bytes + row.critic_bytes) for row in mem.phases))
    mt.add_row("engine", *(fmt_bytes(e) for e in engine))
    mt.add_row("of it KV", *(fmt_bytes(row.kv_cache_bytes) for row in mem.phases))
    mt.add_row("total", *(Text(fmt_bytes(row.total_bytes), style="" if row.fits else "bold red") for row in mem.phases),
               end_section=True)
    parts = [t, Text("\n".join(lines)), mt]
    if r.split_plan:
        st = styled_table(f"Splits of {s.gpus} GPUs (--rollout-gpus auto; chosen: {s.rollout_gpus} engine GPUs)",
                          "engine", "trainer", "step", "generation", "trainer work", "fits")
        for row in r.split_plan:
            if row.step_time_s is None:
                st.add_row(str(row.rollout_gpus), str(row.trainer_gpus), "refused", row.reason or "", "", "")
                continue
            st.add_row(str(row.rollout_gpus), str(row.trainer_gpus), fmt_s(row.step_time_s), fmt_s(row.generation_s),
                       fmt_s(row.trainer_s), "yes" if row.fits else "no",
                       style="bold" if row.rollout_gpus == s.rollout_gpus else None)
        parts.append(st)
    return with_assumed(r, Group(*parts))
