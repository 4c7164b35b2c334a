"""Validate tcalc's inference latency (the roofline bound and the expected time) against published
serving measurements with their full setup.

The rows are in serving.yaml next to this file, each copied from a source named there. Two kinds:

    latency   a fixed batch of B requests (prompt S, N_new output tokens), end to end:
              bound    = inference.estimate_inference(...).total_s   (roofline, a true lower bound)
              expected = expected.estimate_expected(...).total_s
    serving   a server with `concurrency` requests in flight; the row's metric is the TTFT or the
              TPOT (inter-token latency):
              bound    = TTFT: the prompt's own prefill at B = 1; TPOT: one decode step of all the
                         sequences in flight at their mean context (both roofline lower bounds)
              expected = serving.load_point(...) at B = concurrency (tcalc serve's model)

Error = expected / measured − 1; "bound/measured" is the bound's share of the measurement (≤ 1:
the bound holds). Three constants of expected.py are FITTED here (`--fit` recomputes them): the
per-kernel cost with CUDA graphs on the FIT_KERNEL rows, the fp8 matmul efficiency on FIT_FP8, the
cost per sequence per step on FIT_SEQUENCE; and Triton's two frontend costs (engines.TRITON_*, the
rows whose source served through Triton, FRONTEND_OF) on FIT_TRITON; the other rows check them.
The report gives the errors per source, GPU generation and metric (throughput, TPOT, TTFT, a fixed
batch's end-to-end latency) apart. Rows whose measurement is below the roofline of their stated setup are
excluded with the reason in the YAML; the exit status is 1 when the bound fails on another row.
No network access.

    PYTHONPATH=. python tools/validation/serving.py [--write-docs] [--fit] [-v]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from transformer_calc.estimators.inference.expected import (  # noqa: E402
    FP8_MATMUL_EFFICIENCY,
    KERNEL_S_CUDA_GRAPHS,
    SEQUENCE_S,
    default_efficiency,
    estimate_expected,
)
from transformer_calc.estimators.inference.engines import (  # noqa: E402
    DEFAULT_FRONTEND,
    TRITON_REQUEST_S,
    TRITON_SEQUENCE_S,
    engine_defaults,
    frontend_costs,
)
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode_step, estimate_inference, prefill_step  # noqa: E402
from transformer_calc.sources.presets import gpu as gpu_by_name  # noqa: E402
from transformer_calc.sources.presets import preset_model, safe_load_yaml  # noqa: E402
from transformer_calc.estimators.inference.serving import ServingSpec, capacity, engine_serving, load_point, sequence_limit  # noqa: E402
from transformer_calc.estimators.inference.serving import trtllm_bench_batch_limits  # noqa: E402

DATA = Path(__file__).with_suffix(".yaml")
DOCS = REPO / "docs" / "validation.md"
BEGIN, END = "<!-- serving:begin -->", "<!-- serving:end -->"
REGENERATE = "PYTHONPATH=. python tools/validation/serving.py --write-docs"
THROUGHPUT_MEMORY = 0.95  # trtllm-bench's KV fraction of the free memory "in many cases" (perf-overview.md)
TOLERANCE = 0.25  # the aim: expected within ±25 % of at least 80 % of the rows


FIT_KERNEL = ("vllm-llama8b-tp1-h200", "vllm-llama70b-tp4-h200", "vllm-mixtral-tp2-h200", "nim-70b-5000-c1-tpot")
FIT_FP8 = ("nim-70b-5000-c1-ttft",)
FIT_SEQUENCE = tuple(f"trtllm-31-8b-h100-tp1-{s}" for s in (
    "128-128", "128-2048", "128-4096", "500-2000", "1000-1000", "1000-2000", "2048-128", "2048-2048", "5000-500",
    "20000-2000"))

# Triton's frontend costs (engines.TRITON_*): fitted on the Llama-3.1-8B H100 rows of the one source
# served through Triton, checked on its other rows
FIT_TRITON = tuple(f"trt014-8b-h100-tp1-{shape}-qps{q}-{metric}" for shape, rates in (
    ("467-256", (2, 4, 8, 16, 32)), ("467-16", (2, 4, 8, 16, 32)), ("202-214", (2, 4, 8, 16)))  # 202-214 at 32: overloaded
    for q in rates for metric in ("ttft", "tpot"))
FRONTEND_OF = {"trtllm-v014-serving": "triton"}  # the serving path each source states (else none)

# Sources measured with trtllm-bench and no batch limits given: its tuning heuristic sets them.
TRTLLM_BENCH = ("trtllm", "trtllm-v017", "trtllm-fp4", "trtllm-moe")
ENGINE_OF = {"trtllm": "trtllm", "trtllm-fp4": "trtllm", "trtllm-moe": "trtllm", "trtllm-v017": "trtllm", "trtllm-v014-serving": "trtllm", "trtllm-v06": "trtllm", "nim": "trtllm", "nemo": "trtllm",
             "vllm-ci": "vllm", "sglang-ep": "sglang"}


def row_serving(row: dict[str, Any], g: Any, **given: Any) -> ServingSpec:
    """The engine profile of the row's source (ENGINE_OF: NIM and NeMo run TensorRT-LLM) at its T,
    with the settings the source states; a prompt longer than the profile's step without chunked
    prefill is run with it (the only way the engine serves it; source_notes)."""
    serving = engine_serving(ENGINE_OF[row["source"]], g, row["T"], **given)
    if not serving.chunked_prefill and row["S"] >= serving.max_num_batched_tokens:
        serving = engine_serving(ENGINE_OF[row["source"]], g, row["T"], chunked_prefill=True, **given)
    return serving


def row_efficiency(row: dict[str, Any], g: Any, kernel_s: float | None, sequence_s: float | None,
                   frontend: tuple[float, float] | None) -> Any:
    """The expected-latency settings of the row's engine and frontend (FRONTEND_OF): the engine's
    CUDA-graph coverage of prompt steps, the frontend's request and per-sequence costs (`frontend`:
    (request_s, sequence_s) in place of the fitted ones, for the fit)."""
    name = ENGINE_OF[row["source"]]
    engine = engine_defaults(name, g.name, g.memory_bytes, row["T"])
    front = frontend_costs(FRONTEND_OF.get(row["source"], DEFAULT_FRONTEND), name)
    request_s, front_seq = (front.request_overhead_s, front.sequence_overhead_s) if frontend is None or \
        front.name == DEFAULT_FRONTEND else frontend
    seq = SEQUENCE_S if sequence_s is None else sequence_s
    return default_efficiency(g, kernel_s=kernel_s, sequence_s=seq + front_seq, request_s=request_s,
                              prefill_cuda_graphs=engine.prefill_cuda_graphs)


def evaluate(row: dict[str, Any], kernel_s: float | None = None, fp8: float | None = None,
             sequence_s: float | None = None, frontend: tuple[float, float] | None = None) -> dict[str, Any]:
    """bound and expected seconds for one row (constants overridable for the fit)."""
    m, g = preset_model(row["model"]), gpu_by_name(row["gpu"])
    eff = row_efficiency(row, g, kernel_s, sequence_s, frontend)
    if fp8 is not None:
        eff = dataclasses.replace(eff, matmul_fp8=fp8)
    S, N, T = row["S"], row["new_tokens"], row["T"]
    kw = {"weight_dtype": row["weight_dtype"], "tensor_parallel": T}
    if row.get("kv_dtype"):
        kw["kv_dtype"] = row["kv_dtype"]
    if row.get("compute_dtype"):  # the matmuls' dtype where the source states it (NVFP4 MoE: fp4 tensor cores)
        kw["compute_dtype"] = row["compute_dtype"]
    if row.get("redundant_experts"):  # expert slots beyond n_experts (SGLang --ep-num-redundant-experts)
        kw["redundant_experts"] = row["redundant_experts"]
    # wide EP as the source's commands run it: two-batch overlap, the dispatch's dtype
    eff = dataclasses.replace(eff, moe_a2a_overlap=bool(row.get("moe_a2a_overlap", False)),
                              dispatch_dtype=row.get("dispatch_dtype"))
    given = {"max_num_seqs": row["max_num_seqs"]} if row.get("max_num_seqs") else {}
    if row["kind"] == "latency":
        spec = InferenceSpec(batch_size=row["B"], prompt_len=S, new_tokens=N, **kw)
        bound = estimate_inference(m, g, spec).total_s
        expected = estimate_expected(m, g, spec, eff).total_s
    elif row["kind"] == "batch_throughput":  # a static batch: seconds per output token = total / (B·N_new)
        spec = InferenceSpec(batch_size=row["B"], prompt_len=S, new_tokens=N, **kw)
        tokens = row["B"] * N
        bound = estimate_inference(m, g, spec).total_s / tokens
        expected = estimate_expected(m, g, spec, eff).total_s / tokens
        measured = 1 / row["measured_tokens_per_s"]
        return {"bound_s": bound, "expected_s": expected, "error": measured / expected - 1,
                "bound_share": bound / measured}
    elif row["kind"] == "throughput":
        # Seconds per output token of the whole server (1 / tokens/s). Expected: serve's model at the
        # most sequences that fit, under the source's engine profile (`tcalc serve --engine trtllm`)
        # with the settings the source states (THROUGHPUT_MEMORY; chunked prefill for a prompt longer
        # than a step, source_notes). Bound: a decode step's roofline at the most sequences whose cache
        # fits beside the weights with no reserve at all, per sequence (throughput cannot beat it).
        # ep: the routed experts split over the row's GPUs (trtllm-bench --ep, source_notes), attention TP
        spec = InferenceSpec(batch_size=1, prompt_len=S, new_tokens=N, expert_parallel=row.get("ep", 1), **kw)
        limits: dict[str, Any] = {}
        if row["source"] in TRTLLM_BENCH:  # the batch limits trtllm-bench derives (engines.trtllm_bench_limits)
            bs, tokens = trtllm_bench_batch_limits(m, g, spec, S, N)
            limits = {"max_num_seqs": bs, "max_num_batched_tokens": tokens}
        serving = row_serving(row, g, memory_utilization=THROUGHPUT_MEMORY, **limits)
        cap = capacity(m, g, spec, serving)
        b = min(cap.max_concurrent_sequences, sequence_limit(serving, cap))
        point = load_point(m, g, spec, eff, serving, S, N, b)
        expected = 1 / point.output_tokens_per_s  # serve's tokens/s: C·O / E2E (Little's law)
        bare = capacity(m, g, spec, ServingSpec(memory_utilization=1.0, cuda_context_bytes=0, activation_peak_bytes=0,
                                                   engine_workspace_bytes=0, block_size=1))
        b_top = max(bare.max_concurrent_sequences, 1)
        bound = decode_step(m, g, dataclasses.replace(spec, batch_size=b_top), S + 1).seconds / b_top
        measured = 1 / row["measured_tokens_per_s"]
        return {"bound_s": bound, "expected_s": expected, "error": measured / expected - 1,
                "bound_share": bound / measured, "concurrency": b}
    elif row["kind"] == "rate":
        # An open-loop server at a request rate: `tcalc serve --request-rate` on one replica (the
        # smallest B whose throughput meets the rate); TTFT or TPOT at that B. Bound: the prompt's own
        # prefill (TTFT) or one decode step of the B sequences (TPOT), both rooflines.
        from transformer_calc.estimators.inference.serving import evaluate_layout

        spec = InferenceSpec(batch_size=1, prompt_len=S, new_tokens=N, **kw)
        x = evaluate_layout(m, g, spec, eff, row_serving(row, g), gpus=T, prompt_len=S, output_len=N, ttft_s=None,
                            tpot_s=None, request_rate=row["request_rate"])
        if x.point is None:
            raise ValueError(f"{row['id']}: {x.reason}")
        if row["metric"] == "ttft_s":
            bound, expected = prefill_step(m, g, spec).seconds, x.point.ttft_s
        else:
            busy = dataclasses.replace(spec, batch_size=x.point.concurrency)
            bound, expected = decode_step(m, g, busy, S + max(N // 2, 1)).seconds, x.point.tpot_s
    elif row["kind"] == "wide_ep_prefill":
        # Seconds per input token of one GPU: the prefill pool of `tcalc serve --disaggregate` (k
        # prompts per step, DP attention over ep GPUs). Bound: the same prefill step's roofline.
        from transformer_calc.estimators.inference.disaggregated import disaggregate

        ep = row["ep"]
        spec = InferenceSpec(batch_size=1, prompt_len=S, new_tokens=N, expert_parallel=ep, **kw)
        d = disaggregate(m, g, spec, eff, row_serving(row, g, **given), prefill_instances=1, decode_instances=1,
                         prompt_len=S, output_len=N)
        expected = max(T, ep) / (d.prefill_requests_per_s * S)
        step = prefill_step(m, g, dataclasses.replace(spec, batch_size=d.prefill_batch)).seconds
        bound = step / (d.prefill_batch * S * max(ep // T, 1) / max(T, ep))
        measured = 1 / row["measured_tokens_per_s"]
        return {"bound_s": bound, "expected_s": expected, "error": measured / expected - 1,
                "bound_share": bound / measured}
    elif row["kind"] == "wide_ep_decode":
        # Seconds per output token of one GPU (1 / its tokens/s). Expected: the decode pool of
        # `tcalc serve --disaggregate` (decode-only steps, DP attention over ep GPUs, B the most
        # that fit). Bound: the same decode step's roofline at that B (tokens/s cannot beat it).
        from transformer_calc.estimators.inference.disaggregated import disaggregate

        ep = row["ep"]
        spec = InferenceSpec(batch_size=1, prompt_len=S, new_tokens=N, expert_parallel=ep, **kw)
        d = disaggregate(m, g, spec, eff, row_serving(row, g, **given), prefill_instances=1, decode_instances=1,
                         prompt_len=S, output_len=N)
        per_gpu = d.decode_tokens_per_s / max(T, ep)
        expected = 1 / per_gpu
        busy = dataclasses.replace(spec, batch_size=d.decode_concurrency)
        step = decode_step(m, g, busy, S + max(N // 2, 1)).seconds
        bound = step / (d.decode_concurrency * max(ep // T, 1) / max(T, ep))
        measured = 1 / row["measured_tokens_per_s"]
        return {"bound_s": bound, "expected_s": expected, "error": measured / expected - 1,
                "bound_share": bound / measured, "concurrency": d.decode_concurrency}
    else:
        c = row["concurrency"]
        spec = InferenceSpec(batch_size=1, prompt_len=S, new_tokens=N, **kw)
        point = load_point(m, g, spec, eff, row_serving(row, g), S, N, c)
        if row["metric"] == "ttft_s":
            bound, expected = prefill_step(m, g, spec).seconds, point.ttft_s
        else:
            busy = dataclasses.replace(spec, batch_size=c)
            bound, expected = decode_step(m, g, busy, S + max(N // 2, 1)).seconds, point.tpot_s
    measured = row["measured_s"]
    return {"bound_s": bound, "expected_s": expected, "error": expected / measured - 1,
            "bound_share": bound / measured}


def _golden(loss: Any, lo: float, hi: float, steps: int = 50) -> float:
    """The minimum of a unimodal loss on [lo, hi] (golden-section search, a fixed number of steps)."""
    ratio = (5**0.5 - 1) / 2
    for _ in range(steps):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        lo, hi = (lo, b) if loss(a) < loss(b) else (a, hi)
    return (lo + hi) / 2


def fit(rows: list[dict[str, Any]]) -> tuple[float, float, float]:
    """The three fitted constants, each on its own rows, alternated twice (they barely interact:
    the kernel rows run 1-8 sequences, the sequence rows thousands): the per-kernel cost minimizing
    the squared log errors of FIT_KERNEL (golden section on [0, 50 µs]), the cost per sequence per
    step on FIT_SEQUENCE (golden section on [0, 50 µs]), the fp8 matmul efficiency making the
    FIT_FP8 row exact (bisection on [0.05, 1]). Every search is bounded."""
    import math

    by_id = {r["id"]: r for r in rows}
    k, fp8, seq = KERNEL_S_CUDA_GRAPHS, FP8_MATMUL_EFFICIENCY, SEQUENCE_S
    for _ in range(2):
        k = _golden(lambda x: sum(math.log1p(evaluate(by_id[i], kernel_s=x, fp8=fp8, sequence_s=seq)["error"]) ** 2
                                  for i in FIT_KERNEL), 0.0, 50e-6)
        seq = _golden(lambda x: sum(math.log1p(evaluate(by_id[i], kernel_s=k, fp8=fp8, sequence_s=x)["error"]) ** 2
                                    for i in FIT_SEQUENCE), 0.0, 50e-6)
        lo, hi = 0.05, 1.0  # expected TTFT falls as the efficiency rises
        for _ in range(50):
            mid = (lo + hi) / 2
            err = evaluate(by_id[FIT_FP8[0]], kernel_s=k, fp8=mid, sequence_s=seq)["error"]
            lo, hi = (mid, hi) if err > 0 else (lo, mid)
        fp8 = (lo + hi) / 2
    return k, fp8, seq


def fit_triton(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Triton's two frontend costs (engines.TRITON_REQUEST_S, TRITON_SEQUENCE_S) on FIT_TRITON, at the
    constants of `fit` as they stand: the per-sequence cost minimizing the squared log errors of the
    ITL rows, the per-request cost those of the TTFT rows (golden sections on [0, 500 µs] and
    [0, 50 ms]), alternated three times (the per-sequence cost lengthens the TTFT's steps too)."""
    import math

    chosen = [r for r in rows if r["id"] in FIT_TRITON and not r.get("excluded")]
    tpot = [r for r in chosen if r["metric"] == "tpot_s"]
    ttft = [r for r in chosen if r["metric"] == "ttft_s"]
    req, seq = TRITON_REQUEST_S, TRITON_SEQUENCE_S
    for _ in range(3):
        seq = _golden(lambda x: sum(math.log1p(evaluate(r, frontend=(req, x))["error"]) ** 2 for r in tpot), 0.0, 500e-6)
        req = _golden(lambda x: sum(math.log1p(evaluate(r, frontend=(x, seq))["error"]) ** 2 for r in ttft), 0.0, 50e-3)
    return req, seq


