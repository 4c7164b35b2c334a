"""Running a validated sweep (`prepare` -> `SweepRun`): the rows kept, sorted and cut, priced in this
process or by forked worker processes (`default_workers`: the CPUs, TCALC_SWEEP_WORKERS), in grid
order with the same skip count whatever the number of workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.sweep import MAX_REASONS, Caches, PeakLookup, SweepSpec, SweepStats, iter_rows
from transformer_calc.model.config import ModelConfig
from transformer_calc.requests.sweep_grid import GpuLookup, NumberParser, build_spec, clip_values, sort_column


PARALLEL_MIN_POINTS = 20_000  # below this, forking workers costs more than it saves
# A point priced faster than this is priced in one process (`SweepRun._timed_rows`): a row sent back by
# a worker costs the reader ~3-5 µs (unpickled, then written), as much as pricing it from lines in B
# (~5 µs: bench/README.md, issue 39); a point priced from the timeline or the decode's sum (30-90 µs)
# is worth a worker
FORK_MIN_POINT_S = 15e-6
CHUNK_POINTS = 4096  # points per task of a worker
MAX_WORKERS = 8


def _sort_key(column: str) -> Callable[[dict[str, Any]], Any]:
    return lambda r: (r[column] is None, r[column])


@dataclass
class SweepRun:
    """A validated sweep, ready to run: the grid, its models and GPUs, and what to keep."""

    spec: SweepSpec
    models: dict[str, ModelConfig]
    gpus: dict[str, Any]
    fits_only: bool = False
    sort: str | None = None  # a column, '-' prefixed for descending
    limit: int | None = None
    stats: SweepStats = field(default_factory=SweepStats)
    workers: int | None = None  # processes pricing the points (None: `default_workers`)
    chunk: int = CHUNK_POINTS  # points per task when several processes price them

    @property
    def columns(self) -> tuple[str, ...]:
        return self.spec.columns

    def head(self) -> dict[str, Any]:
        """The report's keys before the points."""
        return {"axes": dict(self.spec.axes), "metrics": list(self.spec.metrics), "points_total": self.spec.size}

    def tail(self) -> dict[str, Any]:
        """The report's keys after the points (known once every row has been read)."""
        return {"skipped": self.stats.skipped, "skipped_reasons": list(self.stats.reasons)}

    def rows(self, progress: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
        """The rows kept (--fits-only), in grid order or sorted, at most `limit`; a generator.
        Without a sort nothing is held: each row is yielded as it is priced (the grid is run to its
        end all the same, so that the skipped count is the grid's)."""
        self.stats = SweepStats()
        workers = default_workers(self.spec.size) if self.workers is None else self.workers
        rows: Iterator[dict[str, Any]]
        if workers > 1 and self.workers is None and not _workers_given():
            rows = self._timed_rows(workers, progress)
        elif workers > 1:
            rows = self._parallel_rows(workers, progress, Caches())
        else:
            rows = iter_rows(self.spec, self.models, self.gpus, self.stats, progress)
        if self.fits_only:
            rows = fits_filter(rows)
        if self.sort is not None:
            column = self.sort.lstrip("-")
            rows = iter(sorted(rows, key=_sort_key(column), reverse=self.sort.startswith("-")))
        n = 0
        for row in rows:
            if self.limit is None or n < self.limit:
                n += 1
                yield row

    def _timed_rows(self, workers: int, progress: Callable[[int], None] | None) -> Iterator[dict[str, Any]]:
        """The rows, the first chunk priced here and timed: the rest here too where a point costs
        less than FORK_MIN_POINT_S (a worker's rows cross a pipe, pickled, and the reader unpickles
        them: that costs about as much as pricing a cheap point again), else by `workers` forked
        processes, which inherit the caches the first chunk filled (the workers chosen by the user,
        `workers` or TCALC_SWEEP_WORKERS, always fork)."""
        import time

        caches, first = Caches(), min(self.chunk, self.spec.size)
        start = time.process_time()  # this process's CPU time: what other work on the machine inflates least
        rows = list(iter_rows(self.spec, self.models, self.gpus, self.stats, progress, 0, first, caches))
        per_point = (time.process_time() - start) / first
        yield from rows
        del rows
        if per_point < FORK_MIN_POINT_S:
            yield from iter_rows(self.spec, self.models, self.gpus, self.stats, progress, first, None, caches)
        else:
            yield from self._parallel_rows(workers, progress, caches, first_chunk=1)

    def _parallel_rows(self, workers: int, progress: Callable[[int], None] | None, caches: Caches,
                       first_chunk: int = 0) -> Iterator[dict[str, Any]]:
        """The rows of `iter_rows` from chunk `first_chunk` on, in the same order with the same skip
        count and reasons, priced by `workers` forked processes: worker k prices chunks
        first_chunk + k, first_chunk + k + workers, ... (`chunk` points each) and sends each
        chunk's rows through its own pipe, which the reader drains in chunk order. A pipe holds
        little, so a worker waits while the reader is behind: memory stays bounded. However the
        reader stops (the end, an error, Ctrl-C, a closed stdout), the workers are killed and
        reaped (`_reap`); they share no lock with it."""
        import os

        children: list[tuple[int, int]] = []  # (pid, read end of its pipe)
        readers: list[Any] = []
        try:
            for k in range(workers):
                children.append(self._fork_worker(first_chunk + k, workers, [fd for _, fd in children], caches))
            readers = [os.fdopen(fd, "rb") for _, fd in children]
            yield from self._drain(readers, progress, first_chunk)
        finally:
            _reap(children, readers)

    def _fork_worker(self, k: int, workers: int, others: list[int], caches: Caches) -> tuple[int, int]:
        """Fork the worker whose first chunk is k; (its pid, the read end of its pipe). `others`:
        the earlier workers' read ends, which the new worker closes."""
        import os

        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            self._work(k, workers, read_end, write_end, others, caches)  # never returns
        os.close(write_end)
        return pid, read_end

    def _work(self, k: int, workers: int, read_end: int, write_end: int, others: list[int], caches: Caches) -> NoReturn:
        """A worker: price chunks k, k + workers, ..., write them, leave without cleanup (never
        print or unwind into the CLI); a failure is told to the reader. `caches`: the reader's, as
        they were at the fork, kept across this worker's chunks."""
        import os
        import pickle
        import signal

        code = 0
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the reader's to handle
            os.close(read_end)
            for other in others:
                os.close(other)
            out = os.fdopen(write_end, "wb")
            size, step = self.spec.size, self.chunk
            try:
                for c in range(k, -(-size // step), workers):
                    stats = SweepStats()
                    bounds = (c * step, min(c * step + step, size))
                    rows = list(iter_rows(self.spec, self.models, self.gpus, stats, None, *bounds, caches))
                    pickle.dump((rows, stats.skipped, stats.reasons), out, pickle.HIGHEST_PROTOCOL)
                    out.flush()
            except BrokenPipeError:
                pass  # the reader stopped early
            except BaseException as exc:  # noqa: BLE001 - told to the reader, never printed here
                code = 1
                pickle.dump(("error", f"{type(exc).__name__}: {exc}"), out)
                out.flush()
        except BaseException:  # noqa: BLE001 - a worker never prints or unwinds into the CLI
            code = 1
        finally:
            os._exit(code)

    def _drain(self, readers: list[Any], progress: Callable[[int], None] | None,
               first_chunk: int) -> Iterator[dict[str, Any]]:
        """The workers' chunks in grid order from `first_chunk` (chunk c from worker (c - first_chunk)
        mod workers), their skips counted."""
        import pickle

        size, step = self.spec.size, self.chunk
        for c in range(first_chunk, -(-size // step)):
            try:
                record = pickle.load(readers[(c - first_chunk) % len(readers)])
            except EOFError:
                raise RuntimeError("a sweep worker process stopped; run with TCALC_SWEEP_WORKERS=1") from None
            if record[0] == "error":
                raise RuntimeError(f"a sweep worker failed: {record[1]}")
            rows, skipped, reasons = record
            self.stats.skipped += skipped
            self.stats.reasons.extend(reasons[: MAX_REASONS - len(self.stats.reasons)])
            if progress is not None:
                progress(min((c + 1) * step, size))
            yield from rows

    def collect(self, progress: Callable[[int], None] | None = None,
                keep: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """(the first `keep` points, or all; how many points there were), priced as they stream."""
        points: list[dict[str, Any]] = []
        n = 0
        for row in self.rows(progress):
            n += 1
            if keep is None or len(points) < keep:
                points.append(row)
        return points, n

    def report(self, progress: Callable[[int], None] | None = None, keep: int | None = None) -> dict[str, Any]:
        """The whole result (`--format json`): head, points, tail. With `keep`, only the first
        `keep` points are held and `shown_of` says how many there were (the table view)."""
        points, n = self.collect(progress, keep)
        out = {**self.head(), "points": points, **self.tail()}
        if keep is not None:
            out["shown_of"] = n
        return out


def _reap(children: list[tuple[int, int]], readers: list[Any]) -> None:
    """Kill and reap the workers, close their pipes (the read ends, as files once opened)."""
    import os
    import signal

    for pid, _ in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid, _ in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    for reader in readers:
        reader.close()
    if not readers:
        for _, fd in children:
            os.close(fd)


def _workers_given() -> bool:
    """Whether TCALC_SWEEP_WORKERS chooses the number of processes (then they always fork)."""
    import os

    given = os.environ.get("TCALC_SWEEP_WORKERS", "").strip()
    return given.isdigit() and int(given) >= 1


def default_workers(size: int) -> int:
    """Processes for a grid of `size` points: one below PARALLEL_MIN_POINTS or where fork is not
    available, else the CPUs this process may use (at most MAX_WORKERS); TCALC_SWEEP_WORKERS
    overrides it (1: never fork)."""
    import os

    given = os.environ.get("TCALC_SWEEP_WORKERS", "").strip()
    if given.isdigit() and int(given) >= 1:
        n = int(given)
    elif size < PARALLEL_MIN_POINTS:
        return 1
    else:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
    if not hasattr(os, "fork"):
        return 1
    return max(1, min(n, MAX_WORKERS))


def prepare(
    models: dict[str, ModelConfig],
    axes_text: dict[str, Any],
    settings: dict[str, Any],
    metrics: list[str] | None = None,
    job: Any = None,
    *,
    tokens: int | None = None,
    mfu: float | None = None,
    fits_only: bool = False,
    sort: str | None = None,
    limit: int | None = None,
    number: NumberParser | None = None,
    gpu_lookup: GpuLookup | None = None,
    peak: PeakLookup | None = None,
    command_defaults: dict[str, Any] | None = None,
) -> SweepRun:
    """Validate everything a sweep is given and return it ready to run (see `build_spec`)."""
    if not models:
        raise TcalcError("no model given; use --preset NAME[,NAME...], --config FILE or --hf-config FILE")
    spec, gpus = build_spec(axes_text, models, metrics, settings, job, tokens=tokens, mfu=mfu, number=number,
                            gpu_lookup=gpu_lookup, peak=peak, command_defaults=command_defaults)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise TcalcError(f"--limit ({clip_values(str(limit))}) must be a whole number >= 1")
    if fits_only and not ({"fits", "inference_fits"} & set(spec.metrics)):
        raise TcalcError("--fits-only keeps the points whose fits or inference_fits is true; add one to --metrics")
    return SweepRun(spec, models, gpus, fits_only=fits_only, sort=sort_column(sort, spec.columns), limit=limit)


def fits_filter(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The points that fit: training memory (`fits`) and inference memory (`inference_fits`)."""
    for r in rows:
        if r.get("fits", True) and r.get("inference_fits", True):
            yield r
