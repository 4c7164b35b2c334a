"""The decode phase as a closed-form sum over its steps: each step's time is a piecewise polynomial in
the context length (`Decode`, `decode`, `decode_sum`), and the batch at which decode turns
compute-bound.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from transformer_calc.devices.hardware import GPU, peak_flops
from transformer_calc.estimators.inference.memory import all_touched_tokens, weight_split, weights_read_bytes
from transformer_calc.estimators.inference.shard import Shard, rank_shard
from transformer_calc.estimators.inference.spec import (
    COMPUTE,
    InferenceSpec,
    MEMORY,
    MIXED,
    check_positive_int,
)
from transformer_calc.estimators.inference.step import Step, decode_step_exact
from transformer_calc.model.config import ModelConfig
from transformer_calc.model.units import FLOPS_PER_MAC


# ============================================================================ the generation
@dataclass(frozen=True)
class Decode:
    """The N_new - 1 decode steps of a generation, at contexts S+1 .. S+N_new-1, on one GPU.

    With N_new = 1 there are no steps; the per-token figures then describe the step that would
    come next (context S + 1), and the totals are 0.
    """

    steps: int
    flops: int  # summed over the steps
    bytes_moved: int
    comm_s: float
    seconds: float  # summed step times
    seconds_per_token: float  # time per output token: seconds / steps (one token per sequence)
    tokens_per_s: float  # B / seconds_per_token, the whole batch
    compute_bound_steps: int
    bound: str  # "compute" or "memory" when every step agrees, else "mixed"
    first: Step  # context S + 1
    last: Step  # context S + N_new - 1 (S + 1 when N_new = 1)


Poly = tuple[int | Fraction, int | Fraction, int | Fraction]  # Newton form (f0, Δf0, Δ²f0)


def _newton(values: list[int] | list[Fraction]) -> Poly:
    """Forward differences of a polynomial of degree <= 2 sampled at 0, 1, 2."""
    f0, f1, f2 = values
    return f0, f1 - f0, f2 - 2 * f1 + f0


def _newton_value(p: Poly, i: int) -> int | Fraction:
    """f(i) = f0 + C(i,1)·Δf0 + C(i,2)·Δ²f0."""
    return sum(c * math.comb(i, k) for k, c in enumerate(p))


def _newton_sum(p: Poly, a: int, b: int) -> int | Fraction:
    """Sum of f(i) over i in [a, b): by the hockey-stick identity, sum_{i<n} C(i,k) = C(n,k+1)."""
    def prefix(n: int) -> int | Fraction:
        return sum(c * math.comb(n, k + 1) for k, c in enumerate(p))
    return prefix(b) - prefix(a)


def _split(h: Poly, n: int) -> int:
    """First i in [1, n] where h(i) >= 0 stops equalling h(0) >= 0 (n when it never does).

    h is monotone on [0, n) (linear with a cache, increasing in naive mode), so the flip sits at
    a real root of a quadratic: estimated in exact integers (isqrt), then corrected by a step or
    two.
    """
    first = _newton_value(h, 0) >= 0
    if (_newton_value(h, n - 1) >= 0) == first:
        return n
    f0, d1, d2 = (Fraction(c) for c in h)
    a2, a1, a0 = d2 / 2, d1 - d2 / 2, f0  # h(i) = a2·i² + a1·i + a0
    if a2 == 0:
        root = -a0 / a1
    else:
        scale = math.lcm(a2.denominator, a1.denominator, a0.denominator)
        A2, A1, A0 = (int(x * scale) for x in (a2, a1, a0))
        s = math.isqrt(max(A1 * A1 - 4 * A2 * A0, 0))
        roots = (Fraction(-A1 + s, 2 * A2), Fraction(-A1 - s, 2 * A2))
        root = min(roots, key=lambda r: abs(r - Fraction(n, 2)))  # the one inside [0, n)
    i = min(max(math.ceil(root), 1), n - 1)
    while i > 1 and (_newton_value(h, i - 1) >= 0) != first:
        i -= 1
    while i < n and (_newton_value(h, i) >= 0) == first:
        i += 1
    return i


def _add_steps(
    exact: Callable[[int], tuple[Step, Fraction, Fraction]], start: int, stop: int,
) -> tuple[int, int, Fraction, Fraction, int]:
    """(FLOPs, bytes, communication s, seconds, compute-bound steps) of the decode steps at contexts
    [start, stop), added one by one (a piece too short to sample, or not polynomial)."""
    flops = bytes_moved = compute_steps = 0
    comm_s = seconds = Fraction(0)
    for context in range(start, stop):
        step, t, comm = exact(context)
        flops, bytes_moved, comm_s, seconds, compute_steps = (
            flops + step.flops, bytes_moved + step.bytes_moved, comm_s + comm, seconds + t,
            compute_steps + (step.bound == COMPUTE),
        )
    return flops, bytes_moved, comm_s, seconds, compute_steps


MAX_ADDED_STEPS = 4096  # a naive MoE's steps before every expert is read, added one by one up to this many
GROWING_PIECES = 1024  # beyond: that many pieces, each summed as a quadratic through its first three steps


def _growing_experts_sum(
    exact: Callable[[int], tuple[Step, Fraction, Fraction]], start: int, stop: int, peak: int | Fraction,
    bw: int | Fraction,
) -> tuple[int, int, Fraction, Fraction, int]:
    """The decode steps at contexts [start, stop) of a naive-mode MoE whose expected touched experts still
    grow with the context (no polynomial): added one by one up to MAX_ADDED_STEPS (exact); a longer span (a
    hostile n_experts: every step until 2^-100 of the experts stay idle) is cut into GROWING_PIECES pieces,
    each summed as `_sum_steps` sums a polynomial piece (an approximation: the reads are smooth in c)."""
    if stop - start <= MAX_ADDED_STEPS:
        return _add_steps(exact, start, stop)
    cuts = sorted({start + (stop - start) * i // GROWING_PIECES for i in range(GROWING_PIECES + 1)})
    flops = bytes_moved = compute_steps = 0
    comm_s = seconds = Fraction(0)
    for lo, hi in zip(cuts, cuts[1:]):
        f_, b_, x_, t_, c_ = _sum_steps(exact, lo, hi, peak, bw)
        flops, bytes_moved, comm_s, seconds, compute_steps = (
            flops + f_, bytes_moved + b_, comm_s + x_, seconds + t_, compute_steps + c_
        )
    return flops, bytes_moved, comm_s, seconds, compute_steps


def _sum_steps(
    exact: Callable[[int], tuple[Step, Fraction, Fraction]], start: int, stop: int, peak: int | Fraction,
    bw: int | Fraction,
) -> tuple[int, int, Fraction, Fraction, int]:
    """(FLOPs, bytes, communication s, seconds, compute-bound steps) of the decode steps at
    contexts [start, stop), on which every per-step quantity is one polynomial of degree <= 2."""
    n = stop - start
    if n <= 0:
        return 0, 0, Fraction(0), Fraction(0), 0
    if n < 3:  # too few steps to sample a polynomial inside the piece: add them
        return _add_steps(exact, start, stop)
    samples = [exact(start + i) for i in range(3)]
    f = _newton([s.flops for s, _, _ in samples])  # FLOPs of step i
    b = _newton([s.bytes_moved for s, _, _ in samples])  # bytes moved by step i
    x = _newton([comm for _, _, comm in samples])  # communication seconds of step i
    h = (bw * f[0] - peak * b[0], bw * f[1] - peak * b[1], bw * f[2] - peak * b[2])  # h(i) >= 0: step i compute-bound
    split = _split(h, n)
    on_compute, on_memory = ((0, split), (split, n))
    if _newton_value(h, 0) < 0:
        on_compute, on_memory = on_memory, on_compute
    seconds = Fraction(_newton_sum(f, *on_compute), peak) + Fraction(_newton_sum(b, *on_memory), bw)
    seconds += _newton_sum(x, 0, n)
    return (int(_newton_sum(f, 0, n)), int(_newton_sum(b, 0, n)), Fraction(_newton_sum(x, 0, n)),
            seconds, on_compute[1] - on_compute[0])


def decode(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> Decode:
    """All decode steps, summed in closed form: the cost does not grow with N_new.

    Every per-step quantity is a polynomial of degree <= 2 in the step index (FLOPs: linear with
    a cache, quadratic in naive mode; bytes and communication: linear), so three evaluated steps
    fix it, and its sum over any range of steps is a closed form (Newton forward differences).
    The roofline's max() switches branch at most once, where compute and memory time cross
    (solved exactly). A naive-mode MoE's first steps, whose expected touched experts still grow (no
    polynomial in the context), are added one by one until every expert is read (`_growing_experts_sum`).
    """
    sh = rank_shard(m, spec)
    S, B, n_steps = spec.prompt_len, spec.batch_size, spec.new_tokens - 1
    peak, bw = peak_flops(gpu, spec.resolved_compute_dtype), gpu.memory_bw_bytes_s

    steps: dict[int, tuple[Step, Fraction, Fraction]] = {}  # a pure function of the context: each evaluated once

    def exact(context: int) -> tuple[Step, Fraction, Fraction]:
        step = steps.get(context)
        if step is None:
            step = steps[context] = decode_step_exact(m, gpu, spec, sh, context)
        return step

    flops, bytes_moved, comm_s, seconds, compute_steps = decode_sum(sh, spec, exact, peak, bw)
    first = exact(S + 1)[0]
    last = exact(S + max(n_steps, 1))[0]
    if n_steps == 0:
        per_token, bound = first.seconds, first.bound
    else:
        per_token = float(seconds / n_steps)
        bound = COMPUTE if compute_steps == n_steps else MEMORY if compute_steps == 0 else MIXED
    return Decode(
        steps=n_steps,
        flops=flops,
        bytes_moved=bytes_moved,
        comm_s=float(comm_s),
        seconds=float(seconds),
        seconds_per_token=per_token,
        tokens_per_s=B / per_token,
        compute_bound_steps=compute_steps,
        bound=bound,
        first=first,
        last=last,
    )


def decode_sum(
    sh: Shard, spec: InferenceSpec, exact: Callable[[int], tuple[Step, Fraction, Fraction]],
    peak: int | Fraction, bw: int | Fraction,
) -> tuple[int, int, Fraction, Fraction, int]:
    """(FLOPs, bytes, added seconds, seconds, compute-bound steps) of the N_new - 1 decode steps,
    in closed form, on a roofline of `peak` FLOP/s and `bw` B/s. `exact(c)` gives the step at
    context c, its time and the seconds added to its roofline (communication; `expected.py` adds
    its fixed costs there), which must be a polynomial of degree <= 2 in c on each piece."""
    S, B, n_steps = spec.prompt_len, spec.batch_size, spec.new_tokens - 1
    flops = bytes_moved = compute_steps = 0
    seconds = comm_s = Fraction(0)
    start, stop = S + 1, S + 1 + n_steps  # contexts of the steps: [start, stop)
    # A naive-mode MoE reads the experts its B·c tokens are expected to touch at context c, no polynomial
    # in c, until every expert is read (memory.all_touched_tokens): those first steps are added one by one
    # (`_growing_experts_sum`; past MAX_ADDED_STEPS, in quadratic pieces).
    saturated = None
    T, ep = sh.expert_assignments_share
    all_tokens = all_touched_tokens(sh.n_experts * ep, sh.experts_per_token)
    if not spec.kv_cache and all_tokens:
        saturated = -(-all_tokens // (B * max(ep // T, 1)))  # the first context whose tokens touch every expert
    # Windows (sliding, chunked layers) make every per-step quantity piecewise polynomial, with
    # a break where the context reaches a window: sum each piece separately.
    spans = [g.window for g in sh.kv_groups if g.window]
    # DSA: attention saturates at context k_I (min(c, k_I) keys), the latent read at k_I + 1 (min(c - 1, k_I))
    spans += [b for g in sh.kv_groups if g.topk for b in (g.topk, g.topk + 1)]
    # DeepSeek-V4: the overlap is read from context m + 1 on, the CSA attention saturates at k_I entries
    # (context m·k_I) and their read one step later
    for g in sh.compressed:
        spans += [g.rate + 1, *((g.rate * g.topk, g.rate * g.topk + 1) if g.topk else ())]
    breaks = spans + ([saturated] if saturated else [])
    cuts = sorted({start, stop, *(b for b in breaks if start < b < stop)})
    # DeepSeek-V4's compressed entries (floor(c / m)) and open windows (c mod m) step with the context: on
    # the contexts of one residue modulo the rates' period, lo + r + period·j, every per-step quantity is
    # linear in j again, so each residue is a closed-form sum of its own (period sums, never one per step)
    period = state_period(sh)
    for lo, hi in zip(cuts, cuts[1:]):
        if saturated and hi <= saturated:  # the naive MoE's experts not all read yet
            f_, b_, x_, t_, c_ = _growing_experts_sum(exact, lo, hi, peak, bw)
            flops, bytes_moved, comm_s, seconds, compute_steps = (
                flops + f_, bytes_moved + b_, comm_s + x_, seconds + t_, compute_steps + c_
            )
            continue
        for r in range(min(period, hi - lo)):
            def strided(j: int, base: int = lo + r) -> tuple[Step, Fraction, Fraction]:
                return exact(base + period * j)
            f_, b_, x_, t_, c_ = _sum_steps(strided, 0, -(-(hi - lo - r) // period), peak, bw)
            flops, bytes_moved, comm_s, seconds, compute_steps = (
                flops + f_, bytes_moved + b_, comm_s + x_, seconds + t_, compute_steps + c_
            )
    return flops, bytes_moved, comm_s, seconds, compute_steps


MAX_STATE_PERIOD = 4096  # the longest period of DeepSeek-V4's compress rates `decode_sum` sums by residue


def state_period(sh: Shard) -> int:
    """The period in the context of DeepSeek-V4's compressed state, lcm(m, m') (1 for every other model):
    DeepSeek-V4-Flash's 4 and 128 give 128."""
    period = math.lcm(*(g.rate for g in sh.compressed)) if sh.compressed else 1
    if period > MAX_STATE_PERIOD:
        raise ValueError(f"the compress rates' least common multiple ({period}) exceeds {MAX_STATE_PERIOD}, the longest "
                         "period the decode's closed-form sum takes; use rates whose lcm is at most that")
    return period


