"""`tcalc sweep`'s pricing of a grid point, one row per point: the pure part of the sweep.

Every point is priced by the same estimators as `tcalc memory`, `tcalc flops` and `tcalc inference`,
with the same settings, so a one-point sweep equals those commands' JSON (`METRIC_SOURCES` names the
key each metric equals; tests/test_sweep.py checks them). How the grid is spelled and validated (the
axes' flags, lists and ranges, the job file's sections: requests/sweep_grid.py) and how it is run (the
rows kept, sorted, cut, priced by worker processes: results/sweep_run.py) sit above the estimators.

Each point costs O(1) (closed forms). What points share is computed once: configs are validated
once per distinct value, parameter counts and per-rank shards once per (model, layout) (memoized
in `params`), the model FLOPs of a step once per (model, S, B), the peak-memory timeline once per
(model, S, B, training, layout) whatever the GPU and dtype, the KV cache once per inference layout
whatever the GPU. Rows are produced by a generator (`iter_rows`), so a sweep that needs no sorting
streams them to CSV or JSON in constant memory. Points the model cannot run (T does not divide the
heads, P exceeds the layers, ...) are skipped and counted, with the first reasons.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import count_flops, train_flops_for_tokens, training_time_s
from transformer_calc.estimators.inference.engines import DEFAULT_ENGINE
from transformer_calc.estimators.inference.roofline import (
    InferenceSpec,
    decode,
    inference_memory,
    kv_cache,
    prefill_step,
)
from transformer_calc.estimators.inference.serving import capacity, engine_serving
from transformer_calc.estimators.inference.spec import check_positive_int
from transformer_calc.estimators.training.timeline import (
    CHUNK_TOKENS,
    fit_capacity,
    peak_memory,
    stage_timelines,
)
from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload
from transformer_calc.model.units import SECONDS_PER_DAY


# Metric -> (command, the key of that command's JSON it equals, dotted as in its CSV header).
METRIC_SOURCES: dict[str, tuple[str, str]] = {
    "peak_bytes": ("memory", "memory.peak_bytes"),
    "weights_bytes": ("memory", "memory.peak.weights_bytes"),
    "activations_bytes": ("memory", "memory.peak.activations_bytes"),
    "fits": ("memory", "fits"),
    "headroom_bytes": ("memory", "gpu.headroom_bytes"),
    "model_flops": ("flops", "flops.total"),
    "hardware_flops": ("flops", "flops.hardware"),
    "train_days": ("flops", "training.days"),
    "kv_cache_bytes": ("inference", "kv_cache.per_gpu_bytes"),
    "inference_memory_bytes": ("inference", "memory.per_gpu.total_bytes"),
    "inference_fits": ("inference", "memory.fits"),
    "time_to_first_token_s": ("inference", "time_to_first_token_s"),
    "time_per_output_token_s": ("inference", "decode.time_per_output_token_s"),
    "decode_tokens_per_s": ("inference", "decode.tokens_per_s"),
    "decode_bound": ("inference", "decode.bound"),
    "tokens_per_s": ("inference", "tokens_per_s"),
    "total_s": ("inference", "total_s"),
    "max_concurrent_sequences": ("inference", "serving.max_concurrent_sequences"),
}
METRICS = tuple(METRIC_SOURCES)
TRAINING_METRICS = tuple(k for k, (cmd, _) in METRIC_SOURCES.items() if cmd != "inference")
INFERENCE_METRICS = tuple(k for k, (cmd, _) in METRIC_SOURCES.items() if cmd == "inference")
MEMORY_METRICS = frozenset(("peak_bytes", "weights_bytes", "activations_bytes", "fits", "headroom_bytes"))
NEEDS_GPU = frozenset(("fits", "headroom_bytes", "train_days", *INFERENCE_METRICS))


MAX_REASONS = 5


CACHE_ENTRIES = 4096  # per reuse cache; cleared when full, so memory stays bounded on any grid


PeakLookup = Callable[[Any, "str | None"], "tuple[str, Any]"]  # report.peak_for: the one peak-dtype choice


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
    except (ValueError, TcalcError, OverflowError, ZeroDivisionError):
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


@dataclass(frozen=True)
class SweepSpec:
    """The grid: each axis's values, the metrics, and the settings fixed for every point."""

    axes: dict[str, list[Any]]
    metrics: tuple[str, ...]
    training: dict[str, Any] = field(default_factory=dict)  # Training fields (validated)
    parallelism: dict[str, Any] = field(default_factory=dict)  # sequence_parallel, expert_tensor, virtual_stages
    inference: dict[str, Any] = field(default_factory=dict)  # InferenceSpec fields (validated)
    engine: str = DEFAULT_ENGINE  # the serving engine of max_concurrent_sequences (engines.py)
    tokens: int | None = None  # token budget for train_days
    mfu: float = 0.4
    peak: PeakLookup | None = field(default=None, compare=False)  # (GPU, dtype or None) -> (dtype, FLOP/s)
    sp_with_tensor: bool = False  # sequence parallelism on at T > 1 where not given (the framework's default)

    @property
    def size(self) -> int:
        return math.prod(len(values) for values in self.axes.values())

    @property
    def training_point(self) -> bool:
        """A training metric is asked: a point's default S is the model's training S (its
        pre-training length), else inference's (the context window)."""
        return bool(set(self.metrics) & (MEMORY_METRICS | {"model_flops", "hardware_flops", "train_days"}))

    @property
    def columns(self) -> tuple[str, ...]:
        """The keys of every row, in order: the axes, S if not an axis, the metrics."""
        extra = ("seq_len",) if "seq_len" not in self.axes else ()
        return (*self.axes, *extra, *self.metrics)


