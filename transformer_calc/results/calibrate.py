"""`tcalc calibrate RUNS_FILE...` (issue 37): the profile's free constants fitted to the user's
measured runs (estimators/calibrate.py), and the calibrated profile every time command takes
(`--profile FILE`, the job file's `profile:` key): its section of their results and how it scales
their times."""

from __future__ import annotations

from typing import Any

from transformer_calc.errors import TcalcError
from transformer_calc.results.base import Result, Section

PROFILE_VERSION = 1
# Keys a training run may hold besides the layout's (descriptive: read, not priced)
DESCRIPTIVE = ("id", "source", "setup_source", "framework_name", "notes", "where", "kind", "log_kind", "log_steps")
TRAIN_KEYS = ("model", "model_overrides", "gpu", "gpus", "seq_len", "global_batch", "micro_batch", "tensor", "pipeline",
              "virtual_stages", "context", "expert", "expert_tensor", "sequence_parallel", "recompute", "flash", "zero",
              "precision", "fp8_recipe", "framework", "compile", "grad_bytes", "overlap_grad_reduce", "tp_comm_overlap",
              "moe_a2a_overlap", "first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split",
              "cp_comm_type", "measured")  # fmt: skip
SERVE_KEYS = ("model", "gpu", "tensor", "engine", "prompt_len", "output_len", "concurrency", "weight_dtype", "kv_dtype",
              "measured")


# ---------------------------------------------------------------------------- the result
class CalibratedRun(Section):
    id: str
    kind: str  # train | serve
    gpu: str
    framework: str  # the time profile (training) or the engine (serving)
    dtype: str  # the GEMM dtype (training) or the weights' (serving)
    metric: str  # what was measured: step_time_s, ttft_s, tpot_s, output_tokens_per_s
    measured: float  # in the metric's unit (a throughput is converted to a step time for training)
    predicted_default: float  # the default profile's value
    predicted_calibrated: float
    error_default: float  # measured time / predicted time − 1
    error_calibrated: float
    error_left_out: float  # predicted by the fit on every other run


class FittedConstant(Section):
    name: str
    value: float
    default: float  # the default profile's value (a GEMM efficiency: the first run's of that dtype)
    uncertainty: float  # jackknife (leave-one-out) standard error
    lower: float
    upper: float


class FittedOn(Section):
    runs: int
    files: list[str]
    gpus: list[str]
    frameworks: list[str]
    dtypes: list[str]
    kinds: list[str]


class Profile(Section):
    """What the profile file holds (`--profile FILE` reads it back)."""

    tcalc_profile: int
    fitted_on: FittedOn
    constants: dict[str, float]
    uncertainty: dict[str, float]
    median_abs_error_default: float
    median_abs_error_calibrated: float
    median_abs_error_left_out: float


class CalibrateResult(Result):
    runs: list[CalibratedRun]
    constants: list[FittedConstant]
    median_abs_error_default: float
    median_abs_error_calibrated: float
    median_abs_error_left_out: float
    profile: Profile
    profile_file: str | None = None  # where --output wrote it


class Calibration(Section):
    """The calibration section of a time command's result (`--profile FILE`): what was fitted, on
    what, and how far its leave-one-out predictions were off."""

    profile_file: str
    fitted_on: FittedOn
    constants: dict[str, float]  # the constants that apply to this answer
    median_abs_error_left_out: float
    matches: bool  # this answer's GPU, framework and dtype are among the fitted runs'
    step_overhead_s: float = 0.0  # added to the step time (training)


class ValidationError(Section):
    """An uncalibrated training answer's uncertainty: the built-in profile's error on the published
    runs of its time profile, GPU generation and dense/MoE (estimators/training/validation_errors.py)."""

    framework: str
    generation: str  # Ampere, Hopper, Blackwell
    kind: str  # dense | MoE
    runs: int
    median_abs_error: float  # measured step time / tcalc's − 1, in absolute value
    within_25pct: float  # share of those runs within ±25 %


# ---------------------------------------------------------------------------- pricing a run
MAX_COUNT = 10**9  # a run's counts (GPUs, tokens, batch, parallel sizes) above this are refused
WHOLE_KEYS = ("gpus", "seq_len", "global_batch", "micro_batch", "tensor", "pipeline", "virtual_stages", "context",
              "expert", "expert_tensor", "zero", "first_stage_layers", "last_stage_layers", "prompt_len", "output_len",
              "concurrency", "grad_bytes")
