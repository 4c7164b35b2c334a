"""Calibration (issue 37): the few free constants of a time profile, fitted to measured runs.

A training step as `estimate_step` prices it (train.py) is split, once per run at the default
profile, into what each free constant scales (`StepTerms`):

    t(θ) = (C·η₀/η_d + M + κ·X)·(1 + B/(C + M + X)) + o

    C   GEMM time at the default GEMM efficiency η₀ (compute_s)
    η_d the fitted GEMM efficiency of the run's GEMM dtype d (bf16, fp8, fp4, fp32): the fraction
        of that dtype's dense peak the step's matmuls reach (`gemm_efficiency`)
    M   memory-bound work, optimizer, offload and the MoE block's overheads (not fitted)
    X   exposed communication: TP, the data-parallel share the backward does not hide, pipeline
        point-to-point, MoE all-to-all, context parallelism
    κ   the exposed-communication factor (`exposed_comm_factor`, 1: as priced)
    B   the pipeline bubble, which scales with the stage times it idles for
    o   a fixed cost per step (`step_overhead_s`: data loading, logging, the launch gaps a profile
        does not price)

At θ = (η₀, 1, 0) the formula gives `estimate_step`'s step time exactly. A serving measurement is
split the same way (`ServeTerms`): the GPU's time in it (prefill and decode steps: compute, HBM,
kernel and per-sequence costs) scaled by the GPU-time factor (`gpu_time_factor`), the per-request
overhead (`request_overhead_s`) added to the TTFT:

    TTFT = k·(TTFT₀ − r₀) + r₀ + o_req      TPOT = k·TPOT₀      throughput = thr₀ / (s·k + 1 − s)

    r₀ the engine's request overhead already in TTFT₀, s the GPU's share of a request's time.

The fit minimises Σ ρ(log(t_pred/t_meas)/DATA_SIGMA) (ρ: Huber's, HUBER_K) plus a weak prior that
pulls each constant toward its default (PRIOR_LOG_SIGMA in log space, PRIOR_OVERHEAD_SIGMA of the median measured time for the
overheads), so that three runs and three constants give a finite answer. The solver is a bounded
Levenberg-Marquardt on the constants' log (overheads linear) with a numerical Jacobian, each step
projected onto the bounds: pure Python, a few dozen model evaluations per run. The uncertainty
of each constant is its leave-one-out (jackknife) standard error; the leave-one-out error of
each run is its error when the fit leaves it out.
"""

from __future__ import annotations

import math
import operator
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

GEMM_DTYPES = ("bf16", "fp8", "fp4", "fp32")
GEMM_BOUNDS = (0.05, 1.0)  # a fraction of the dtype's dense peak
COMM_FACTOR_BOUNDS = (0.0, 5.0)
GPU_TIME_FACTOR_BOUNDS = (0.2, 5.0)
OVERHEAD_MAX_SHARE = 0.5  # an overhead is at most half the median measured time
# The fit is the maximum a posteriori estimate: each run's log error weighed by DATA_SIGMA (the
# run-to-run scatter an analytic model leaves: 3-5 % for the calibrated tools issue 37 names), each
# constant's departure from its default by the prior's width.
DATA_SIGMA = 0.05
HUBER_K = 3.0  # robust fit: a run's log error beyond 3 DATA_SIGMA (15 %) counts linearly, not squared
PRIOR_LOG_SIGMA = 0.5  # a multiplicative constant: e^0.5 ≈ 1.65x either way (the defaults' validated spread)
PRIOR_OVERHEAD_SIGMA = 0.5  # an overhead, as a share of the median measured time it adds to
SPARE_RUNS = 3  # runs beyond the constants a secondary constant needs (free_constants)
LOO_ITERATIONS = 8  # a left-out fit starts from the full fit's constants: a few steps converge it
STEP_TOLERANCE = 1e-6  # the solver stops when no coordinate moves more (log units: 1e-4 %)
MATERIAL_SHARE = 0.05  # a term under this share of every run's time leaves its constant unfitted


@dataclass(frozen=True)
class StepTerms:
    """One training run's step time at the default profile, split by constant (module docstring)."""

    gemm_s: float
    fixed_s: float
    comm_s: float
    bubble_s: float
    dtype: str
    default_gemm_efficiency: float

    @property
    def step_time_s(self) -> float:
        return self.gemm_s + self.fixed_s + self.comm_s + self.bubble_s


@dataclass(frozen=True)
class ServeTerms:
    """One serving measurement at the default profile: `metric` ttft_s, tpot_s or
    output_tokens_per_s; `value` the priced value; `gpu_share` the GPU's share of a request's time
    (all but the engine's request overhead); `request_s` that overhead (in a TTFT)."""

    metric: str
    value: float
    gpu_share: float = 1.0
    request_s: float = 0.0