@dataclass
class SweepStats:
    """What the row generator counts as it goes: skipped points and the first reasons."""

    skipped: int = 0
    reasons: list[str] = field(default_factory=list)


class Memo(dict):
    """A reuse cache of bounded size: cleared when full (grids repeat keys close together)."""

    def put(self, key: Any, value: Any) -> Any:
        if len(self) >= CACHE_ENTRIES:
            self.clear()
        self[key] = value
        return value


@dataclass
class Caches:
    """The reuse caches of `iter_rows`, kept across the chunks one worker process prices (with a
    fresh set per chunk, every layout's timeline lines were rebuilt for each chunk)."""

    trainings: dict[tuple[str, bool], Training] = field(default_factory=dict)
    layouts: dict[tuple[int, ...], Parallelism] = field(default_factory=dict)
    memory: Memo = field(default_factory=Memo)
    flops: Memo = field(default_factory=Memo)
    days: Memo = field(default_factory=Memo)
    kv: Memo = field(default_factory=Memo)
    inference: Memo = field(default_factory=Memo)
    affine: Memo = field(default_factory=Memo)


def iter_rows(
    spec: SweepSpec,
    models: dict[str, ModelConfig],
    gpus: dict[str, Any],
    stats: SweepStats,
    progress: Callable[[int], None] | None = None,
    start: int = 0,
    stop: int | None = None,
    caches: Caches | None = None,
) -> Iterator[dict[str, Any]]:
    """Every point of the grid (or of its points [start, stop) in grid order) that the model can
    run, as a row: its axis values, S, and the metrics (keys `spec.columns`). Skipped points are
    counted in `stats`. A generator: rows are priced as they are read.

    Longer than 60 lines on purpose: one loop over up to MAX_POINTS points whose reuse caches live in
    its frame; the per-point work is in `_training_layout`, `_memory_metrics`, `_train_days` and
    `_inference_metrics`."""
    metrics = spec.metrics
    want = set(metrics)
    want_memory = bool(want & MEMORY_METRICS)
    want_flops = bool(want & {"model_flops", "hardware_flops"})
    want_inference = bool(want & set(INFERENCE_METRICS))
    training_point = spec.training_point
    names = list(spec.axes)
    columns = spec.columns
    c = Caches() if caches is None else caches  # `caches`: the same spec, models and GPUs as before
    trainings, layouts = c.trainings, c.layouts
    memory_memo, flops_memo, days_memo, kv_memo, inference_memo = c.memory, c.flops, c.days, c.kv, c.inference
    affine_memo = c.affine
    mixed = {name: m.is_moe and m.n_moe_layers() not in (0, m.n_layers) for name, m in models.items()}

    def skip(point: dict[str, Any], exc: Exception) -> None:
        stats.skipped += 1
        if len(stats.reasons) < MAX_REASONS:
            where = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in point.items())
            stats.reasons.append(f"{where}: {exc}")

    for i, values in enumerate(_points(spec, start, spec.size if stop is None else stop), start):
        if progress is not None and i % 1024 == 0:
            progress(i)
        point = dict(zip(names, values))
        label = point["model"]
        m = models[label]
        device = gpus[point["gpu"]] if "gpu" in point else None
        # S: the axis, else the command's default: training's (the pre-training length) where a
        # training metric is asked, else inference's (the context window), as `tcalc inference`
        S = point.get("seq_len") or (m.training_seq_len if training_point else m.max_seq_len)
        B = point["batch_size"]
        row = dict(point)
        row["seq_len"] = S
        try:
            if want_memory or want_flops or "train_days" in want:
                rf, tr, layout, par = _training_layout(spec, point, trainings, layouts)
                if want_memory:
                    _memory_metrics(m, label, S, B, tr, par, (label, S, B, rf, layout), mixed[label], device, row,
                                    memory_memo, affine_memo)
                if want_flops:
                    flops_key = (label, S, B)
                    step = flops_memo.get(flops_key)
                    if step is None:  # a Workload only where a point is priced afresh
                        step = flops_memo.put(flops_key, count_flops(m, Workload.model_construct(seq_len=S, batch_size=B)))
                    row["model_flops"] = step.total
                    if "hardware_flops" in want:
                        row["hardware_flops"] = step.hardware(tr.recompute)
                if "train_days" in want:
                    row["train_days"] = _train_days(m, label, S, spec, par, device, point.get("dtype"), days_memo)
            if want_inference:
                _inference_metrics(m, label, S, B, point, device, spec, want, row, kv_memo, inference_memo)
            for name in metrics:
                value = row[name]
                if isinstance(value, float) and not math.isfinite(value):
                    raise ValueError(f"{name} is not finite ({value})")
        except TcalcError:
            raise
        except (ValueError, TcalcError, OverflowError, ZeroDivisionError) as exc:
            skip(point, exc)
            continue
        yield {k: row[k] for k in columns}