def _ms(s: float) -> str:
    return f"{1e3 * s:,.1f} ms"


def _measured(row: dict[str, Any], seconds: float) -> str:
    """A time as ms, or for a throughput row the tokens/s it stands for."""
    return f"{1 / seconds:,.0f} tok/s" if row["kind"] in ("throughput", "batch_throughput", "wide_ep_decode",
                                                               "wide_ep_prefill") else _ms(seconds)


def _setup(row: dict[str, Any]) -> str:
    if row["kind"] == "wide_ep_prefill":
        what = f"wide-EP prefill, ep {row['ep']}, DP attention, input tokens/s per GPU"
    elif row["kind"] == "rate":
        what = f"{row['request_rate']:g} requests/s, {row['metric'][:-2].upper()}"
    elif row["kind"] == "wide_ep_decode":
        what = f"wide-EP decode, ep {row['ep']}, DP attention, output tokens/s per GPU"
    elif row["kind"] == "throughput":
        what = "max output throughput"
    elif row["kind"] == "batch_throughput":
        what = f"B={row['B']}, output tokens/s"
    else:
        what = (f"B={row['B']}" if row["kind"] == "latency" else f"{row['concurrency']} in flight, {row['metric'][:-2].upper()}")
    kv = f", KV {row['kv_dtype']}" if row.get("kv_dtype") else ""
    return (f"{row['model']}, {row['T']}× {row['gpu']}, {row['weight_dtype']}{kv}; S={row['S']} → {row['new_tokens']} "
            f"tokens; {what}")