@dataclass(frozen=True)
class Constant:
    """One free constant: its name, default, bounds and whether it is a multiplicative one (fitted
    on its log) or an overhead in seconds (fitted as is)."""

    name: str
    default: float
    lo: float
    hi: float
    log: bool


def gemm_name(dtype: str) -> str:
    return f"gemm_efficiency_{dtype}"


def step_time(t: StepTerms, c: dict[str, float]) -> float:
    """The step time of `t` under the constants `c` (a missing constant keeps its default)."""
    eta = c.get(gemm_name(t.dtype), t.default_gemm_efficiency)
    gemm = t.gemm_s * t.default_gemm_efficiency / eta
    work = gemm + t.fixed_s + c.get("exposed_comm_factor", 1.0) * t.comm_s
    base = t.gemm_s + t.fixed_s + t.comm_s
    bubble = t.bubble_s * work / base if base > 0 else t.bubble_s
    return work + bubble + c.get("step_overhead_s", 0.0)


def serve_value(t: ServeTerms, c: dict[str, float]) -> float:
    """The serving metric of `t` under the constants `c`."""
    k = c.get("gpu_time_factor", 1.0)
    if t.metric == "ttft_s":
        return k * (t.value - t.request_s) + t.request_s + c.get("request_overhead_s", 0.0)
    if t.metric == "tpot_s":
        return t.value * k
    # throughput: requests / time, the GPU's share of the time scaled
    return t.value / (t.gpu_share * k + (1 - t.gpu_share))


def predict(t: StepTerms | ServeTerms, c: dict[str, float]) -> float:
    """The measured quantity's prediction as a time (a throughput is inverted)."""
    if isinstance(t, StepTerms):
        return step_time(t, c)
    v = serve_value(t, c)
    return 1 / v if t.metric == "output_tokens_per_s" else v


def _compiled(terms: Sequence[StepTerms | ServeTerms]) -> Callable[[dict[str, float]], list[float]]:
    """`predict` over many runs at once, each run's fixed part computed once (the fit's inner loop):
    a step time is (C·η₀/η + M + κ·X)·(1 + B/(C + M + X)) + o."""
    steps = [t for t in terms if isinstance(t, StepTerms)]
    if len(steps) < len(terms):
        return lambda c: [predict(t, c) for t in terms]
    rows = []
    for t in steps:
        base = t.gemm_s + t.fixed_s + t.comm_s
        stretch = 1 + t.bubble_s / base if base > 0 else 1.0
        rows.append((t.gemm_s * t.default_gemm_efficiency, t.fixed_s, t.comm_s, stretch, gemm_name(t.dtype),
                     t.default_gemm_efficiency, 0.0 if base > 0 else t.bubble_s))

    def model(c: dict[str, float]) -> list[float]:
        kappa, o = c.get("exposed_comm_factor", 1.0), c.get("step_overhead_s", 0.0)
        return [(ge / c.get(name, eta0) + f + kappa * x) * stretch + o + extra
                for ge, f, x, stretch, name, eta0, extra in rows]

    return model


def as_time(t: StepTerms | ServeTerms, measured: float) -> float:
    """A measured value as the time `predict` returns (a throughput inverted)."""
    return 1 / measured if isinstance(t, ServeTerms) and t.metric == "output_tokens_per_s" else measured