def _training_layout(spec: SweepSpec, point: dict[str, Any], trainings: dict[tuple[str, bool], Training],
                     layouts: dict[tuple[int, ...], Parallelism]) -> tuple[Any, Training, tuple[int, ...], Parallelism]:
    """((recompute, flash), its Training, the layout, its Parallelism) of a point, each validated once."""
    rf = (point["recompute"], point["flash"])
    tr = trainings.get(rf)
    if tr is None:
        tr = trainings[rf] = Training.model_validate({**spec.training, "recompute": rf[0], "flash": rf[1]})
    layout = (point["tensor"], point["pipeline"], point["data"], point["zero"], point["expert"], point["context"])
    par = layouts.get(layout)
    if par is None:
        par = layouts[layout] = Parallelism.model_validate(
            {"tensor": layout[0], "pipeline": layout[1], "data": layout[2], "zero": layout[3],
             "expert": layout[4], "context": layout[5],
             "sequence_parallel": spec.sp_with_tensor and layout[0] > 1, **spec.parallelism})
    return rf, tr, layout, par


def _memory_metrics(m: ModelConfig, label: str, S: int, B: int, tr: Training, par: Parallelism, key: tuple[Any, ...],
                    mixed: bool, device: Any, row: dict[str, Any], memo: Memo, affine_memo: Memo) -> None:
    """`tcalc memory` at this point: the peak from the stages' lines in B (`affine_peaks`) where they
    hold, else the timeline; fits and headroom on the point's GPU. `key`: (label, S, B, (recompute,
    flash), layout)."""
    peak = memo.get(key)
    if peak is None:
        affine_key = (label, S, key[3], key[4])
        lines = affine_memo.get(affine_key)
        if lines is None:
            lines = affine_memo.put(affine_key, affine_peaks(m, S, tr, par, mixed))
        if lines is not False:
            peak = peak_at(lines, B)
    if peak is None:
        try:
            phase = peak_memory(m, Workload.model_construct(seq_len=S, batch_size=B), tr, par, all_stages=mixed).peak
            peak = (phase.total, phase.weights, phase.activations)
        except TcalcError:
            raise
        except (ValueError, TcalcError) as exc:
            peak = exc
        memo.put(key, peak)
    if isinstance(peak, Exception):
        raise peak
    row["peak_bytes"], row["weights_bytes"], row["activations_bytes"] = peak
    if device is not None:
        usable = fit_capacity(device.memory_bytes)
        row["fits"], row["headroom_bytes"] = peak[0] <= usable, usable - peak[0]


def _points(spec: SweepSpec, start: int, stop: int) -> Iterator[tuple[Any, ...]]:
    """The grid's points [start, stop) in product order (the last axis varies fastest)."""
    values = list(spec.axes.values())
    if start == 0 and stop == spec.size:
        yield from itertools.product(*values)
        return
    inner, outer = values[-1], values[:-1]
    i = start
    while i < stop:
        index, j = divmod(i, len(inner))
        head = []
        for axis in reversed(outer):  # the outer axes' positions: mixed-radix digits of the index
            index, digit = divmod(index, len(axis))
            head.append(axis[digit])
        head.reverse()
        end = min(len(inner), j + stop - i)
        for value in inner[j:end]:
            yield (*head, value)
        i += end - j


