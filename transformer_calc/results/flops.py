"""`tcalc flops` and `tcalc mfu`: FLOPs of a step, training time, compute-optimal sizing; MFU and HFU.

The typed results (`FlopsResult`, `MfuResult`) are the commands' JSON (`model_dump(mode="json")`),
the Python API's return values and what render reads; docs/cli.md documents their keys.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError


from decimal import Decimal
from typing import TYPE_CHECKING, Any

import transformer_calc.estimators.flops as F
from transformer_calc.model.units import SECONDS_PER_DAY
from transformer_calc.estimators.params import count_params
from transformer_calc.model.config import ModelConfig
from transformer_calc.results.base import Result, Section
from transformer_calc.results.common import (Assumptions, ModelSection, TowersSection, WorkloadSection, assumptions_section,
                                            model_section, peak_for, towers_section)

if TYPE_CHECKING:
    from transformer_calc.requests.flops import FlopsRequest, MfuRequest


# ============================================================================ flops
class Conventions(Section):
    causal: bool  # attention scores halved (S²/2) for a causal mask
    recompute: str  # none | selective | full | op: what `flops.hardware` adds


class StepFlopsSection(Section):
    """FLOPs of one step of B sequences of S tokens (`estimators.flops.StepFlops.as_dict`, in its
    order), then the hardware FLOPs of the asked recompute."""

    total: int  # model FLOPs: forward + backward, no recompute
    forward: int
    backward: int  # 2 x forward
    per_token: int  # total / tokens
    tokens: int  # B·S
    causal: bool
    windowed: bool  # sliding/chunked layers at what a windowed kernel computes
    attention_share: float  # fraction of the forward in the attention core (scores + re-weighting)
    hardware_none: int  # model + recomputed FLOPs, per recompute kind
    hardware_selective: int
    hardware_full: int
    layers: int  # forward of all L blocks
    attention_cores: int  # forward scores + re-weighting of all L blocks
    lm_head: int  # forward
    embedding_projection: int  # forward, OPT's project_in + project_out
    indexer: int  # forward of every DSA lightning indexer (no backward: transformers runs it under no_grad)
    mixers: int | None = None  # hybrid models only: forward of the non-attention mixers (Gated DeltaNet, ...), in layers
    shared_blocks: int | None = None  # Zamba2 only: forward of every shared-block application, in layers
    per_layer_qkv: int  # forward of one representative block (full attention; MoE MLP if MoE), by term
    per_layer_scores: int
    per_layer_reweight: int
    per_layer_attn_out: int
    per_layer_mlp: int
    per_layer_shared_expert: int
    per_layer_router: int
    per_layer_indexer: int  # one DSA layer's indexer, forward (not in per_layer)
    per_layer: int  # the block's forward
    hardware: int  # hardware FLOPs of the step at the asked recompute (conventions.recompute)


class RulesOfThumb(Section):
    six_n_per_token: int  # 6·N, N all parameters (MoE: the active ones)
    six_n_non_embedding_per_token: int  # 6·N, Kaplan's non-embedding N
    palm_per_token: int  # PaLM App. B: 6·N + 12·L·H·Q·T
    seed_total: int  # the seed's step FLOPs, 12·B·D·L·S·(S + (2+E)·D)
    seed_total_with_lm_head: int  # and the LM head's 6·B·S·D·V


class Optimal(Section):
    """A Chinchilla-optimal pair (about 20 tokens per parameter) and its 6·N·tokens FLOPs."""

    params: int
    tokens: int
    flops: int


class BudgetOptimal(Section):
    budget: int  # FLOPs, as given
    params: int
    tokens: int
    flops: int  # 6·params·tokens, at most the budget


class ComputeOptimalSection(Section):
    for_params: Optimal  # this model's N
    for_budget: BudgetOptimal | None = None  # with --budget


class TrainingRun(Section):
    """Training on `tokens` tokens; with a GPU count, a GPU and an MFU, its time."""

    tokens: int
    flops: int  # the exact count per token x tokens (the causal convention as asked)
    flops_six_n: int  # 6·N·tokens
    gpus: int | None = None
    gpu: str | None = None
    dtype: str | None = None  # the dtype of the dense peak
    peak_flops_per_gpu: int | None = None  # dense, FLOP/s
    mfu: float | None = None  # the assumed model FLOPs utilization
    time_s: float | None = None
    days: float | None = None
    gpu_hours: float | None = None


class FlopsResult(Result):
    model: ModelSection
    workload: WorkloadSection
    conventions: Conventions
    flops: StepFlopsSection
    rules_of_thumb: RulesOfThumb
    compute_optimal: ComputeOptimalSection
    training: TrainingRun | None = None  # with --tokens
    towers: TowersSection | None = None  # a multimodal model: its towers are not in these FLOPs
    assumptions: Assumptions = Assumptions(defaults=[])  # the defaults assumed (requests/defaults.py), with their sources


def flops_request(
    m: ModelConfig, section: dict[str, Any], *, S: int | None = None, B: int | None = None,
    recompute: str | None = None, causal: bool = False, windowed: bool = False, tokens: int | None = None,
    gpus: int | None = None, gpu_name: str | None = None, dtype: str | None = None, mfu: float | None = None,
    budget: int | None = None,
) -> FlopsResult:
    """`tcalc flops` from its options (flag, then the job file's training: section, then the
    default), validated with the flag each came from; the CLI and the Python API both call it."""
    from transformer_calc.model.config import Recompute, Workload, build, resolve
    from transformer_calc.sources.presets import gpu as find_gpu

    from transformer_calc.requests.defaults import DEFAULT_GPU, DEFAULT_GPU_SOURCE, Assumption, train_seq_len

    S_default, why = train_seq_len(m)
    o = resolve({"seq_len": S, "batch_size": B, "recompute": recompute}, section,
                {"seq_len": S_default, "batch_size": 1, "recompute": "none"})
    workload = build(Workload, {"seq_len": o["seq_len"], "batch_size": o["batch_size"]}, "workload")
    try:
        rec = Recompute(o["recompute"])
    except TcalcError:
        raise
    except ValueError:
        raise TcalcError(f"--recompute ({o['recompute']!r}): choose one of {', '.join(v.value for v in Recompute)}") from None
    try:
        F.check_op_recompute(m, rec)
    except ValueError as exc:
        raise TcalcError(str(exc)) from None
    if (gpus is not None or gpu_name is not None or mfu is not None) and tokens is None:
        raise TcalcError("--gpus, --gpu and --mfu estimate training time: give --tokens too, e.g. --tokens 300e9")
    if tokens is not None and gpus is None and gpu_name is not None:
        raise TcalcError("a training-time estimate needs the number of GPUs: give --gpus N")
    assumed = [] if S is not None or "seq_len" in section else [Assumption("seq_len", S_default, why)]
    if tokens is not None and gpus is not None and gpu_name is None:
        gpu_name = DEFAULT_GPU  # the one default GPU (requests/defaults.py)
        assumed.append(Assumption("gpu", DEFAULT_GPU, DEFAULT_GPU_SOURCE))
    if mfu is not None and not 0 < mfu <= 1:
        raise TcalcError(f"--mfu ({mfu}) must be a fraction in (0, 1], e.g. 0.4 for 40 %")
    device = find_gpu(gpu_name) if gpu_name is not None else None
    return flops_report(
        m, workload, causal=causal, windowed=windowed, recompute=rec, tokens=tokens, gpus=gpus, gpu=device,
        dtype=dtype, mfu=(mfu if mfu is not None else 0.4) if device else None, budget=budget,
    ).model_copy(update={"assumptions": assumptions_section(assumed)})


def flops_report(
    m: ModelConfig,
    w: Any,
    causal: bool = False,
    recompute: Any = "none",
    tokens: int | None = None,
    windowed: bool = False,
    gpus: int | None = None,
    gpu: Any | None = None,
    dtype: str | None = None,
    mfu: float | None = None,
    budget: int | None = None,
) -> FlopsResult:
    """`tcalc flops`: model and hardware FLOPs per step, rules of thumb, training time, sizing."""
    step = F.count_flops(m, w, causal=causal, windowed=windowed)
    # the training section only with --tokens (unset, it is absent from the JSON)
    extra: dict[str, Any] = {"training": _training_run(m, w, causal, tokens, gpus, gpu, dtype, mfu)} if tokens is not None else {}
    if (towers := towers_section(m, "training")) is not None:
        extra["towers"] = towers
    return FlopsResult(
        model=model_section(m),
        workload=WorkloadSection(seq_len=w.seq_len, batch_size=w.batch_size),
        conventions=Conventions(causal=causal, recompute=str(getattr(recompute, "value", recompute))),
        # as_dict is typed dict[str, int | float | bool]; each key's own type is checked here
        flops=StepFlopsSection.model_validate({**step.as_dict(), "hardware": step.hardware(recompute)}),
        rules_of_thumb=RulesOfThumb(
            six_n_per_token=F.six_n_flops_per_token(m),
            six_n_non_embedding_per_token=F.six_n_flops_per_token(m, include_embeddings=False),
            palm_per_token=F.palm_flops_per_token(m, w.seq_len),
            seed_total=F.seed_model_flops(m, w),
            seed_total_with_lm_head=F.seed_model_flops(m, w, lm_head=True),
        ),
        compute_optimal=_compute_optimal(m, budget),
        **extra,
    )


def _compute_optimal(m: ModelConfig, budget: int | float | None) -> ComputeOptimalSection:
    """Chinchilla's tokens for this model's N; with a FLOP budget, the N and tokens it buys."""
    c = F.chinchilla_for_params(count_params(m).total)
    for_params = Optimal(params=c.params, tokens=c.tokens, flops=c.flops)
    if budget is None:
        return ComputeOptimalSection(for_params=for_params)
    best = F.chinchilla_for_flops(budget)
    return ComputeOptimalSection(
        for_params=for_params,
        # the budget as the estimator reads it: 1e24 as written (an int), not the double below it
        for_budget=BudgetOptimal(budget=int(Decimal(repr(budget))), params=best.params, tokens=best.tokens,
                                 flops=best.flops),
    )


def _training_run(m: ModelConfig, w: Any, causal: bool, tokens: int, gpus: int | None, gpu: Any | None,
                  dtype: str | None, mfu: float | None) -> TrainingRun:
    """The `training` section: FLOPs to train on `tokens` tokens; their time with GPUs and an MFU."""
    total = F.train_flops_for_tokens(m, w.seq_len, tokens, causal=causal)
    six_n = F.train_flops_for_tokens(m, w.seq_len, tokens, exact=False)
    if gpu is None or gpus is None or mfu is None:
        return TrainingRun(tokens=tokens, flops=total, flops_six_n=six_n)
    used, peak = peak_for(gpu, dtype)
    seconds = F.training_time_s(total, gpus, peak, mfu)
    return TrainingRun(
        tokens=tokens, flops=total, flops_six_n=six_n, gpus=gpus, gpu=gpu.name, dtype=used,
        peak_flops_per_gpu=peak, mfu=mfu, time_s=seconds, days=seconds / SECONDS_PER_DAY,
        gpu_hours=F.gpu_hours(seconds, gpus),
    )


# ============================================================================ mfu
class MfuFlops(Section):
    per_token: int  # model FLOPs per token at S (no recompute)
    hardware_per_token: int  # with what recompute executes again (hfu_convention)
    recompute: str  # none | selective | full | op
    causal: bool
    hfu_convention: str  # executed | paper (Korthikanti et al. 2022 eq. 8: the core three times)
    per_step: int | None = None  # per_token x global batch x S; with --global-batch and --step-time
    hardware_per_step: int | None = None


class MfuResult(Result):
    model: ModelSection
    seq_len: int
    gpus: int
    gpu: str
    dtype: str  # the dtype of the dense peak
    peak_flops_per_gpu: int  # dense, FLOP/s
    tokens_per_s: float  # all GPUs together
    mfu: float  # model FLOPs utilization, a fraction
    hfu: float  # hardware FLOPs utilization, a fraction
    achieved_flops_per_gpu: float  # FLOP/s, model FLOPs
    achieved_hardware_flops_per_gpu: float  # FLOP/s, hardware FLOPs
    flops: MfuFlops
    global_batch: int | None = None  # sequences per step; with step_time_s
    step_time_s: float | None = None
    assumptions: Assumptions = Assumptions(defaults=[])  # the defaults assumed (requests/defaults.py), with their sources


def mfu_request(
    m: ModelConfig, section: dict[str, Any], *, S: int | None = None, gpus: int = 1, gpu_name: str | None = None,
    dtype: str | None = None, global_batch: int | None = None, global_batch_tokens: int | None = None,
    step_time: float | None = None, tokens_per_s: float | None = None, recompute: str | None = None,
    causal: bool = False, hfu_convention: str = "executed",
) -> MfuResult:
    """`tcalc mfu` from its options (a flag, then the job file's training: section, then the
    default), each validated with the flag it came from; the CLI and the Python API both call it."""
    import math

    from transformer_calc.model.config import Recompute, Workload, build, resolve
    from transformer_calc.sources.presets import gpu as find_gpu

    from transformer_calc.requests.defaults import DEFAULT_GPU, DEFAULT_GPU_SOURCE, Assumption, train_seq_len

    S_default, why = train_seq_len(m)
    o = resolve({"seq_len": S, "recompute": recompute}, section, {"seq_len": S_default, "recompute": "none"})
    assumed = [] if S is not None or "seq_len" in section else [Assumption("seq_len", S_default, why)]
    if gpu_name is None:
        assumed.append(Assumption("gpu", DEFAULT_GPU, DEFAULT_GPU_SOURCE))
    workload = build(Workload, {"seq_len": o["seq_len"]}, "workload")
    rec = o["recompute"]
    if global_batch_tokens is not None:
        if global_batch is not None:
            raise TcalcError("give the global batch once: --global-batch (sequences) or --global-batch-tokens, not both")
        if global_batch_tokens < workload.seq_len:
            raise TcalcError(f"--global-batch-tokens ({global_batch_tokens}) is less than one sequence of S = {workload.seq_len} tokens")
        global_batch = global_batch_tokens // workload.seq_len
    if tokens_per_s is None and (global_batch is None or step_time is None):
        raise TcalcError("give the measured speed: --tokens-per-s N, or --global-batch N and --step-time SECONDS")
    if tokens_per_s is not None and (global_batch is not None or step_time is not None):
        raise TcalcError("give --tokens-per-s or --global-batch with --step-time, not both")
    for name, value in (("--step-time", step_time), ("--tokens-per-s", tokens_per_s)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise TcalcError(f"{name} ({value}) must be a positive, finite number")
    if hfu_convention not in ("executed", "paper"):
        raise TcalcError(f"--hfu-convention ({str(hfu_convention)[:40]!r}) must be one of executed, paper")
    try:
        rec_kind = Recompute(rec)
    except TcalcError:
        raise
    except ValueError:
        raise TcalcError(f"--recompute ({rec!r}): choose one of {', '.join(v.value for v in Recompute)}") from None
    try:
        F.check_op_recompute(m, rec_kind)
    except ValueError as exc:
        raise TcalcError(str(exc)) from None
    return mfu_report(
        m, workload, gpus, find_gpu(gpu_name or DEFAULT_GPU), dtype=dtype, global_batch=global_batch, step_time=step_time,
        tokens_per_s=tokens_per_s, recompute=rec_kind, causal=causal, hfu_convention=hfu_convention,
    ).model_copy(update={"assumptions": assumptions_section(assumed)})


def mfu_report(
    m: ModelConfig,
    w: Any,
    gpus: int,
    gpu: Any,
    dtype: str | None = None,
    global_batch: int | None = None,
    step_time: float | None = None,
    tokens_per_s: float | None = None,
    recompute: Any = "none",
    causal: bool = False,
    hfu_convention: str = "executed",
) -> MfuResult:
    """`tcalc mfu`: MFU and HFU from a measured step time (with the global batch) or throughput."""
    step = F.count_flops(m, w.model_copy(update={"batch_size": 1}), causal=causal)
    per_token_model = step.total // step.tokens
    per_token_hw = step.hardware(recompute, hfu_convention) // step.tokens
    if tokens_per_s is None:
        if global_batch is None or step_time is None:
            raise ValueError("give --tokens-per-s, or --global-batch and --step-time")
        if step_time <= 0:
            raise ValueError(f"--step-time ({step_time}) must be positive seconds per step")
        tokens_per_s = global_batch * w.seq_len / step_time
    used, peak = peak_for(gpu, dtype)
    model_mfu = F.mfu_from_throughput(per_token_model, tokens_per_s, gpus, peak)
    hardware_fu = F.mfu_from_throughput(per_token_hw, tokens_per_s, gpus, peak)
    if hardware_fu > 1 or model_mfu > 1:  # impossible: more FLOP/s than the GPUs have
        _refuse_impossible_mfu(model_mfu, gpus, gpu.name, used, global_batch)
    # a measured step (global batch and step time): its FLOPs, and the two keys; a throughput: neither
    per_step: dict[str, int] = {}
    measured: dict[str, Any] = {}
    if global_batch is not None and step_time is not None:
        tokens = global_batch * w.seq_len
        per_step = {"per_step": per_token_model * tokens, "hardware_per_step": per_token_hw * tokens}
        measured = {"global_batch": global_batch, "step_time_s": step_time}
    return MfuResult(
        model=model_section(m),
        seq_len=w.seq_len,
        gpus=gpus,
        gpu=gpu.name,
        dtype=used,
        peak_flops_per_gpu=peak,
        tokens_per_s=tokens_per_s,
        mfu=model_mfu,
        hfu=hardware_fu,
        achieved_flops_per_gpu=model_mfu * peak,
        achieved_hardware_flops_per_gpu=hardware_fu * peak,
        flops=MfuFlops(
            per_token=per_token_model,
            hardware_per_token=per_token_hw,
            recompute=str(getattr(recompute, "value", recompute)),
            causal=causal,
            hfu_convention=hfu_convention,
            **per_step,
        ),
        **measured,
    )


def _refuse_impossible_mfu(model_mfu: float, gpus: int, gpu_name: str, used: str, global_batch: int | None) -> None:
    """An MFU above 100 %: the inputs cannot be right; say which one most likely is not."""
    import math

    cause = (
        "--global-batch counts sequences (give tokens with --global-batch-tokens)"
        if global_batch is not None else "--tokens-per-s is for all GPUs together"
    )
    shown = f"{100 * model_mfu:.0f} %" if math.isfinite(model_mfu) else "beyond any finite value"
    raise TcalcError(
        f"MFU would be {shown}, above 100 % of {gpus} x {gpu_name}'s "
        f"{used} peak: the inputs cannot be right; check --gpus, --step-time, and that {cause}"
    )


# ---------------------------------------------------------------------------- the command
def run_flops(req: FlopsRequest) -> FlopsResult:
    from transformer_calc.devices.hardware import compute_dtype

    src = req.source()
    return flops_request(src.model, src.job.training if src.job else {}, S=req.seq_len, B=req.batch_size,
                         recompute=req.recompute, causal=req.causal, windowed=req.windowed, tokens=req.tokens,
                         gpus=req.gpus, gpu_name=req.gpu, dtype=compute_dtype(req.dtype, req.p), mfu=req.mfu,
                         budget=req.budget)


# ---------------------------------------------------------------------------- the command
def run_mfu(req: MfuRequest, note: Any = None) -> MfuResult:
    from transformer_calc.devices.hardware import compute_dtype
    from transformer_calc.requests.training import global_batch

    src = req.source()
    section = src.job.training if src.job else {}
    sequences = req.global_batch
    if req.global_batch_tokens is not None:
        seq = next(v for v in (req.seq_len, section.get("seq_len"), src.model.max_seq_len) if v is not None)
        sequences = global_batch(req.global_batch, req.global_batch_tokens, seq, note)
    return mfu_request(src.model, section, S=req.seq_len, gpus=req.gpus, gpu_name=req.gpu,
                       dtype=compute_dtype(req.dtype, req.p), global_batch=sequences, step_time=req.step_time,
                       tokens_per_s=req.tokens_per_s, recompute=req.recompute, causal=req.causal,
                       hfu_convention=req.hfu_convention)