SWITCH_KEYS = ("sequence_parallel", "flash", "compile", "overlap_grad_reduce", "tp_comm_overlap", "moe_a2a_overlap",
               "embedding_in_split", "loss_in_split")


def _check_types(run: dict[str, Any]) -> None:
    """A run's counts are whole numbers (never a boolean) and its switches booleans: one Error naming
    the run and the key otherwise (no silent `int(True)`)."""
    where = run["where"]
    for key in WHOLE_KEYS:
        v = run.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT):
            raise TcalcError(f"{where}: {key} is {str(v)[:40]!r}; give a whole number from 0 to {MAX_COUNT:,}")
    for key in SWITCH_KEYS:
        v = run.get(key)
        if v is not None and not isinstance(v, bool):
            raise TcalcError(f"{where}: {key} is {str(v)[:40]!r}; give true or false")


def _gemm_dtype(tr: Any) -> str:
    if tr.precision.value == "fp32":
        return "fp32"
    if tr.fp8_recipe.value == "nvfp4":
        return "fp4"
    return "fp8" if tr.fp8_recipe.value != "none" or tr.p == 1 else "bf16"


def step_terms(est: Any, tr: Any) -> Any:
    """A StepEstimate split by what each free constant scales (estimators/calibrate.py)."""
    from transformer_calc.estimators.calibrate import StepTerms

    return StepTerms(
        gemm_s=est.compute_s,
        fixed_s=est.memory_bound_s + est.optimizer_s + est.offload_pcie_s + est.moe_overhead_s,
        comm_s=est.tp_comm_s + est.dp_exposed_s + est.pp_comm_s + est.moe_all_to_all_s + est.cp_comm_s,
        bubble_s=est.pp_bubble_s, dtype=_gemm_dtype(tr),
        default_gemm_efficiency=float(est.assumptions["matmul_efficiency"]))