def _train_days(m: ModelConfig, label: str, S: int, spec: SweepSpec, par: Parallelism, device: Any, dtype: str | None,
                memo: Memo) -> float:
    """`tcalc flops --tokens N --gpus T·CP·P·dp --gpu G --mfu M [--dtype D]`: training.days."""
    assert spec.tokens is not None and spec.peak is not None  # build_spec requires both for train_days
    key = (label, S)
    total = memo.get(key)
    if total is None:
        total = memo.put(key, train_flops_for_tokens(m, S, spec.tokens))
    _, peak = spec.peak(device, dtype)
    return training_time_s(total, par.gpus, peak, spec.mfu) / SECONDS_PER_DAY


def _inference_metrics(m: ModelConfig, label: str, S: int, B: int, point: dict[str, Any], device: Any, spec: SweepSpec,
                       want: set[str], row: dict[str, Any], kv_memo: Memo, memo: Memo) -> None:
    """`tcalc inference` at this point (its InferenceSpec built as `report.inference_spec` does)."""
    T, ep, dtype = point["tensor"], point["expert"], point.get("dtype")
    # The weights: the axis, else the model's own format (a quantized checkpoint), else the compute
    # dtype, else bf16 (as `report.inference_spec` defaults them).
    weight = point.get("weight_dtype") or getattr(m, "weight_format", None) or dtype or "bf16"
    layout = (label, S, T, ep, weight, dtype)  # what the spec holds but B
    key = (label, S, B, T, ep, weight, dtype, point["gpu"])
    done = memo.get(key)
    if done is None:
        try:
            ispec = _inference_spec(layout, B, spec, memo)
            done = {}
            if "kv_cache_bytes" in want:
                # B sequences' caches: B times one sequence's (kv_cache: per_gpu_bytes = B · kv_bytes(shard)),
                # whose layout does not involve B (rank_shard's key leaves out B, S and N_new)
                per_sequence = kv_memo.get(layout)
                if per_sequence is None:
                    per_sequence = kv_memo.put(layout, kv_cache(m, ispec).per_gpu_bytes // B)
                done["kv_cache_bytes"] = B * per_sequence
            if {"inference_memory_bytes", "inference_fits"} & want:
                mem = inference_memory(m, device, ispec)
                done["inference_memory_bytes"], done["inference_fits"] = mem.total_bytes, mem.fits
            need_prefill = bool({"time_to_first_token_s", "tokens_per_s", "total_s"} & want)
            need_decode = bool({"time_per_output_token_s", "decode_tokens_per_s", "decode_bound", "tokens_per_s", "total_s"} & want)
            prefill = prefill_step(m, device, ispec) if need_prefill else None
            dec = decode(m, device, ispec) if need_decode else None
            if prefill is not None:
                done["time_to_first_token_s"] = prefill.seconds
            if dec is not None:
                done["time_per_output_token_s"], done["decode_tokens_per_s"], done["decode_bound"] = (
                    dec.seconds_per_token, dec.tokens_per_s, dec.bound)
            if "max_concurrent_sequences" in want:  # the engine's paged KV cache (inference's serving section)
                done["max_concurrent_sequences"] = capacity(
                    m, device, ispec, engine_serving(spec.engine, device, T)).max_concurrent_sequences if ispec.kv_cache else None
            if prefill is not None and dec is not None:  # as inference.estimate_inference
                total = prefill.seconds + dec.seconds
                done["total_s"], done["tokens_per_s"] = total, ispec.batch_size * ispec.new_tokens / total
        except TcalcError:
            raise
        except (ValueError, TcalcError) as exc:
            done = exc
        memo.put(key, done)
    if isinstance(done, Exception):
        raise done
    row.update(done)


def _inference_spec(layout: tuple[Any, ...], B: int, spec: SweepSpec, memo: Memo) -> InferenceSpec:
    """`InferenceSpec(batch_size=B, prompt_len=S, tensor_parallel=T, ...)` of a point, its other
    fields validated and resolved once per `layout` (label, S, T, ep, weight, dtype): its
    `__post_init__` checks each field on its own and resolves the dtypes from the dtypes alone, so
    the spec at another B is the validated one with B replaced (and B checked as it checks it)."""
    template = memo.get(("spec", layout))
    if template is None:
        _, S, T, ep, weight, dtype = layout
        try:
            template = InferenceSpec(batch_size=B, prompt_len=S, tensor_parallel=T, expert_parallel=ep,
                                     weight_dtype=weight, compute_dtype=dtype, **spec.inference)
        except ValueError as exc:
            template = exc
        memo.put(("spec", layout), template)
    if isinstance(template, Exception):
        raise template
    if template.batch_size == B:
        return template
    check_positive_int("batch_size", B)
    at_b = object.__new__(InferenceSpec)  # a frozen dataclass: its fields are its __dict__
    at_b.__dict__.update(template.__dict__)
    at_b.__dict__["batch_size"] = B
    return at_b
