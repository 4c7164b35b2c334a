"""Pipeline schedules (issue 24): the bubble each adds to a step and the forwards whose
activations a stage holds, by schedule.

Notation (DeepSeek-V3 technical report, arXiv:2412.19437, §3.2.1 and Table 2): per micro-batch on
one stage, F the forward, B the full backward (input gradients and weight gradients, with a full
recompute's forward), W the weight-gradient part of B; t = F + B, tcalc's stage time t_s
(train.StageTime). Bubbles, for P stages (the "chunk" of a schedule with two chunks per stage is
half a stage: F/2, B/2, W/2):

| schedule | bubble | parameters | forwards in flight (first stage) | source |
| --- | --- | --- | --- | --- |
| 1f1b | (P−1)(F+B) | 1x | P | Narayanan et al. 2021 §2.2.1; DeepSeek-V3 Table 2 |
| interleaved | (P−1)(F+B)/v | 1x | 2(P−1) + (v−1)P + 1 chunks | Narayanan et al. 2021 §2.2.2 |
| zb-h1 | (P−1)(F+B−2W) | 1x | P | Qi et al. 2023 (arXiv:2401.10241) §2.1; DeepSeek-V3 Table 2 ("ZB1P") |
| zb-v | (P−1)(F_c+B_c−3W_c), chunks of half a stage | 1x | P (every stage) | Qi et al. 2024 (arXiv:2401.10241 v2, §6 ZB-V) |
| dualpipe | (P/2−1)(F&B+B−3W), chunks of half a stage | 2x | P+1 | DeepSeek-V3 Table 2 |

Conventions and what is tcalc's reading:
- Uneven stages (train.py): 1F1B's bubble is Σ t_s − max t_s (a flow shop of identical jobs),
  (P−1)·t when the stages are even; zb-h1 and zb-v take the same form over t_s − 2W_s and
  t_s − 3W_s, floored at 0 (they fill idle time with W passes, never below none).
- zb-v: Qi et al. give no closed form beyond "zero bubble when T_F = T_B = T_W, the memory of
  1F1B"; (P−1)(F_c + B_c − 3W_c) is tcalc's, the form DeepSeek-V3 prints for DualPipe's two-chunk
  V without the overlapped pair; it is 0 when F_c = B_in,c = W_c, as the paper states.
- DualPipe: F&B (a forward and a backward chunk of two micro-batches, overlapped) is priced as
  F_c + B_c: DualPipe hides the MoE all-to-alls behind compute, it does not run two GEMMs at once;
  the slowest stage's times are used. Pipeline traffic is twice 1F1B's for zb-v and dualpipe (two
  chunks per stage in a V: every micro-batch crosses each stage boundary twice each way).
- W: the weight-gradient GEMMs of a stage are one forward of its weight matmuls (every linear layer
  but the attention core), the stage's compute × (1 − the core's share) / passes.
- Placement: zb-v and dualpipe put the first and the last chunk of the model on stage 0; tcalc
  keeps Megatron's looped placement of the blocks (the same count per stage), the embedding on
  the first stage and the head on the last.
"""

from __future__ import annotations

from collections.abc import Iterable

from transformer_calc.model.config import PipelineSchedule

TWO_CHUNK = (PipelineSchedule.zb_v, PipelineSchedule.dualpipe)
PP_TRAFFIC = {PipelineSchedule.zb_v: 2, PipelineSchedule.dualpipe: 2}  # x 1F1B's point-to-point volume
PARAMETER_COPIES = {PipelineSchedule.dualpipe: 2}  # DeepSeek-V3 Table 2: DualPipe keeps 2x the parameters


def _flow_shop(times: Iterable[tuple[int, float]]) -> float:
    """Σ t_s − max t_s over (stage count, t) pairs, at least 0."""
    pairs = list(times)
    if not pairs:
        return 0.0
    return max(0.0, sum(n * t for n, t in pairs) - max(t for _, t in pairs))


def bubble_s(schedule: PipelineSchedule, stages: list[tuple[int, float, float, float]], P: int, v: int) -> float:
    """The step's pipeline bubble (seconds) for `stages` = (how many stages, t_s, B_s, W_s), t_s the
    stage's forward + backward of one micro-batch, B_s its backward, W_s its weight-gradient part."""
    if P <= 1:
        return 0.0
    if schedule is PipelineSchedule.one_f_one_b:
        return _flow_shop((n, t) for n, t, _, _ in stages)
    if schedule is PipelineSchedule.interleaved:
        return _flow_shop((n, t) for n, t, _, _ in stages) / v
    if schedule is PipelineSchedule.zb_h1:
        return _flow_shop((n, t - 2 * w) for n, t, _, w in stages)
    if schedule is PipelineSchedule.zb_v:
        return _flow_shop((n, t - 3 * w) for n, t, _, w in stages) / 2  # chunks of half a stage
    # dualpipe: (P/2 − 1)(F&B + B − 3W) over chunks of half the slowest stage, F&B = F + B
    _, t, b, w = max(stages, key=lambda k: k[1])
    return max(0.0, (P // 2 - 1) * (t + b - 3 * w) / 2)


def forwards_in_flight(schedule: PipelineSchedule, P: int, v: int, m: int, s: int) -> list[int] | None:
    """Forwards whose activations stage s holds at its peak, per model chunk, for the schedules
    whose count is not Megatron's 1F1B / interleaved one (None: use memory.chunk_forwards_in_flight).
    zb-h1: as 1F1B (Qi et al. 2023 §2.1: peak memory no more than 1F1B's); zb-v: P micro-batches of
    the stage on every stage, balanced (§6); dualpipe: P + 1 (DeepSeek-V3 Table 2); at most m."""
    if schedule is PipelineSchedule.zb_v:
        return [min(P, m)] * 2
    if schedule is PipelineSchedule.dualpipe:
        return [min(P + 1, m)] * 2
    return None