def role(row: dict[str, Any]) -> str:
    if row.get("excluded"):
        return "excluded"
    return "fitted" if row["id"] in FIT_KERNEL + FIT_FP8 + FIT_SEQUENCE + FIT_TRITON else "checked"


GENERATIONS = (("a100", "Ampere"), ("h1", "Hopper"), ("h2", "Hopper"), ("b", "Blackwell"), ("gb", "Blackwell"))
THROUGHPUT_KINDS = ("throughput", "batch_throughput", "wide_ep_decode", "wide_ep_prefill")
ACCEPT_MEDIAN, ACCEPT_WITHIN = 0.12, 0.80  # the acceptance per source, GPU generation and metric


def generation(row: dict[str, Any]) -> str:
    """The row's GPU generation (GENERATIONS: by the GPU's name)."""
    return next(name for prefix, name in GENERATIONS if row["gpu"].startswith(prefix))


def metric(row: dict[str, Any]) -> str:
    """What the row measures: throughput (tokens/s), TTFT (a server's, or a fixed batch's first token
    alone), TPOT (inter-token latency) or latency (a fixed batch end to end: prefill + decode)."""
    if row["kind"] in THROUGHPUT_KINDS:
        return "throughput"
    if row["kind"] == "latency":
        return "TTFT" if row["new_tokens"] == 1 else "latency"
    return "TTFT" if row["metric"] == "ttft_s" else "TPOT"


