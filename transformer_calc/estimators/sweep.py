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
from transformer_calc.estimators.sweep_lines import (
    LINE_SAMPLES,
    PeakCurve,
    affine_peaks,
    decode_at,
    decode_lines,
    flops_lines,
)
from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory
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
# The metrics that are floats (seconds, rates, days): only they can be non-finite (the rest are ints,
# booleans, a bound's name or None); tests/test_sweep.py checks the list against a sweep's rows
FLOAT_METRICS = frozenset(("train_days", "time_to_first_token_s", "time_per_output_token_s", "decode_tokens_per_s",
                           "tokens_per_s", "total_s"))


MAX_REASONS = 5


CACHE_ENTRIES = 4096  # per reuse cache; cleared when full, so memory stays bounded on any grid


PeakLookup = Callable[[Any, "str | None"], "tuple[str, Any]"]  # report.peak_for: the one peak-dtype choice


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
    flops_lines: Memo = field(default_factory=Memo)  # (label, S) -> flops_lines
    decode: Memo = field(default_factory=Memo)  # (inference layout, GPU) -> decode_lines
    points: Memo = field(default_factory=Memo)  # a point's values but B -> (S, its metrics at B)


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
    counted in `stats`. A generator: rows are priced as they are read (`_Pricer.row`)."""
    names = list(spec.axes)
    price = _Pricer(spec, models, gpus, Caches() if caches is None else caches).row
    for i, values in enumerate(_points(spec, start, spec.size if stop is None else stop), start):
        if progress is not None and i % 1024 == 0:
            progress(i)
        try:
            row = price(values)
        except TcalcError:
            raise
        except (ValueError, OverflowError, ZeroDivisionError) as exc:
            stats.skipped += 1
            if len(stats.reasons) < MAX_REASONS:
                where = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in zip(names, values))
                stats.reasons.append(f"{where}: {exc}")
            continue
        yield row


class _Pricer:
    """One grid's pricing of its points, with what no point changes worked out once: the axes'
    positions, the metrics asked, each model's default S and, per layout (a point's values but B),
    the configs, the lines in B (estimators/sweep_lines.py) and the reuse caches (`caches`: the
    same spec, models and GPUs as before)."""

    def __init__(self, spec: SweepSpec, models: dict[str, ModelConfig], gpus: dict[str, Any], caches: Caches) -> None:
        self.spec, self.models, self.gpus, self.c = spec, models, gpus, caches
        self.names, self.columns, self.metrics = list(spec.axes), spec.columns, spec.metrics
        self.want = want = set(spec.metrics)
        self.want_memory = bool(want & MEMORY_METRICS)
        self.want_flops = bool(want & {"model_flops", "hardware_flops"})
        self.want_training = self.want_memory or self.want_flops or "train_days" in want
        self.want_inference = bool(want & set(INFERENCE_METRICS))
        self.i_batch = self.names.index("batch_size")
        self.i_seq = self.names.index("seq_len") if "seq_len" in spec.axes else None
        self.mixed = {label: m.is_moe and m.n_moe_layers() not in (0, m.n_layers) for label, m in models.items()}
        batches = spec.axes["batch_size"]
        # lines in B pay off where B takes more values than the lines' own samples (B = 1..4, the largest)
        self.b_max = max(batches) if len(batches) > len(LINE_SAMPLES) + 1 else None

    def row(self, values: tuple[Any, ...]) -> dict[str, Any]:
        """The row of the point `values` (in the axes' order); raises where the model cannot run it."""
        i = self.i_batch
        key = values[:i] + values[i + 1:]
        layout = self.c.points.get(key)
        if layout is None:
            layout = self.c.points.put(key, self._layout(values))
        S, price = layout
        metrics = price(values[i])
        if self.i_seq is None:
            return dict(zip(self.columns, (*values, S, *metrics)))
        j = self.i_seq
        return dict(zip(self.columns, (*values[:j], S, *values[j + 1:], *metrics)))

    def _layout(self, values: tuple[Any, ...]) -> tuple[int, Callable[[int], list[Any]]]:
        """(S, the metrics at B) of the points that differ from `values` in B alone; raises where the
        layout's configs are invalid (every point of it is then skipped with the same reason)."""
        point = dict(zip(self.names, values))
        label = point["model"]
        m, spec, c, want = self.models[label], self.spec, self.c, self.want
        device = self.gpus[point["gpu"]] if "gpu" in point else None
        # S: the axis, else the command's default: training's (the pre-training length) where a
        # training metric is asked, else inference's (the context window), as `tcalc inference`
        S = point.get("seq_len") or (m.training_seq_len if spec.training_point else m.max_seq_len)
        parts: list[Callable[[int, dict[str, Any]], None]] = []  # each writes its metrics at B, in this order
        if self.want_training:
            rf, tr, layout, par = _training_layout(spec, point, c.trainings, c.layouts)
            if self.want_memory:
                usable = None if device is None else fit_capacity(device.memory_bytes)
                parts.append(self._memory(m, label, S, tr, par, (label, S, rf, layout), usable))
            if self.want_flops:
                parts.append(self._flops(m, label, S, tr))
            if "train_days" in want:
                dtype = point.get("dtype")
                parts.append(lambda B, out: out.__setitem__(
                    "train_days", _train_days(m, label, S, spec, par, device, dtype, c.days)))
        if self.want_inference:
            parts.append(_inference_part(m, label, S, point, device, spec, want, c, self.b_max))
        names = self.metrics
        floats = [(i, name) for i, name in enumerate(names) if name in FLOAT_METRICS]

        def price(B: int) -> list[Any]:
            out: dict[str, Any] = {}
            for part in parts:
                part(B, out)
            metrics = [out[name] for name in names]
            for i, name in floats:
                if isinstance(metrics[i], float) and not math.isfinite(metrics[i]):
                    raise ValueError(f"{name} is not finite ({metrics[i]})")
            return metrics

        return S, price

    def _memory(self, m: ModelConfig, label: str, S: int, tr: Training, par: Parallelism, key: tuple[Any, ...],
                usable: int | None) -> Callable[[int, dict[str, Any]], None]:
        """`tcalc memory` at B: the peak from the stages' lines in B (`affine_peaks`) where they hold,
        else the timeline; fits and headroom on the point's GPU. `key`: (label, S, (recompute, flash),
        layout)."""
        c, mixed = self.c, self.mixed[label]
        lines = False if self.b_max is None else c.affine.get(key)
        if lines is None:
            lines = c.affine.put(key, affine_peaks(m, S, tr, par, mixed))
        peak_of = PeakCurve(lines) if lines is not False else (
            lambda B: _timeline_peak(m, S, B, tr, par, mixed, (*key, B), c.memory))

        def memory(B: int, out: dict[str, Any]) -> None:
            peak = peak_of(B)
            out["peak_bytes"], out["weights_bytes"], out["activations_bytes"] = peak
            if usable is not None:
                out["fits"], out["headroom_bytes"] = peak[0] <= usable, usable - peak[0]

        return memory

    def _flops(self, m: ModelConfig, label: str, S: int, tr: Training) -> Callable[[int, dict[str, Any]], None]:
        """`tcalc flops` at B: from the step's lines in B (`flops_lines`) where they hold, else
        `count_flops` once per (model, S, B)."""
        c, hardware, b_max = self.c, "hardware_flops" in self.want, self.b_max
        lines: Any = False
        if b_max is not None:
            lines = c.flops_lines.get((label, S))
            if lines is None:
                lines = c.flops_lines.put((label, S), flops_lines(m, S, b_max))
        if lines is not False:
            (t0, t1), (h0, h1) = lines["total"], lines[tr.recompute]

            def flops(B: int, out: dict[str, Any]) -> None:
                out["model_flops"] = t0 + B * t1
                if hardware:
                    out["hardware_flops"] = h0 + B * h1
            return flops

        def flops_at(B: int, out: dict[str, Any]) -> None:
            step = c.flops.get((label, S, B))
            if step is None:  # a Workload only where a point is priced afresh
                step = c.flops.put((label, S, B), count_flops(m, Workload.model_construct(seq_len=S, batch_size=B)))
            out["model_flops"] = step.total
            if hardware:
                out["hardware_flops"] = step.hardware(tr.recompute)
        return flops_at


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


def _timeline_peak(m: ModelConfig, S: int, B: int, tr: Training, par: Parallelism, mixed: bool,
                   key: tuple[Any, ...], memo: Memo) -> tuple[int, int, int]:
    """(total, weights, activations) of the peak phase at B from the timeline itself, once per `key`
    (label, S, (recompute, flash), layout, B) whatever the GPU and dtype."""
    peak = memo.get(key)
    if peak is None:
        try:
            phase = peak_memory(m, Workload.model_construct(seq_len=S, batch_size=B), tr, par, all_stages=mixed).peak
            peak = (phase.total, phase.weights, phase.activations)
        except TcalcError:
            raise
        except ValueError as exc:
            peak = exc
        memo.put(key, peak)
    if isinstance(peak, Exception):
        raise peak
    return peak


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


LINE_METRICS = frozenset(("kv_cache_bytes", "time_per_output_token_s", "decode_tokens_per_s", "decode_bound"))
PREFILL_METRICS = frozenset(("time_to_first_token_s", "tokens_per_s", "total_s"))
DECODE_METRICS = frozenset(("time_per_output_token_s", "decode_tokens_per_s", "decode_bound", "tokens_per_s", "total_s"))


def _inference_part(m: ModelConfig, label: str, S: int, point: dict[str, Any], device: Any, spec: SweepSpec,
                    want: set[str], c: Caches, b_max: int | None) -> Callable[[int, dict[str, Any]], None]:
    """`tcalc inference` at B (its InferenceSpec built as `report.inference_spec` does): the KV
    cache and a one-token decode from lines in B where they hold, else once per (label, S, T, ep,
    weight dtype, dtype, GPU, B) whatever the other axes (`_inference_point`)."""
    T, ep, dtype = point["tensor"], point["expert"], point.get("dtype")
    # The weights: the axis, else the model's own format (a quantized checkpoint), else the compute
    # dtype, else bf16 (as `report.inference_spec` defaults them).
    weight = point.get("weight_dtype") or getattr(m, "weight_format", None) or dtype or "bf16"
    layout = (label, S, T, ep, weight, dtype)  # what the spec holds but B
    line_key = (layout, point["gpu"])
    asked = want & set(INFERENCE_METRICS)
    lines: list[Any] = [] if b_max is not None and asked <= LINE_METRICS else [False]

    def inference(B: int, out: dict[str, Any]) -> None:
        if not lines:  # the first B: the layout's lines (or False), raising where its spec is invalid
            assert b_max is not None  # lines start empty only then
            lines.append(_inference_lines(m, layout, B, device, line_key, spec, asked, c, b_max))
        if lines[0] is not False:
            kv, dec = lines[0]
            if kv is not None:
                out["kv_cache_bytes"] = B * kv
            if dec is not None:
                out["time_per_output_token_s"], out["decode_tokens_per_s"], out["decode_bound"], _ = decode_at(dec, B)
            return
        key = (line_key, B)
        done = c.inference.get(key)
        if done is None:
            try:
                done = _inference_point(m, layout, B, device, spec, asked, c)
            except TcalcError:
                raise
            except ValueError as exc:
                done = exc
            c.inference.put(key, done)
        if isinstance(done, Exception):
            raise done
        out.update(done)

    return inference


def _inference_lines(m: ModelConfig, layout: tuple[Any, ...], B: int, device: Any, line_key: tuple[Any, ...],
                     spec: SweepSpec, asked: set[str], c: Caches, b_max: int) -> Any:
    """(one sequence's KV cache bytes or None, the one-token decode's `decode_lines` or None) of a
    layout, or False where the decode is not one token or not a line in B."""
    template = _spec_template(layout, B, spec, c.inference)  # validated once per layout
    dec = None
    if asked & DECODE_METRICS:
        if template.new_tokens != 1:
            return False
        dec = c.decode.get(line_key)
        if dec is None:
            dec = c.decode.put(line_key, decode_lines(m, device, lambda b: _inference_spec(layout, b, spec, c.inference),
                                                      b_max))
        if dec is False:
            return False
    return (_kv_per_sequence(m, layout, template, c) if "kv_cache_bytes" in asked else None), dec


def _kv_per_sequence(m: ModelConfig, layout: tuple[Any, ...], template: InferenceSpec, c: Caches) -> int:
    """One sequence's KV cache bytes on one GPU: kv_cache's per_gpu_bytes is B · kv_bytes(shard), whose
    layout does not involve B (rank_shard's key leaves out B, S and N_new)."""
    per_sequence = c.kv.get(layout)
    if per_sequence is None:
        per_sequence = c.kv.put(layout, kv_cache(m, template).per_gpu_bytes // template.batch_size)
    return per_sequence


def _inference_point(m: ModelConfig, layout: tuple[Any, ...], B: int, device: Any, spec: SweepSpec, asked: set[str],
                     c: Caches) -> dict[str, Any]:
    """The inference metrics of one point by the estimators at this B (the KV cache as B sequences')."""
    ispec = _inference_spec(layout, B, spec, c.inference)
    done: dict[str, Any] = {}
    if "kv_cache_bytes" in asked:
        done["kv_cache_bytes"] = B * _kv_per_sequence(m, layout, ispec, c)
    if {"inference_memory_bytes", "inference_fits"} & asked:
        mem = inference_memory(m, device, ispec)
        done["inference_memory_bytes"], done["inference_fits"] = mem.total_bytes, mem.fits
    prefill = prefill_step(m, device, ispec) if asked & PREFILL_METRICS else None
    dec = decode(m, device, ispec) if asked & DECODE_METRICS else None
    if prefill is not None:
        done["time_to_first_token_s"] = prefill.seconds
    if dec is not None:
        done["time_per_output_token_s"], done["decode_tokens_per_s"], done["decode_bound"] = (
            dec.seconds_per_token, dec.tokens_per_s, dec.bound)
    if "max_concurrent_sequences" in asked:  # the engine's paged KV cache (inference's serving section)
        done["max_concurrent_sequences"] = capacity(
            m, device, ispec, engine_serving(spec.engine, device, ispec.tensor_parallel)).max_concurrent_sequences \
            if ispec.kv_cache else None
    if prefill is not None and dec is not None:  # as inference.estimate_inference
        total = prefill.seconds + dec.seconds
        done["total_s"], done["tokens_per_s"] = total, ispec.batch_size * ispec.new_tokens / total
    return done


def _inference_spec(layout: tuple[Any, ...], B: int, spec: SweepSpec, memo: Memo) -> InferenceSpec:
    """`InferenceSpec(batch_size=B, prompt_len=S, tensor_parallel=T, ...)` of a point, its other
    fields validated and resolved once per `layout` (label, S, T, ep, weight, dtype): its
    `__post_init__` checks each field on its own and resolves the dtypes from the dtypes alone, so
    the spec at another B is the validated one with B replaced (and B checked as it checks it)."""
    template = _spec_template(layout, B, spec, memo)
    if template.batch_size == B:
        return template
    check_positive_int("batch_size", B)
    at_b = object.__new__(InferenceSpec)  # a frozen dataclass: its fields are its __dict__
    at_b.__dict__.update(template.__dict__)
    at_b.__dict__["batch_size"] = B
    return at_b


def _spec_template(layout: tuple[Any, ...], B: int, spec: SweepSpec, memo: Memo) -> InferenceSpec:
    """The layout's validated InferenceSpec (at the B it was first asked at); raises where it is invalid."""
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
    return template
