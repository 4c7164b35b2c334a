"""The lines in B a sweep prices the batch axis from (estimators/sweep.py): a grid's points that
differ only in B share a layout, and what each metric costs at B is, for most models, a line in B
that the estimators' own values at a few B fix and check. Exact integers (and fractions), so a line
that holds gives the estimator's value at every B bit for bit; a layout whose samples are not on a
line (or that raises) is priced point by point.

- the peak-memory timeline (`affine_peaks`, `peak_at`, `PeakCurve`): training memory's phases;
- the step FLOPs (`flops_lines`): `count_flops`' total and hardware FLOPs;
- the one-token decode (`decode_lines`, `decode_at`): `decode` with N_new = 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal

from transformer_calc.devices.hardware import peak_flops
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import count_flops
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode
from transformer_calc.estimators.inference.shard import rank_shard
from transformer_calc.estimators.inference.spec import COMPUTE, MEMORY
from transformer_calc.estimators.inference.step import decode_step_exact
from transformer_calc.estimators.training.timeline import CHUNK_TOKENS, stage_timelines
from transformer_calc.model.config import ModelConfig, Parallelism, Recompute, Training, Workload


def affine_peaks(m: ModelConfig, S: int, tr: Training, par: Parallelism, all_stages: bool) -> Any:
    """The peak-memory timeline of every stage as lines in B: per stage, per phase, (total, weights,
    activations) at B = 0 and their slopes, or False where that does not hold.

    Every phase is affine in B (model states fixed; activations and transients linear in the
    tokens; timeline.max_micro_batch starts from the same lines) except the chunked cross-entropy's
    min(B·S, chunk) below one chunk per sequence. The lines come from B = 1 and 2 and are checked at
    B = 3 and 4; a layout that fails the check (or raises) is priced point by point. The sweep then
    prices any B in O(stages × phases) instead of rebuilding the timeline."""
    if tr.loss_kernel.value == "chunked" and S < CHUNK_TOKENS:
        return False
    try:
        runs = [stage_timelines(m, Workload.model_construct(seq_len=S, batch_size=b), tr, par, all_stages=all_stages)
                for b in (1, 2, 3, 4)]
    except TcalcError:
        raise
    except (ValueError, OverflowError, ZeroDivisionError):
        return False
    lines = []
    for stage in zip(*runs):
        phases = []
        for ph in zip(*(tl.phases for tl in stage)):
            values = [(p.total, p.weights, p.activations) for p in ph]
            slope = tuple(b - a for a, b in zip(values[0], values[1]))
            base = tuple(a - d for a, d in zip(values[0], slope))
            for b, v in ((3, values[2]), (4, values[3])):
                if any(x0 + b * d != x for x0, d, x in zip(base, slope, v)):
                    return False
            phases.append((base, slope))
        lines.append(phases)
    return lines


def peak_at(lines: Any, B: int) -> tuple[int, int, int]:
    """(total, weights, activations) of the peak phase at micro-batch B from `affine_peaks`: the
    first phase of largest total in each stage, the first stage of largest peak, as peak_memory.
    Only the totals are compared; the weights and activations are evaluated for the winner alone."""
    best_total: int | None = None
    best: tuple[Any, Any] | None = None
    for phases in lines:
        for base, slope in phases:  # a strict > keeps the first of equal totals, across stages too
            total = base[0] + B * slope[0]
            if best_total is None or total > best_total:
                best_total, best = total, (base, slope)
    assert best is not None and best_total is not None  # a layout has a stage, a stage has phases
    base, slope = best
    return best_total, base[1] + B * slope[1], base[2] + B * slope[2]


class PeakCurve:
    """`peak_at` of one layout's lines, asked B after B: the winning phase (the first of largest
    total, across stages) is kept with the range of B over which it stays the winner, so a B in that
    range costs two multiplications, not a pass over every phase."""

    def __init__(self, lines: Any) -> None:
        self.lines = [line for phases in lines for line in phases]  # stage by stage, phase by phase: peak_at's order
        self.lo: float = 1  # the range of B the winner holds over: empty, so the first B computes it
        self.hi: float = 0
        self.best = self.lines[0]

    def __call__(self, B: int) -> tuple[int, int, int]:
        if not self.lo <= B <= self.hi:
            self._winner(B)
        base, slope = self.best
        return base[0] + B * slope[0], base[1] + B * slope[1], base[2] + B * slope[2]

    def _winner(self, B: int) -> None:
        """The winner at B, and the B (whole numbers) where it wins: for a line before it, its total
        stays strictly larger; for a line after it, at least as large (peak_at's tie rule)."""
        totals = [base[0] + B * slope[0] for base, slope in self.lines]
        w = totals.index(max(totals))  # the first of the largest
        (bw, _, _), (sw, _, _) = self.lines[w]
        lo, hi = -math.inf, math.inf
        for j, ((bj, _, _), (sj, _, _)) in enumerate(self.lines):
            db, ds, strict = bw - bj, sw - sj, j < w  # the winner's lead at B: db + B·ds (> 0, or >= 0 after it)
            if ds > 0:  # lead grows with B: a lower bound
                lo = max(lo, -db // ds + 1 if strict else -(db // ds))
            elif ds < 0:  # lead shrinks: an upper bound
                hi = min(hi, -(-db // -ds) - 1 if strict else db // -ds)
        self.lo, self.hi, self.best = lo, hi, self.lines[w]


LINE_SAMPLES = (1, 2, 3, 4)  # B of the samples a line in B is drawn through (1, 2) and checked at (3, 4)


def _line(samples: list[Any], b_max: int, at_max: Any) -> tuple[Any, Any] | None:
    """(value at B = 0, slope) of the line through the samples at B = 1 and 2, or None unless it
    also passes through those at B = 3 and 4 (`LINE_SAMPLES`) and `at_max` at `b_max`. Exact
    (ints or Fractions): a line that holds is the estimator's own value at every B it is asked."""
    slope = samples[1] - samples[0]
    base = samples[0] - slope
    checks = zip((*LINE_SAMPLES[2:], b_max), (*samples[2:], at_max))
    return (base, slope) if all(base + b * slope == value for b, value in checks) else None


def flops_lines(m: ModelConfig, S: int, b_max: int) -> dict[Any, tuple[int, int]] | Literal[False]:
    """The model FLOPs of a step (`count_flops(...).total`) and its hardware FLOPs under each
    recompute policy (`.hardware(r)`) as lines in B: {"total" or Recompute: (at B = 0, slope)};
    False where they are not lines (or count_flops raises: the points are then priced one by one).

    Every term of count_flops carries the factor B·S or B (docs/formulas.md §2: 2 FLOPs per weight
    per token, the attention core per sequence), so each is B times one sequence's; the lines
    are drawn through B = 1 and 2 and checked at B = 3, 4 and the grid's largest B, so a term that
    rounds or saturates in B sends the grid back to count_flops at every B."""
    try:
        steps = [count_flops(m, Workload.model_construct(seq_len=S, batch_size=b)) for b in (*LINE_SAMPLES, b_max)]
    except (ValueError, OverflowError, ZeroDivisionError):
        return False
    lines: dict[Any, tuple[int, int]] = {}
    for key in ("total", *Recompute):
        values = [s.total if key == "total" else s.hardware(key) for s in steps]
        line = _line(values[:-1], b_max, values[-1])
        if line is None:
            return False
        lines[key] = line
    return lines


def decode_lines(m: ModelConfig, device: Any, spec_at: Callable[[int], InferenceSpec], b_max: int) -> Any:
    """The decode of one new token (N_new = 1: `decode` then times the step at context S + 1) as
    lines in B: the step's FLOPs and bytes (ints) and its communication time (exact), with the
    GPU's peak and bandwidth; False where they are not lines (or the step raises).

    A decode step's FLOPs are B times one sequence's, its bytes the weights read plus B sequences'
    KV cache, its all-reduces B sequences' activations (step.roofline_step), so each is a line in
    B; they are drawn through B = 1 and 2 and checked at 3, 4 and the grid's largest B (a MoE's
    touched experts saturate in B: such a grid is priced by `decode` at every B). `decode_at`
    composes the step's time as roofline_step does, and is checked against `decode` itself at
    those five B."""
    samples, decodes = [], []
    try:
        for b in (*LINE_SAMPLES, b_max):
            ispec = spec_at(b)
            if ispec.new_tokens != 1:
                return False
            step, _, comm = decode_step_exact(m, device, ispec, rank_shard(m, ispec), ispec.prompt_len + 1)
            samples.append((step.flops, step.bytes_moved, comm))
            d = decode(m, device, ispec)
            decodes.append((d.seconds_per_token, d.tokens_per_s, d.bound, d.seconds))
        peak, bw = peak_flops(device, spec_at(1).resolved_compute_dtype), device.memory_bw_bytes_s
    except (ValueError, OverflowError, ZeroDivisionError):
        return False
    lines = []
    for k in range(3):
        line = _line([s[k] for s in samples[:-1]], b_max, samples[-1][k])
        if line is None:
            return False
        lines.append(line)
    (f0, f1), (y0, y1), (c0, c1) = lines
    den = math.lcm(Fraction(c0).denominator, Fraction(c1).denominator)
    out = (f0, f1, y0, y1, int(c0 * den), int(c1 * den), den, peak, bw)
    if any(decode_at(out, b) != d for b, d in zip((*LINE_SAMPLES, b_max), decodes)):
        return False
    return out


def decode_at(lines: Any, B: int) -> tuple[float, float, str, float]:
    """(time per output token, tokens/s, bound, decode seconds) of `decode` with N_new = 1 at batch
    B, from `decode_lines`: the step's roofline max(FLOPs / peak, bytes / bandwidth), the bound
    decided in integers, plus its communication time rounded once (an exact fraction's float is
    its numerator / denominator, correctly rounded), as step.roofline_step composes them."""
    f0, f1, y0, y1, c0, c1, den, peak, bw = lines
    flops, moved = f0 + B * f1, y0 + B * y1
    seconds = max(flops / peak, moved / bw) + (c0 + B * c1) / den
    return seconds, B / seconds, COMPUTE if flops * bw >= moved * peak else MEMORY, 0.0