# ============================================================================ compute-bound batch
def weights_only_compute_bound_batch(m: ModelConfig, gpu: GPU, spec: InferenceSpec) -> float:
    """The seed's threshold (App. "Compute-bound vs Memory-bound"): the batch at which a decode
    step's matmul FLOPs, 2·B·N_matmul, balance reading the weights, lambda_math · W_read bytes.

    B* = lambda_math · W_read / (2·N_matmul) ~ lambda_math · p / 2: 153.0 on an A100 80GB in
    bf16, 200.6 on the 40GB part (errata FAL-6; the seed says ~200 for the 80GB). It ignores
    attention and the KV cache, which is why the real threshold (`compute_bound_batch`) is higher
    or does not exist (errata FAL-5).
    """
    sh = rank_shard(m, spec)
    weights = weights_read_bytes(sh, spec, None)  # every expert touched
    peak = peak_flops(gpu, spec.resolved_compute_dtype)
    lambda_math = Fraction(peak, gpu.memory_bw_bytes_s)
    return float(lambda_math * weights / (FLOPS_PER_MAC * sh.matmul_params))


def compute_bound_batch(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, context_len: int | None = None
) -> int | None:
    """Smallest B at which the decode step at `context_len` is compute-bound; None if no B is.

    Per GPU, FLOPs are B·f and bytes W(B) + B·k (f, k: FLOPs and cache bytes per sequence; W the
    weights read), so the step is compute-bound iff B·(f·bw - k·peak) >= W·peak: a closed form,
    and never when f·bw <= k·peak (the KV reads alone outweigh the FLOPs, errata FAL-5). A MoE's
    W(B) grows with the experts its batch is expected to touch (memory.untouched_share); that B is
    bisected. The default
    context is the generation's last decode step (S + N_new - 1, at least S + 1), where the cache
    is largest: from this B on, every decode step of the generation is compute-bound.
    """
    c = spec.prompt_len + max(spec.new_tokens - 1, 1) if context_len is None else context_len
    check_positive_int("context_len", c)
    sh = rank_shard(m, spec)
    peak, bw = peak_flops(gpu, spec.resolved_compute_dtype), gpu.memory_bw_bytes_s

    def is_compute_bound(batch: int) -> bool:
        variant = dataclasses.replace(spec, batch_size=batch)
        return decode_step_exact(m, gpu, variant, sh, c)[0].bound == COMPUTE

    one = decode_step_exact(m, gpu, dataclasses.replace(spec, batch_size=1), sh, c)[0]
    f, kv = one.flops, one.kv_read_bytes + one.kv_write_bytes
    all_weights = weights_read_bytes(sh, spec, None)  # every expert touched
    coef = f * bw - kv * peak
    if coef <= 0:
        return None
    batch = max(-(-all_weights * peak // coef), 1)  # W(B) <= every expert's bytes: compute-bound from here
    if one.weight_bytes < all_weights:
        # A MoE's W(B) grows with the experts a batch touches (concave in B), so B·coef − W(B)·peak is
        # convex and negative at 0: compute-bound from one B on. Bisect for it above the B at which
        # the weights without their routed experts alone would balance.
        base = weight_split(sh, spec)[0]
        low = max(math.ceil(base * peak / coef), 1)
        while low < batch:
            mid = (low + batch) // 2
            low, batch = (low, mid) if is_compute_bound(mid) else (mid + 1, batch)
    # Whole-byte rounding of the weights can move the answer by one; settle it on the step itself.
    while batch > 1 and is_compute_bound(batch - 1):
        batch -= 1
    while not is_compute_bound(batch):
        batch += 1
    return batch