# ---------------------------------------------------------------------------- which constants
def free_constants(terms: Sequence[StepTerms | ServeTerms], measured: Sequence[float],
                   names: Sequence[str] | None = None) -> list[Constant]:
    """The constants the runs can inform: `names` when given (each must be one the runs touch),
    else every GEMM dtype the runs use, the exposed-communication factor where communication is
    MATERIAL_SHARE of some run's step, the per-step overhead when the runs outnumber the other
    constants by two; the serving constants where serving metrics were measured."""
    steps = [t for t in terms if isinstance(t, StepTerms)]
    serve = [t for t in terms if isinstance(t, ServeTerms)]
    known: dict[str, Constant] = {}
    for t in steps:
        name = gemm_name(t.dtype)
        if name not in known:
            known[name] = Constant(name, t.default_gemm_efficiency, *GEMM_BOUNDS, log=True)
    if steps:
        known["exposed_comm_factor"] = Constant("exposed_comm_factor", 1.0, *COMM_FACTOR_BOUNDS, log=True)
        step_scale = statistics.median([v for t, v in zip(terms, measured) if isinstance(t, StepTerms)])
        known["step_overhead_s"] = Constant("step_overhead_s", 0.0, 0.0, OVERHEAD_MAX_SHARE * step_scale, log=False)
    if serve:
        known["gpu_time_factor"] = Constant("gpu_time_factor", 1.0, *GPU_TIME_FACTOR_BOUNDS, log=True)
    if any(t.metric == "ttft_s" for t in serve):
        ttft = statistics.median([v for t, v in zip(terms, measured) if isinstance(t, ServeTerms) and t.metric == "ttft_s"])
        known["request_overhead_s"] = Constant("request_overhead_s", 0.0, 0.0, OVERHEAD_MAX_SHARE * ttft, log=False)
    if names is not None:
        from transformer_calc.errors import TcalcError

        out = []
        for n in names:
            if n not in known:
                raise TcalcError(f"--fit: {n[:40]!r} is not a constant these runs inform; they inform "
                                 f"{', '.join(known) or 'none'}")
            out.append(known[n])
        return out
    chosen = [c for c in known.values() if c.name.startswith("gemm_efficiency_") or c.name in ("gpu_time_factor",
                                                                                               "request_overhead_s")]
    # a secondary constant only where the runs outnumber the constants by SPARE_RUNS: with fewer, the
    # fit chases the runs' scatter (three runs: the GEMM efficiency alone)
    n_steps = len(steps)
    if steps and n_steps >= len(chosen) + 1 + SPARE_RUNS:
        chosen.append(known["step_overhead_s"])
    comm_material = any(t.comm_s >= MATERIAL_SHARE * t.step_time_s for t in steps)
    if steps and comm_material and n_steps >= len(chosen) + 1 + SPARE_RUNS:
        chosen.append(known["exposed_comm_factor"])
    return chosen


# ---------------------------------------------------------------------------- the solver
def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (k ≤ a few)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-300:
            raise ZeroDivisionError("singular")
        m[col], m[piv] = m[piv], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for k in range(col, n + 1):
                m[r][k] -= f * m[col][k]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][k] * x[k] for k in range(r + 1, n))) / m[r][r]
    return x


def _huber(r: float) -> float:
    """A residual as Huber's loss sees it: itself within HUBER_K, beyond it the square root of the
    linear loss (sign kept), so that one run the model prices badly (a structural miss) pulls the
    constants less than the square would."""
    a = abs(r)
    return r if a <= HUBER_K else math.copysign(math.sqrt(2 * HUBER_K * a - HUBER_K * HUBER_K), r)


@dataclass
class _Space:
    """The constants in the solver's coordinates: log for a multiplicative constant; an overhead
    over its scale, the median measured time of what it adds to (its upper bound is
    OVERHEAD_MAX_SHARE of that)."""

    constants: list[Constant]

    @staticmethod
    def scale(c: Constant) -> float:
        return c.hi / OVERHEAD_MAX_SHARE if c.hi > 0 else 1.0

    def to_u(self, c: Constant, v: float) -> float:
        return math.log(max(v, 1e-9)) if c.log else v / self.scale(c)

    def to_v(self, c: Constant, u: float) -> float:
        return math.exp(u) if c.log else u * self.scale(c)

    def bounds(self, c: Constant) -> tuple[float, float]:
        return self.to_u(c, max(c.lo, 1e-6) if c.log else c.lo), self.to_u(c, c.hi)

    def prior_sigma(self, c: Constant) -> float:
        return PRIOR_LOG_SIGMA if c.log else PRIOR_OVERHEAD_SIGMA


def _normal_equations(residuals: Any, u: list[float], r: list[float]) -> tuple[list[list[float]], list[float]]:
    """(JᵀJ, Jᵀr) of the residuals at u, the Jacobian by forward differences (step 1e-6 in the unbounded space)."""
    k, h = len(u), 1e-6
    cols = []
    for j in range(k):
        up = u[:]
        up[j] += h
        cols.append([(a - b) / h for a, b in zip(residuals(up), r)])
    jtj = [[0.0] * k for _ in range(k)]
    for i in range(k):
        for j in range(i, k):
            jtj[i][j] = jtj[j][i] = sum(map(operator.mul, cols[i], cols[j]))
    return jtj, [sum(map(operator.mul, cols[i], r)) for i in range(k)]