def split_table(kept: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    """One line per source, GPU generation and metric: rows (of them fitted), within ±25 %, median
    |error|, and whether the issue's acceptance (median <= 12 %, >= 80 % within) holds."""
    cells: dict[tuple[str, str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for r, x in kept:
        cells.setdefault((r["source"], generation(r), metric(r)), []).append((r, x))
    lines = ["| source | GPU generation | metric | rows (fitted) | within ±25 % | median \\|error\\| | acceptance |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    met = 0
    for (src, gen, what), xs in sorted(cells.items()):
        errors = [abs(x["error"]) for _, x in xs]
        ok = sum(e <= TOLERANCE for e in errors)
        fitted = sum(role(r) == "fitted" for r, _ in xs)
        median = statistics.median(errors)
        meets = median <= ACCEPT_MEDIAN and ok >= ACCEPT_WITHIN * len(xs)
        met += meets
        lines.append(f"| {src} | {gen} | {what} | {len(xs)} ({fitted}) | {ok} ({ok / len(xs):.0%}) | {median:.0%} | "
                     f"{'met' if meets else 'not met'} |")
    return [f"By source, GPU generation and metric (throughput, TPOT and TTFT apart; the issue's acceptance: median "
            f"|error| <= {ACCEPT_MEDIAN:.0%} and >= {ACCEPT_WITHIN:.0%} within ±{TOLERANCE:.0%}), fitted rows included "
            f"and counted: met in {met} of {len(cells)} cells.", "", *lines]


def report(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rows = data["rows"]
    results = [(row, evaluate(row)) for row in rows]
    kept = [(r, x) for r, x in results if role(r) != "excluded"]
    checked = [(r, x) for r, x in results if role(r) == "checked"]
    within = [r for r, x in checked if abs(x["error"]) <= TOLERANCE]
    bound_ok = [r for r, x in kept if x["bound_share"] <= 1]
    thr = [x for r, x in kept if r["kind"] == "throughput"]
    thr_by_source: dict[str, list[dict[str, Any]]] = {}
    for r, x in kept:
        if r["kind"] == "throughput":
            thr_by_source.setdefault(r["source"], []).append(x)
    thr_within = sum(abs(x["error"]) <= TOLERANCE for x in thr)
    nim = [x for r, x in kept if r["source"] == "nim"]
    nim_within = sum(abs(x["error"]) <= TOLERANCE for x in nim)
    lines = [
        "## Inference serving: tcalc vs published measurements",
        "",
        f"Generated by `tools/validation/serving.py` from `tools/validation/serving.yaml` (no network access; "
        f"regenerate with `{REGENERATE}`). {len(results)} published measurements, {len(results) - len(kept)} "
        f"excluded, the reason in the row (a measurement below the roofline of its stated setup, or a unit the "
        f"source leaves ambiguous). The roofline "
        f"bound is below {len(bound_ok)} of the {len(kept)} others. Five constants are "
        f"FITTED on {len(kept) - len(checked)} rows (marked *fitted*: the per-kernel cost with CUDA graphs, "
        f"{1e6 * KERNEL_S_CUDA_GRAPHS:g} µs, on {len(FIT_KERNEL)} decode-dominated runs; the fp8 matmul efficiency, "
        f"{FP8_MATMUL_EFFICIENCY:g}, on one TTFT; the cost per sequence per step, {1e6 * SEQUENCE_S:g} µs, on "
        f"TensorRT-LLM's {len(FIT_SEQUENCE)} Llama-3.1-8B H100 throughputs; Triton's frontend costs (`--frontend "
        f"triton`), {1e3 * TRITON_REQUEST_S:g} ms per request and {1e6 * TRITON_SEQUENCE_S:g} µs per sequence per "
        f"step, on the {len(FIT_TRITON)} Llama-3.1-8B H100 rows of TensorRT-LLM v0.14's online table); on the "
        f"{len(checked)} rows they were "
        f"not fitted on, the expected "
        f"time is within ±{TOLERANCE:.0%} of {len(within)} ({len(within) / len(checked):.0%}; the issue's aim is "
        f"80 %, {'met' if len(within) >= 0.8 * len(checked) else 'not met'}), median |error| "
        f"{statistics.median(abs(x['error']) for _, x in checked):.0%}. "
        f"Every row runs under its source's engine profile (`--engine`, `transformer_calc/estimators/inference/"
        f"engines.py`: TensorRT-LLM for trtllm, trtllm-v017, trtllm-v014-serving, trtllm-v06, NIM and NeMo; vLLM for vllm-ci; "
        f"SGLang for sglang-ep). "
        f"TensorRT-LLM's "
        f"maximum-throughput rows with `--engine trtllm` and the batch limits trtllm-bench derives (`engines.trtllm_bench_limits`; the issue's target: 85 % within ±{TOLERANCE:.0%}, median "
        f"12 %): " + "; ".join(
            f"{src} {sum(abs(x['error']) <= TOLERANCE for x in xs)} of {len(xs)} "
            f"({sum(abs(x['error']) <= TOLERANCE for x in xs) / len(xs):.0%}), median "
            f"{statistics.median(abs(x['error']) for x in xs):.0%}" for src, xs in thr_by_source.items())
        + f"; all {thr_within} of {len(thr)} ({thr_within / len(thr):.0%}), median "
        f"{statistics.median(abs(x['error']) for x in thr):.0%}. NIM's concurrency sweep (TTFT and ITL "
        f"at 1-50 in flight): {nim_within} of {len(nim)} within ±{TOLERANCE:.0%} (target 80 %).",
        "",
        "**Bound:** `tcalc inference`'s roofline (`total_s` for a fixed batch; for a server, the prompt's own "
        "prefill as the TTFT bound and one decode step of every sequence in flight as the TPOT bound). "
        "**Expected:** `expected_s`, the same FLOPs and bytes at achievable rates, one roofline per kernel class "
        "summed (the linear layers, the context attention, the decode attention: kernels that run one after "
        "another), plus kernel launches, collectives and sampling (`docs/formulas.md` §4); for a server, `tcalc serve`'s continuous-batching "
        "model at B = the concurrency; for a throughput row (TensorRT-LLM's maximum output tokens/s), serve's "
        "model at the most sequences that fit (the bound: a decode step's roofline at the most sequences whose "
        "cache fits beside the bare weights, an upper bound of tokens/s). Error = expected / measured − 1 for "
        "times, expected tokens/s / measured − 1 for throughputs (positive: tcalc optimistic).",
        "",
        "Issue 37 (serving): two mechanisms of the serving path. (a) TensorRT-LLM captures CUDA graphs for "
        "decode-only batches (TorchLlmArgs `cuda_graph_config`: graphs 'are enabled for batches that consist of "
        "decoding requests only'; its TensorRT engines' graph mode covers the generation phase), so a step holding "
        "prompt tokens launches every kernel from the CPU: 8 µs more per kernel (`KERNEL_S_EAGER`'s assumption; "
        "`expected.prompt_efficiency`), about 2.7 ms on a 32-layer model's prefill, 6.4 ms on an 80-layer one. "
        "Nothing is fitted for it: TensorRT-LLM v0.5's first-token latencies go from 20 to 27 of 29 trtllm-v06 "
        "rows within ±25 % (median 12 % -> 7 %), v0.14's TTFT from 6 to 26 of 53 (median 37 % -> 26 %); refitting "
        "the kernel cost and the fp8 efficiency on their own rows after it moves them from 7.98 µs and 0.498 to "
        "8.01 µs and 0.506. (b) The frontend (`--frontend`): the published serving rows of TensorRT-LLM v0.14 "
        "ran behind Triton's TensorRT-LLM backend (its `inflight_batcher_llm` ensemble: Python tokenizer and "
        "detokenizer models, gRPC, one streamed response per sequence and step); `--frontend triton` prices "
        "that path as a cost per request in the TTFT and a cost per sequence per step, both FITTED on the 28 "
        "kept Llama-3.1-8B H100 rows of that source and checked on its 78 others (Llama-3.1-8B on H200, "
        "Llama-3.1-70B TP4 on H100 and H200): on those the TTFT goes from 6 to 35 of 39 within ±25 % (median "
        "36 % -> 7 %), the ITL from 27 to 32 of 39 (median 12.5 % -> 8 %). No other source states a Triton "
        "frontend: trtllm-bench, gptSessionBenchmark and vLLM's latency CI feed token ids (`none`), NIM's TTFT "
        "at one request in flight stays within +10 % with none (its 500-token prompt: −2.9 % -> +9.5 % with "
        "(a)). Before issue 37's serving work the checked rows were 266 of 353 within ±25 % (75 %), median "
        "10 %; trtllm-v014-serving 46 of 106 (median 29 %), trtllm-v06 20 of 29, nemo 8 of 16 (median 25 %).",
        "",
        "One roofline per kernel class (issue 25, round 4): with one max(compute, memory) per step, the "
        "three TensorRT-LLM max-throughput sources were 162 of 197 within ±25 %, median 11 % (trtllm 51 of 60, "
        "9 %; trtllm-fp4 31 of 40, 14 %; trtllm-v017 80 of 97, 10 %), and 247 of the 353 checked rows, median "
        "15 %. A step's GEMMs, context attention and decode attention are separate kernels (TensorRT-LLM: "
        "FMHA for the context, masked MHA / XQA for the generation), so a large batch's compute-bound GEMMs do "
        "not hide its attention's cache reads; summing the classes' rooflines (LLM-Viewer's per-operator "
        "roofline, arXiv:2402.16363) and refitting the three constants on their own rows (per-kernel cost "
        "7.8 -> 7.98 µs, fp8 efficiency 0.51 -> 0.512, cost per sequence per step 10.9 µs -> 0: it stood for "
        "that hidden attention, and its fit's minimum now lies at the end of its range) gives the figures "
        "above. "
        "trtllm-bench's datasets are finite (perf-overview.md, 'Preparing a Dataset': 30,000 requests at "
        "128/128, 3,000 at 128/2048, 2048/128, 500/2000 and 1000/1000, 1,500 at 128/4096, 1000/2000, 2048/2048 "
        "and 5000/500, 1,000 at 20000/2000, all queued at once): the ramp-up and the drain tail lower the "
        "measured rate below the steady state by a median of about 1 % (a linear drain of the last B requests "
        "over O steps), up to 5-11 % where the dataset is one or two batches of the engine (Llama-3.1-70B TP8 "
        "on H200 at 128-token prompts: 1,421 sequences in flight for 1,500 requests). Costed in closed form "
        "as waves of B requests, the last of N mod B, it does not improve the agreement (195 of 197 either "
        "way, median 5.0 % -> 5.2 %), so it is not modelled. "
        "Where it misses: (1) the TTFT of a loaded server (NIM at 5-50 requests in flight) grows as prompts "
        "queue for the prefill; `tcalc serve` models that queue as M/D/1 (it lands within ±19 % there); its "
        "TPOT at 25 in flight is 15 % short (24 % with one roofline per step), which is consistent with "
        "prompts prefilled whole in steps that stall the decodes. "
        "(2) NeMo's per-request latencies (its deploy path: PyTriton in front of TensorRT-LLM's Python "
        "runner, not Triton's ensemble): tcalc is 7-41 % short of them, by 11-48 ms at batch 1 and 34-81 ms "
        "at batch 8, the Ampere rows two to three times the Hopper ones at the same T. An offset that grows with the batch and the host "
        "is not one cost per request; no frontend profile is applied to it and nothing is fitted (9 of 16 "
        "within ±25 %). "
        "(3) TensorRT-LLM's maximum throughput of Llama-3.1-8B: all 20 rows within ±8 % (with one roofline "
        "per step the H200 rows with long prompts or outputs were up to +46 % optimistic: at hundreds of "
        "sequences the GEMMs are compute-bound while the attention reads the cache, and the one max() hid "
        "the second kernel under the first). The 70B and 405B rows land within a median of a few percent. (4) TensorRT-LLM "
        "v0.5/v0.6 (2023): first-token latencies of 128-token prompts were 30-40 % above tcalc; the context "
        "phase's CPU launches (a) leave −6 to −22 % (the A100 rows' median 19 %), and Llama-2-70B's long-output static batches run at half "
        "tcalc's rate or less, consistent with that release's decode attention reading the grouped K/V once per "
        "query head (tcalc reads it once per K/V head, as GQA kernels since do). (6) TensorRT-LLM v0.17 "
        "(TensorRT engines): Llama-3.1-70B on one H100 (fp8 weights fill 71 of 80 GB) runs up to 1.3x tcalc's "
        "rate (−25 %; it was 2x under the llm_args defaults of 2048 sequences and 8192 tokens, whose reserves "
        "left the cache too little: trtllm-bench's heuristic builds 64 sequences and 2048 tokens there). These "
        "rows are ill-conditioned: the cache is the difference of two large numbers, and with the memory "
        "nvidia-smi reports (81,559 MiB, not the 80 GB tcalc's H100 holds) the same rows are −4 to +56 % "
        "optimistic. Llama-3.1-70B on one H200 at 500/2000 and 20000/2000 stays +22 % optimistic (was +46 % "
        "and +62 %). (7) "
        "TensorRT-LLM v0.14 behind Triton at 2-32 requests/s, with (a) and (b): what stays outside ±25 % is "
        "Llama-3.1-70B at 16-32 requests/s (TTFT and ITL 32-84 % short at 467/16: the page's 32 requests/s "
        "run shows a 1.2 s TTFT, a queue that grew during the 500 requests, which a steady state does not "
        "hold; ITL +32-35 % long at 467/256 and 16 requests/s, where tcalc puts the replica near its "
        "saturation) and Llama-3.1-8B at 32 requests/s on H200 (ITL −26 %). The page prints whole "
        "milliseconds: an ITL of 5-10 ms carries up to ±10 % of rounding. "
        "(5) Wide EP with DP attention (SGLang's DeepSeek-V3, "
        "experts over 32-72 GPUs, not fitted), run as the SGLang team's commands state (ai-dynamo/dynamo "
        "worker_setup.py, sglang issues 6017 and 10903): 32 redundant experts (EP72 and EP48 of 288 slots), "
        "the per-GPU batch of --cuda-graph-bs / SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK (256 on H100, "
        "768 on GB200, 1024 with NVFP4), fp8 dispatch (DeepEP), two-batch overlap where the command turns it "
        "on (H100). The H100 prefill pool moves from −55 % to about −22 % (the all-to-alls over the 50 GB/s "
        "NIC now run in fp8 and under the other micro-batch's compute). The decode pools come out "
        "optimistic at the stated batch. Their MLA decode attention now runs absorbed (DeepSeek-V2 sec. "
        "2.1.2; FlashMLA's decode kernel, K 576 and V 512 per head: 2·A·(2·r_kv + d_rope) FLOPs per cached "
        "token, 3.4x the h_d + d_v that tcalc counted before, roofline.roofline_step): GB200 +103 % -> +77 %, "
        "+69 % -> +48 % (BF16 attention), NVFP4 +55 % -> +15 % (with the fp4 GEMM rate of (8)), H100 +46 %; "
        "with the kernel classes and the cost per sequence refitted to 0 (it added 256-1024 × 10.9 µs = "
        "2.8-11 ms to each of these steps) they are +88 %, +57 %, +38 % and +53 %. H100: its step is the all-to-alls over the 50 GB/s NIC, the roofline under them (two-batch "
        "overlap), so a longer roofline does not lengthen it (its measurement also had simulated MTP, "
        "which would make the gap larger). FlashMLA's published dense decode rates (github:deepseek-ai/FlashMLA "
        "README: up to 3000 GB/s memory-bound, 660 TFLOPS compute-bound on H800 SXM5) are 0.90 of HBM, "
        "tcalc's memory efficiency, and 0.67 of the bf16 peak against tcalc's 0.80 MAMF: not applied (an "
        "Hopper kernel; SGLang's GB200 runs use other MLA kernels). The grouped GEMMs at 256-1024 tokens "
        "per expert run at 0.41-0.66 of the 1,979 TFLOPS fp8 peak in DeepGEMM's README tables "
        "(github:deepseek-ai/DeepGEMM README.md, H800: masked layout 815-1,233 TFLOPS at 256-1,024 tokens "
        "per expert, contiguous 1,093-1,297), close to tcalc's 0.51, so they do not explain the rest; the "
        "GB200 part-1 post says its kernels did not yet saturate bandwidth or compute. The H100 all-to-alls are "
        "not the gap either: tcalc's 53 ms per step (58 MoE layers, 256 tokens, fp8 dispatch, bf16 combine, "
        "50 GB/s NIC at the network model's rate) is 0.46 ms per 128 tokens and layer, 7 % below DeepEP's "
        "published low-latency dispatch + combine on H800 with CX7 400 Gb/s at 128 tokens, top-8 (EP64 "
        "173 + 314 us, EP128 192 + 369 us: github:deepseek-ai/DeepEP README); what the measurement leaves "
        "is consistent with the two micro-batches overlapping far less than tcalc's max(roofline, "
        "all-to-all) (with no overlap tcalc's step would be 91 ms against the measured 92), which no "
        "source quantifies; not fitted. GB200 prefill "
        "+29 % and +9 %. Reported as is, nothing fitted. (8) TensorRT-LLM's NVFP4 rows (Llama 3.3 70B and 3.1 "
        "405B on B200 and GB200): with the fp4 GEMMs at the fp8 efficiency (0.51 of a peak twice as high) "
        "tcalc was 4-81 % optimistic (9 of 40 within ±25 %, median 34 %). The fp4 GEMMs now run at "
        "expected.FP4_MATMUL_EFFICIENCY, 0.338 of the fp4 peak, MEASURED on B200 (vLLM's CUTLASS NVFP4 GEMM "
        "with its activation quantization, 3,039 of 9,000 TFLOP/s: github.com/vllm-project/vllm/pull/20646), "
        "not fitted on these rows: 31 of 40 within ±25 %, median 14 %; the GB200 NVFP4 wide-EP rows of "
        "sglang-ep move from +55 % to +35 % (decode; +15 % with (5)'s absorbed MLA decode) and +38 % to +9 % "
        "(prefill). The 9 rows still optimistic by 42-81 % (Llama 3.3 70B on one GPU at 2000-20000 tokens of "
        "context) were steps whose GEMMs are compute-bound at fp4 while the attention reads the fp8 cache: "
        "with one roofline per kernel class all 40 are within ±18 %, median 6 %. " + MOE_ROWS_NOTE,
        "",
        "| source | setup | role | measured | bound (share) | expected | error |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row, x in results:
        src = data["sources"][row["source"]].split(",")[0]
        why = f": {row['excluded']}" if row.get("excluded") else ""
        measured = row.get("measured_s") or 1 / row["measured_tokens_per_s"]
        lines.append(f"| {src}: {row['row']} | {_setup(row)} | {role(row)}{why} | {_measured(row, measured)} | "
                     f"{_measured(row, x['bound_s'])} ({x['bound_share']:.2f}) | {_measured(row, x['expected_s'])} | "
                     f"{x['error']:+.1%} |")
    lines += ["", "| group | rows | within ±25 % | median \\|error\\| | bound below measured |", "| --- | --- | --- | --- | --- |"]
    groups: dict[str, list] = {}
    for row, x in kept:
        groups.setdefault(f"{row['source']} ({role(row)})", []).append(x)
    for name, xs in [("checked (not fitted)", [x for _, x in checked]), ("fitted", [x for r, x in kept if role(r) == "fitted"]),
                     *sorted(groups.items())]:
        ok = sum(abs(x["error"]) <= TOLERANCE for x in xs)
        lines.append(f"| {name} | {len(xs)} | {ok} | {statistics.median(abs(x['error']) for x in xs):.0%} | "
                     f"{sum(x['bound_share'] <= 1 for x in xs)} |")
    lines += ["", *split_table(kept)]
    lines += ["", "Sources and what each leaves open:", ""]
    for key, text in data["sources"].items():
        lines.append(f"- **{key}**: {text}. {data.get('source_notes', {}).get(key, '')}")
    summary = {"rows": len(kept), "checked": len(checked), "within": len(within), "bound_below": len(bound_ok)}
    return "\n".join(lines) + "\n", summary


# issue 37: what the MoE rows of perf-overview.md show (trtllm-moe); nothing is fitted on them
MOE_ROWS_NOTE = (
    "(9) MoE maximum throughput (trtllm-moe, issue 37): the 110 MoE cells of the same page (Llama 4 Scout and "
    "Maverick, Qwen3-30B-A3B, Qwen3-235B-A22B; FP8 on Hopper, NVFP4 on Blackwell) priced exactly as the trtllm and "
    "trtllm-fp4 rows, with ep = T; nothing fitted: 40 of 110 within ±25 %, median |error| 37 %, signed median "
    "+35 % (tcalc optimistic), the roofline below all 110. The sign follows the layout, not the model family: "
    "one-GPU Blackwell rows are optimistic (Qwen3-30B-A3B median +81 % on B200, +118 % on GB200, up to +425 % at "
    "128/128; Llama 4 Scout +49 % B200, +50 % GB200), and so are the H100 rows (Scout TP4 +78 %, Maverick TP8 "
    "+88 %), while the TP8 rows on B200 and H200 are near or pessimistic (Qwen3-235B-A22B -21 % B200, -21 % H200, "
    "-21 % H100; Maverick -16 % B200, +12 % H200; Scout H200 TP4 +23 %). A MoE decode cost that only adds time "
    "(routing, permutation, grouped GEMMs at few tokens per expert, EP imbalance) would move the TP8 rows further "
    "off, so none is added without a source that sizes it per layout. Checked: (a) ep is not the cause: ep = 1 "
    "(TensorRT-LLM's Mapping default, MoE tensor-parallel) gives the same 40 within, median 39 %; (b) the routed "
    "experts' weight reads are not: at the batches these rows run (tcalc's B 64-4,096 sequences, B·k >= 64 "
    "assignments per layer against 16-128 experts) every expert is read under the bound min(n, B·k) and under "
    "the expected n·(1-(1-k/n)^B) alike; tcalc now prices the expectation (memory.weights_read_bytes, issue 37), "
    "which moves these rows only through the refit constants (at most 3 points; the figures of (a), (d) and (e) "
    "are at the constants before it), and the one small-batch MoE row, Mixtral at B = 8 (7.20 of 8 experts "
    "read), a fitted one: +0.9 -> -5.2 %; (c) the page is not monotone in the hardware: GB200 is below B200 on 7 "
    "of 10 Qwen3-30B-A3B shapes (24,107 against 39,827 tokens/s at 128/128) and on Scout 1000/1000 (7,738 "
    "against 10,591) though the GB200 part has the B200's bandwidth, 11 % higher peaks and more memory, "
    "so no model holds ±25 % on "
    "both columns; (d) H100 against H200 (FP8, same TP): measured 0.27 (Maverick 128/2048, 10,829 / 40,572) and "
    "0.44 (Scout, 15,130 / 34,316) where tcalc gives 0.46 and 0.77; the page falls back 'to 0.90 or lower if "
    "out-of-memory errors are encountered' without saying for which rows, and its MoE options set "
    "enable_attention_dp, which this path does not model (attention stays tensor-parallel); (e) the size of the "
    "gap against tcalc's decode step at tcalc's own B (1000/1000, the step at a 1,500-token context): the "
    "measured tokens/s imply 63.1 ms per step for Qwen3-30B-A3B on B200 (B 1,630; tcalc 25.8 ms, of which "
    "4.1 ms compute), 56.7 ms for Scout on B200 (B 601; tcalc 26.5, compute 6.8) and 123.9 ms for Maverick on "
    "H100 (B 1,199; tcalc 48.6, compute 5.1): for MoE kernels to hold the difference they would take 4.5-15 "
    "times the step's whole compute time. These steps route 102, 38 and 9 tokens to each expert (B·k/n), "
    "where an expert's GEMM is near the weight-read time tcalc already charges; DeepGEMM's published grouped "
    "GEMMs run at 0.41-0.66 of peak at 256-1,024 tokens per expert ((7)) and no published rate at fewer was "
    "found to size a slow-down. So the MoE decode mechanisms do not close these rows, and the gap is "
    "more likely in the concurrency the engine reaches (its CUDA graphs up to batch 8,192 and the MoE "
    "workspace are not in tcalc's memory model): not verified, not fitted. The expected expert reads (issue 37, "
    "memory.expected_experts_touched) and the refit that follows them (per-kernel cost 8.01 -> 8.29 µs, fp8 "
    "efficiency 0.506 -> 0.507, Triton 5.67 -> 5.55 ms and 15.3 -> 14.9 µs): the checked rows 335 -> 337 of 435 "
    "within ±25 %, median 10 -> 9 %; the fitted vLLM CI rows median 1 -> 4 % (Mixtral B = 8 +0.9 -> -5.2 %, "
    "Llama-3.1-8B -5.7 -> -4.3 %, Llama-3-70B +0.8 -> +2.2 %): uniform routing is itself an upper estimate of "
    "the experts read, and a skewed router reads fewer.")


def write_docs(section: str) -> None:
    from tools.docsection import write_section

    write_section(DOCS, BEGIN, END, f"{BEGIN}\n{section}{END}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--fit", action="store_true", help="print the fitted constants and exit")
    args = parser.parse_args(argv)
    data = safe_load_yaml(DATA.read_text(), str(DATA))
    if args.fit:
        k, f8, seq = fit(data["rows"])
        print(f"KERNEL_S_CUDA_GRAPHS = {k:.3g}  (fitted on {', '.join(FIT_KERNEL)})")
        print(f"FP8_MATMUL_EFFICIENCY = {f8:.3g}  (fitted on {', '.join(FIT_FP8)})")
        print(f"SEQUENCE_S = {seq:.3g}  (fitted on {', '.join(FIT_SEQUENCE)})")
        req, tseq = fit_triton(data["rows"])
        print(f"TRITON_REQUEST_S = {req:.3g}, TRITON_SEQUENCE_S = {tseq:.3g}  (fitted on {len(FIT_TRITON)} rows: "
              f"{FIT_TRITON[0]} ...)")
        return 0
    section, summary = report(data)
    if args.write_docs:
        write_docs(section)
    if args.verbose or not args.write_docs:
        print(section)
    print(f"{summary['rows']} rows kept; bound below {summary['bound_below']}; expected within ±25 % of "
          f"{summary['within']} of the {summary['checked']} checked rows", file=sys.stderr)
    return 0 if summary["bound_below"] == summary["rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
