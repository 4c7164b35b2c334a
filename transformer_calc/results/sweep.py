"""`tcalc sweep`: a grid priced point by point (estimators/sweep.py; run by results/sweep_run.py), as a typed result.

`SweepResult` is the command's JSON (`model_dump(mode="json")`), the Python API's return value and
what render reads. A point's keys are the axes, `seq_len` and the metrics asked for, so a point is
a mapping, not a section; everything around the points is typed. Without `--sort` the CLI streams
`--format json|csv` row by row (results/sweep_run.py `SweepRun.head`/`rows`/`tail`, the same bytes);
the table, YAML and plots read this result.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError, clip

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from transformer_calc.results.base import Result, Section

if TYPE_CHECKING:
    from transformer_calc.requests.sweep import SweepRequest

# One cell of a point: an axis value (a model or GPU name, a count, recompute, flash) or a metric
# (bytes and FLOPs int, seconds and rates float, fits bool, decode_bound str; None: not priced).
Cell = bool | int | float | str | None


class SweepAxes(Section):
    """Each axis's values, in the order the grid runs over them (the last varies fastest); the
    keys of requests/sweep_grid.py `AXES`. An axis not given and without a default is absent."""

    model: list[str]  # preset names (or the models' names)
    batch_size: list[int]
    seq_len: list[int] | None = None  # absent: each model's max_seq_len (the points' seq_len)
    tensor: list[int]
    pipeline: list[int]
    data: list[int]
    zero: list[int]
    expert: list[int]
    context: list[int]
    recompute: list[str]
    flash: list[bool]
    gpu: list[str] | None = None  # canonical GPU names
    dtype: list[str] | None = None  # compute dtypes
    weight_dtype: list[str] | None = None


class SweepResult(Result):
    axes: SweepAxes
    metrics: list[str]  # the metrics of every point, in column order
    points_total: int  # the grid's size, skipped points included
    points: list[dict[str, Cell]]  # the points kept, each {axis: value, seq_len, metric: value}
    skipped: int  # points the model cannot run (T does not divide the heads, ...)
    skipped_reasons: list[str]  # the first few
    shown_of: int | None = None  # the table view only: how many points were kept before the table's cut


def sweep_report(run: Any, progress: Callable[[int], None] | None = None, keep: int | None = None) -> SweepResult:
    """`tcalc sweep`: every point of a prepared `SweepRun`, priced. With `keep`, only the first
    `keep` points are held and `shown_of` says how many there were (the table view)."""
    points, n = run.collect(progress, keep)
    extra = {"shown_of": n} if keep is not None else {}
    return SweepResult(
        axes=SweepAxes(**run.spec.axes),
        metrics=list(run.spec.metrics),
        points_total=run.spec.size,
        points=points,
        skipped=run.stats.skipped,
        skipped_reasons=list(run.stats.reasons),
        **extra,
    )


# ---------------------------------------------------------------------------- the command
def run_sweep(req: SweepRequest) -> SweepResult:
    return sweep_report(prepare_sweep(req))


def prepare_sweep(req: SweepRequest) -> Any:
    """The sweep run (results.sweep_run.prepare) of a request: its models loaded, its axes read."""
    from transformer_calc.results.sweep_run import prepare
    from transformer_calc.results.common import peak_for
    from transformer_calc.sources.presets import gpu as find_gpu

    from transformer_calc.requests.defaults import sweep_defaults

    models, job = req.models_of()
    given = {**(dict(job.training) if job is not None else {}), **{k: v for k, v in req.fixed().items() if v is not None}}
    etp = given.get("expert_tensor")
    if etp is not None and all(m.n_experts <= 1 for m in models.values()):  # it would apply to nothing
        raise TcalcError(f"--etp ({clip(etp)}) splits a mixture-of-experts model's routed experts; "
                         f"{', '.join(clip(n, 40) for n in list(models)[:3])} {'is' if len(models) == 1 else 'are'} dense: drop --etp")
    return prepare(models, req.axes(), req.fixed(), req.metrics, job, tokens=req.tokens, mfu=req.mfu,
                   fits_only=req.fits_only, sort=req.sort, limit=req.limit, gpu_lookup=find_gpu,
                   peak=peak_for, command_defaults=sweep_defaults(given))