def fit_constants(terms: Sequence[StepTerms | ServeTerms], measured: Sequence[float], constants: Sequence[Constant],
                  start: dict[str, float] | None = None, iterations: int = 60) -> dict[str, float]:
    """The constants minimising Σ log(predicted/measured)² + the prior (module docstring), within
    their bounds."""
    targets = [math.log(as_time(t, v)) for t, v in zip(terms, measured)]
    space = _Space(list(constants))
    k = len(constants)
    u0 = [space.to_u(c, c.default) if c.log or c.default else 0.0 for c in constants]
    u = [space.to_u(c, start[c.name]) if start and c.name in start else u0[i] for i, c in enumerate(constants)]
    box = [space.bounds(c) for c in constants]
    sig = [space.prior_sigma(c) for c in constants]

    def values(uu: list[float]) -> dict[str, float]:
        return {c.name: space.to_v(c, x) for c, x in zip(constants, uu)}

    model = _compiled(terms)

    def residuals(uu: list[float]) -> list[float]:
        c = values(uu)
        r = [_huber((math.log(max(p, 1e-30)) - y) / DATA_SIGMA) for p, y in zip(model(c), targets)]
        return r + [(uu[i] - u0[i]) / sig[i] for i in range(k)]

    def cost(r: list[float]) -> float:
        return sum(x * x for x in r)

    clamp = lambda uu: [min(max(x, lo), hi) for x, (lo, hi) in zip(uu, box)]  # noqa: E731
    u = clamp(u)
    r = residuals(u)
    f = cost(r)
    mu = 1e-3
    for _ in range(iterations):
        jtj, jtr = _normal_equations(residuals, u, r)
        improved = False
        for _try in range(12):
            a = [[jtj[i][j] + (mu * (1 + jtj[i][i]) if i == j else 0.0) for j in range(k)] for i in range(k)]
            try:
                step = _solve(a, [-x for x in jtr])
            except ZeroDivisionError:
                mu *= 10
                continue
            trial = clamp([x + s for x, s in zip(u, step)])
            rt = residuals(trial)
            ft = cost(rt)
            if ft < f:
                moved = max(abs(a_ - b_) for a_, b_ in zip(trial, u))
                u, r, f = trial, rt, ft
                mu = max(mu / 3, 1e-9)
                improved = True
                break
            mu *= 4
        if not improved or moved < STEP_TOLERANCE:
            break
    return values(u)


# ---------------------------------------------------------------------------- the calibration
@dataclass(frozen=True)
class FittedConstant:
    name: str
    value: float
    default: float
    uncertainty: float  # the jackknife (leave-one-out) standard error
    lo: float
    hi: float


@dataclass(frozen=True)
class Calibration:
    constants: tuple[FittedConstant, ...]
    errors_before: tuple[float, ...]  # measured/predicted − 1 at the default profile, per run
    errors_after: tuple[float, ...]  # ... with the fitted constants (in-sample)
    loo_errors: tuple[float, ...]  # ... each run predicted by the fit that leaves it out
    values: dict[str, float] = field(default_factory=dict)


def error(t: StepTerms | ServeTerms, measured: float, c: dict[str, float]) -> float:
    """measured time / predicted time − 1 (validation's sign: negative, tcalc predicts slower)."""
    return as_time(t, measured) / predict(t, c) - 1


def calibrate(terms: Sequence[StepTerms | ServeTerms], measured: Sequence[float], constants: Sequence[Constant],
              progress: Callable[[int], None] | None = None) -> Calibration:
    """Fit `constants` on every run, then once per run left out: the fitted values, their
    jackknife standard errors, and each run's error before, after and left out."""
    n = len(terms)
    best = fit_constants(terms, measured, constants)
    loo_values: list[dict[str, float]] = []
    loo_errors = []
    for i in range(n):
        rest_t = [t for j, t in enumerate(terms) if j != i]
        rest_m = [v for j, v in enumerate(measured) if j != i]
        vi = fit_constants(rest_t, rest_m, constants, start=best, iterations=LOO_ITERATIONS)
        loo_values.append(vi)
        loo_errors.append(error(terms[i], measured[i], vi))
        if progress:
            progress(i)
    fitted = []
    for c in constants:
        xs = [v[c.name] for v in loo_values]
        mean = sum(xs) / n
        se = math.sqrt((n - 1) / n * sum((x - mean) ** 2 for x in xs)) if n > 1 else float("nan")
        fitted.append(FittedConstant(c.name, best[c.name], c.default, se, c.lo, c.hi))
    return Calibration(
        constants=tuple(fitted),
        errors_before=tuple(error(t, v, {}) for t, v in zip(terms, measured)),
        errors_after=tuple(error(t, v, best) for t, v in zip(terms, measured)),
        loo_errors=tuple(loo_errors),
        values=best,
    )


def median_abs(xs: Sequence[float]) -> float:
    return statistics.median([abs(x) for x in xs]) if xs else float("nan")