def _train_run(run: dict[str, Any]) -> tuple[Any, float, dict[str, str]]:
    """(StepTerms, the measured step time, labels) of one training run."""
    from transformer_calc.estimators.training.train import estimate_step
    from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload
    from transformer_calc.sources.presets import gpu as find_gpu, preset_model

    where = run["where"]
    unknown = sorted(k for k in run if k not in TRAIN_KEYS and k not in DESCRIPTIVE)
    if unknown:
        from transformer_calc.errors import did_you_mean

        hint = did_you_mean(unknown[0], TRAIN_KEYS)
        raise TcalcError(f"{where}: unknown key {unknown[0][:40]!r}{'; ' + hint if hint else ''}")
    _check_types(run)
    try:
        spec = run["model"]
        m = preset_model(spec) if isinstance(spec, str) else ModelConfig.model_validate(spec)
        if run.get("model_overrides"):
            m = m.with_overrides(run["model_overrides"])
        T, P, cp = int(run.get("tensor", 1)), int(run.get("pipeline", 1)), int(run.get("context", 1))
        gpus = int(run["gpus"])
        if gpus % (T * P * cp):
            raise TcalcError(f"gpus ({gpus}) is not a multiple of tensor x pipeline x context ({T * P * cp})")
        common = {"recompute": run.get("recompute", "none"), "flash": bool(run.get("flash", True)),
                  "framework": run.get("framework", "megatron"), "compile": bool(run.get("compile", False))}
        if "grad_bytes" in run:
            common["grad_bytes"] = run["grad_bytes"]
        precision = run.get("precision", "mixed")
        if precision == "fp8":
            tr = Training.model_validate({"precision": "mixed", "fp8_recipe": run.get("fp8_recipe", "delayed"), **common})
        else:
            tr = Training.model_validate({"precision": precision, **common})
        split = {k: run[k] for k in ("first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split",
                                     "expert", "expert_tensor", "cp_comm_type") if k in run}
        par = Parallelism(tensor=T, pipeline=P, data=gpus // (T * P * cp), context=cp,
                          virtual_stages=int(run.get("virtual_stages", 1)),
                          sequence_parallel=bool(run.get("sequence_parallel", False)), zero=int(run.get("zero", 1)), **split)
        g = find_gpu(str(run["gpu"]))
        G, S = int(run["global_batch"]), int(run["seq_len"])
        est = estimate_step(m, Workload(seq_len=S, batch_size=int(run.get("micro_batch", 1))), tr, par, g,
                            global_batch=G, overlap_dp=bool(run.get("overlap_grad_reduce", True)),
                            tp_comm_overlap=run.get("tp_comm_overlap"), moe_a2a_overlap=bool(run.get("moe_a2a_overlap")))
    except TcalcError as exc:
        raise TcalcError(f"{where}: {exc}") from None
    except (ValueError, TypeError, KeyError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TcalcError(f"{where}: {text[:200]}") from None
    meas = run["measured"]
    if "step_time_s" in meas:
        metric, step = "step_time_s", meas["step_time_s"]
    elif "tokens_per_s" in meas:
        metric, step = "tokens_per_s", G * S / meas["tokens_per_s"]
    else:
        metric, step = "tokens_per_s_per_gpu", G * S / (meas["tokens_per_s_per_gpu"] * gpus)
    terms = step_terms(est, tr)
    return terms, step, {"gpu": g.name, "framework": tr.framework.value, "dtype": terms.dtype, "metric": metric}


def _serve_run(run: dict[str, Any]) -> list[tuple[Any, float, dict[str, str]]]:
    """One (ServeTerms, measured value, labels) per metric a serving run measured: tcalc serve's
    load point at the run's concurrency (estimators/inference/serving.py)."""
    from transformer_calc.estimators.calibrate import ServeTerms
    from transformer_calc.estimators.inference.engines import check_engine
    from transformer_calc.estimators.inference.roofline import InferenceSpec
    from transformer_calc.estimators.inference.serving import engine_serving, load_point
    from transformer_calc.requests.inference import inference_efficiency
    from transformer_calc.sources.presets import gpu as find_gpu, preset_model

    where = run["where"]
    unknown = sorted(k for k in run if k not in SERVE_KEYS and k not in DESCRIPTIVE)
    if unknown:
        raise TcalcError(f"{where}: unknown key {unknown[0][:40]!r} for a serving run (keys: {', '.join(SERVE_KEYS)})")
    _check_types(run)
    try:
        m, g = preset_model(str(run["model"])), find_gpu(str(run["gpu"]))
        T, S, N = int(run.get("tensor", 1)), int(run["prompt_len"]), int(run["output_len"])
        c = int(run.get("concurrency", 1))
        engine = check_engine(str(run.get("engine", "vllm")))
        kw: dict[str, Any] = {"weight_dtype": str(run.get("weight_dtype", "bf16")), "tensor_parallel": T}
        if run.get("kv_dtype"):
            kw["kv_dtype"] = str(run["kv_dtype"])
        spec = InferenceSpec(batch_size=1, prompt_len=S, new_tokens=N, **kw)
        eff = inference_efficiency(g, {}, {"engine": engine})  # the engine's profile, as tcalc serve takes it
        serving = engine_serving(engine, g, T)
        if not serving.chunked_prefill and S >= serving.max_num_batched_tokens:
            serving = engine_serving(engine, g, T, chunked_prefill=True)
        point = load_point(m, g, spec, eff, serving, S, N, c)
    except TcalcError as exc:
        raise TcalcError(f"{where}: {exc}") from None
    except (ValueError, TypeError, KeyError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TcalcError(f"{where}: {text[:200]}") from None
    e2e = point.ttft_s + max(N - 1, 0) * point.tpot_s
    gpu_share = 1 - eff.request_s / e2e if e2e > 0 else 1.0
    labels = {"gpu": g.name, "framework": engine, "dtype": kw["weight_dtype"]}
    out = []
    for metric, value in (("ttft_s", point.ttft_s), ("tpot_s", point.tpot_s), ("output_tokens_per_s", point.output_tokens_per_s)):
        if metric in run["measured"]:
            out.append((ServeTerms(metric, value, gpu_share, eff.request_s), run["measured"][metric],
                        {**labels, "metric": metric}))
    return out


def _fit_names(text: str | None) -> list[str] | None:
    if text is None or str(text).strip().lower() in ("", "auto"):
        return None
    return [t.strip() for t in str(text).split(",") if t.strip()]


def calibrate_report(runs: list[dict[str, Any]], files: list[str], fit: str | None = None) -> CalibrateResult:
    """Price every run at the default profile, fit the free constants, report them and write the
    profile (estimators/calibrate.py for the model and the fit)."""
    from transformer_calc.estimators import calibrate as cal

    terms: list[Any] = []
    measured: list[float] = []
    labels: list[dict[str, str]] = []
    ids: list[str] = []
    kinds: list[str] = []
    for i, run in enumerate(runs, 1):
        priced = [_train_run(run)] if run["kind"] == "train" else _serve_run(run)
        for t, v, lab in priced:
            terms.append(t)
            measured.append(v)
            labels.append(lab)
            ids.append(str(run.get("id", i))[:60] + ("" if len(priced) == 1 else f" {lab['metric']}"))
            kinds.append(run["kind"])
    constants = cal.free_constants(terms, measured, _fit_names(fit))
    if not constants:
        raise TcalcError("the runs inform no free constant; give training or serving measurements")
    if len(terms) < len(constants):
        raise TcalcError(f"{len(terms)} measurements for {len(constants)} constants ({', '.join(c.name for c in constants)}): "
                         f"give at least {len(constants)} runs, or fewer constants with --fit")
    if len(terms) < 2:
        raise TcalcError("one measurement cannot be checked left out: give at least 2 runs")
    result = cal.calibrate(terms, measured, constants)
    rows = []
    for j, (t, v) in enumerate(zip(terms, measured)):
        lab = labels[j]
        before, after = cal.predict(t, {}), cal.predict(t, result.values)
        if lab["metric"] == "output_tokens_per_s":
            before, after = 1 / before, 1 / after
        rows.append(CalibratedRun(
            id=ids[j], kind=kinds[j], gpu=lab["gpu"], framework=lab["framework"], dtype=lab["dtype"],
            metric="step_time_s" if kinds[j] == "train" else lab["metric"], measured=v,
            predicted_default=before, predicted_calibrated=after, error_default=result.errors_before[j],
            error_calibrated=result.errors_after[j], error_left_out=result.loo_errors[j]))
    fitted = [FittedConstant(name=c.name, value=c.value, default=c.default, uncertainty=c.uncertainty, lower=c.lo, upper=c.hi)
              for c in result.constants]
    med = (cal.median_abs(result.errors_before), cal.median_abs(result.errors_after), cal.median_abs(result.loo_errors))
    on = FittedOn(runs=len(runs), files=files, gpus=sorted({lab["gpu"] for lab in labels}),
                  frameworks=sorted({lab["framework"] for lab in labels}), dtypes=sorted({lab["dtype"] for lab in labels}),
                  kinds=sorted(set(kinds)))
    profile = Profile(tcalc_profile=PROFILE_VERSION, fitted_on=on, constants={c.name: c.value for c in fitted},
                      uncertainty={c.name: c.uncertainty for c in fitted}, median_abs_error_default=med[0],
                      median_abs_error_calibrated=med[1], median_abs_error_left_out=med[2])
    return CalibrateResult(runs=rows, constants=fitted, median_abs_error_default=med[0], median_abs_error_calibrated=med[1],
                           median_abs_error_left_out=med[2], profile=profile)


def run_calibrate(req: Any) -> CalibrateResult:
    from transformer_calc.sources.runlogs import read_runs

    runs: list[dict[str, Any]] = []
    for path in req.files:
        runs.extend(read_runs(path))
    return calibrate_report(runs, [str(p) for p in req.files], req.fit)


# ---------------------------------------------------------------------------- a calibrated answer
def profile_of(req: Any) -> tuple[str, Profile] | None:
    """A request's --profile FILE, else its job file's `profile:` (relative to the job file), read as
    a calibrated profile; None without either."""
    path = getattr(req, "profile", None)
    if path is None:
        job = req.source().job
        path = job.profile if job is not None else None
    return None if path is None else load_profile(path)


def load_profile(path: Any) -> tuple[str, Profile]:
    """(the file's name, its Profile) from a profile file `tcalc calibrate --output` wrote."""
    from pydantic import ValidationError

    from transformer_calc.errors import clip
    from transformer_calc.sources.files import parse_yaml, read_user_file

    name = str(path) if len(str(path)) <= 80 else clip(str(path), 80)
    data = parse_yaml(read_user_file(path, "profile"), f"profile {name}")
    if not isinstance(data, dict) or "tcalc_profile" not in data:
        raise TcalcError(f"profile {name}: not a tcalc profile (no tcalc_profile: key); write one with tcalc calibrate --output")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise TcalcError(f"profile {name}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    known = ("gemm_efficiency_bf16", "gemm_efficiency_fp8", "gemm_efficiency_fp4", "gemm_efficiency_fp32",
             "exposed_comm_factor", "step_overhead_s", "gpu_time_factor", "request_overhead_s")
    for key, value in profile.constants.items():
        if key not in known:
            raise TcalcError(f"profile {name}: unknown constant {key[:40]!r} (known: {', '.join(known)})")
        if not value >= 0 or (key.startswith(("gemm", "gpu_time")) and not value > 0):
            raise TcalcError(f"profile {name}: {key} = {value} is out of range")
    return name, profile


def calibrated_step(est: Any, tr: Any, gpu_name: str, profile_ref: tuple[str, Profile]) -> tuple[Any, Calibration | None]:
    """(the StepEstimate under a profile, the calibration section): the GEMM time scaled by
    η₀/η, the exposed communication by κ, the bubble with the work it idles for, the per-step
    overhead added (estimators/calibrate.step_time gives the same step time). A profile with no
    constant for this step (a serving profile, another GEMM dtype's alone): the estimate as it is,
    and None."""
    import dataclasses

    from transformer_calc.estimators.calibrate import gemm_name

    name, profile = profile_ref
    terms = step_terms(est, tr)
    c = profile.constants
    used = {k: v for k, v in c.items() if k in (gemm_name(terms.dtype), "exposed_comm_factor", "step_overhead_s")}
    if not used:
        return est, None
    gemm_scale = terms.default_gemm_efficiency / used.get(gemm_name(terms.dtype), terms.default_gemm_efficiency)
    kappa = used.get("exposed_comm_factor", 1.0)
    base = terms.gemm_s + terms.fixed_s + terms.comm_s
    work = terms.gemm_s * gemm_scale + terms.fixed_s + kappa * terms.comm_s
    scaled = dataclasses.replace(
        est, compute_s=est.compute_s * gemm_scale, tp_comm_s=est.tp_comm_s * kappa, dp_exposed_s=est.dp_exposed_s * kappa,
        pp_comm_s=est.pp_comm_s * kappa, moe_all_to_all_s=est.moe_all_to_all_s * kappa, cp_comm_s=est.cp_comm_s * kappa,
        pp_bubble_s=est.pp_bubble_s * (work / base if base > 0 else 1.0),
        step_overhead_s=used.get("step_overhead_s", 0.0),
        assumptions={**est.assumptions, "matmul_efficiency": terms.default_gemm_efficiency / gemm_scale})
    on = profile.fitted_on
    matches = gpu_name in on.gpus and tr.framework.value in on.frameworks and terms.dtype in on.dtypes
    section = Calibration(profile_file=name, fitted_on=on, constants=used,
                          median_abs_error_left_out=profile.median_abs_error_left_out, matches=matches,
                          step_overhead_s=used.get("step_overhead_s", 0.0))
    return scaled, section


def calibrated_efficiency(eff: Any, profile_ref: tuple[str, Profile]) -> tuple[Any, Calibration | None]:
    """(the serving Efficiency under a profile, the calibration section; None when the profile has no
    serving constant): the GPU's rates over the GPU-time factor k (capped at 1), its kernel and
    per-sequence costs times k, the per-request overhead added (estimators/calibrate.serve_value)."""
    import dataclasses

    name, profile = profile_ref
    c = profile.constants
    used = {key: v for key, v in c.items() if key in ("gpu_time_factor", "request_overhead_s")}
    if not used:
        return eff, None
    k = used.get("gpu_time_factor", 1.0)
    rates = {f: min(1.0, getattr(eff, f) / k) for f in ("matmul", "matmul_fp8", "matmul_fp4", "memory")}
    scaled = dataclasses.replace(eff, **rates, kernel_s=eff.kernel_s * k, sequence_s=eff.sequence_s * k,
                                 request_s=eff.request_s + used.get("request_overhead_s", 0.0))
    on = profile.fitted_on
    section = Calibration(profile_file=name, fitted_on=on, constants=used,
                          median_abs_error_left_out=profile.median_abs_error_left_out,
                          matches="serve" in on.kinds)
    return scaled, section
