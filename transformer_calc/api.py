"""The Python API: a function per command, the same options as keyword arguments, typed results.

    import transformer_calc.api as tc
    r = tc.memory("llama-3-8b", S=8192, B=2, recompute="full", dp=64, zero=3)
    r.memory.peak_bytes, r.model_dump(mode="json")      # == `tcalc memory ... -f json`

A model is a preset name, a path (a tcalc YAML job file, a config.json, a checkpoint folder, a
.gguf file), a Hugging Face repo id, a `ModelConfig` or a dict of ModelConfig fields. Each function
takes its command's request model's fields as keywords (requests/): the descriptive names of
docs/notation.md (seq_len, tensor) and every spelling of the command's flags (S, T, tensor_parallel,
dp, ep, cp): `tc.memory(m, S=4096)` is `tcalc memory m --S 4096`, by construction. A keyword a
function does not take is a TypeError naming it, with did-you-mean; a bad value is a TcalcError
(a ValueError) naming the keyword. Each function returns the command's typed result;
`model_dump(mode="json")` equals the command's `--format json` output (tests/test_api.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from transformer_calc.errors import TcalcError
from transformer_calc.model.config import ModelConfig
from transformer_calc.results.params import ParamsResult  # noqa: F401 (the API's result types)
from transformer_calc.results.memory import MemoryResult  # noqa: F401
from transformer_calc.results.flops import FlopsResult, MfuResult  # noqa: F401
from transformer_calc.results.inference import InferenceResult  # noqa: F401
from transformer_calc.results.train import TrainResult, PlanResult  # noqa: F401
from transformer_calc.results.serve import ServeResult  # noqa: F401
from transformer_calc.results.rl import RlResult  # noqa: F401
from transformer_calc.results.check import CheckResult  # noqa: F401
from transformer_calc.results.catalog import PresetsResult, HardwareResult  # noqa: F401
from transformer_calc.results.sweep import SweepResult  # noqa: F401
from transformer_calc.requests.base import Request
from transformer_calc.requests.catalog import CheckRequest, HardwareRequest, PresetsRequest
from transformer_calc.requests.flops import FlopsRequest, MfuRequest, ParamsRequest
from transformer_calc.requests.inference import InferenceRequest, ServeRequest
from transformer_calc.requests.rl import RlRequest
from transformer_calc.requests.sweep import SweepRequest
from transformer_calc.requests.train import PlanRequest, TrainRequest
from transformer_calc.requests.training import MemoryRequest
from transformer_calc.results.catalog import run_hardware, run_presets
from transformer_calc.results.check import run_check
from transformer_calc.results.calibrate import CalibrateResult, run_calibrate  # noqa: F401
from transformer_calc.requests.calibrate import CalibrateRequest
from transformer_calc.results.flops import run_flops, run_mfu
from transformer_calc.results.inference import run_inference
from transformer_calc.results.memory import run_memory
from transformer_calc.results.params import run_params
from transformer_calc.results.rl import run_rl
from transformer_calc.results.serve import run_serve
from transformer_calc.results.sweep import run_sweep
from transformer_calc.results.train import run_plan, run_train

def _command(cls: type[Request], body: Any, result: Any, doc: str) -> Any:
    """The API function of a command: positional arguments are its positional fields (the model;
    check's files), keywords its fields and their flags' spellings (Request.from_keywords)."""
    options = cls.options()
    positional = [name for name, o in options.items() if o.positional]
    repeated = bool(positional) and options[positional[0]].repeat

    def function(*args: Any, **keywords: Any) -> Any:
        name = cls.command
        if args:
            if not positional:
                raise TypeError(f"{name}() takes no positional arguments")
            if repeated:
                keywords_args = {positional[0]: list(args)}
            elif len(args) > 1:
                raise TypeError(f"{name}() takes one positional argument ({positional[0]}), {len(args)} given")
            else:
                keywords_args = {positional[0]: args[0]}
            for key in keywords_args:
                if key in keywords:
                    raise TypeError(f"{name}() got {key!r} twice (positionally and as a keyword)")
            keywords = keywords_args | keywords
        request = cls.from_keywords(keywords, where=f"{name}()")
        try:
            return body(request)
        except TcalcError:
            raise
        except (ValueError, OverflowError) as exc:  # an estimator's refusal: the package's one error type
            raise TcalcError(" ".join(str(exc).split())) from None

    params = [inspect.Parameter(n, inspect.Parameter.VAR_POSITIONAL if options[n].repeat else
                                inspect.Parameter.POSITIONAL_OR_KEYWORD, **({} if options[n].repeat else
                                                                            {"default": cls.model_fields[n].default}))
              for n in positional]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=f.default if not f.is_required() else None)
               for n, f in cls.model_fields.items() if n not in positional and options[n].api]
    function.__signature__ = inspect.Signature(params, return_annotation=result)  # type: ignore[attr-defined]
    function.__name__ = function.__qualname__ = cls.command
    function.__doc__ = doc
    function.keywords = frozenset(cls.keywords())  # type: ignore[attr-defined]  # tests/test_vocabulary.py
    function.request = cls  # type: ignore[attr-defined]
    return function


params = _command(ParamsRequest, run_params, ParamsResult, """`tcalc params`: exact parameter count with its
    breakdown (the weights line in `dtype`, or p bytes per value; bf16), and one T rank's share.""")
memory = _command(MemoryRequest, run_memory, MemoryResult, """`tcalc memory`: the peak training memory per GPU:
    every key of a job file's training: section (S, B, precision, dtype/p, optimizer, recompute,
    flash, T, sp, P, dp, zero, ep, etp, cp, finetune, lora_*, offload, fp8_recipe, ...) and gpu.""")
flops = _command(FlopsRequest, run_flops, FlopsResult, """`tcalc flops`: model and hardware FLOPs of a step,
    and a training-time estimate (tokens, gpus, gpu, mfu) or compute-optimal sizing (budget).""")
mfu = _command(MfuRequest, lambda r: run_mfu(r), MfuResult, """`tcalc mfu`: MFU and HFU from a measured step
    time (with global_batch, in sequences, or global_batch_tokens) or tokens_per_s.""")
inference = _command(InferenceRequest, run_inference, InferenceResult, """`tcalc inference`: KV cache,
    memory, prefill and decode latency (bound and expected) and the paged cache's serving capacity.""")
serve = _command(ServeRequest, run_serve, ServeResult, """`tcalc serve`: layouts of `gpus` GPUs against
    TTFT/TPOT targets (ttft_s, tpot_s), with their throughput; rejections with reasons.""")
train = _command(TrainRequest, lambda r: run_train(r), TrainResult, """`tcalc train`: the step time of a layout
    (global_batch in sequences, or global_batch_tokens). Settings as the command's: a keyword,
    then a job file's training: section, then the default.""")
plan = _command(PlanRequest, lambda r: run_plan(r), PlanResult, """`tcalc plan`: the fastest layouts that fit
    (global_batch in sequences, or global_batch_tokens); the layout is plan's to choose.""")
rl = _command(RlRequest, run_rl, RlResult, """`tcalc rl`: one RL post-training step (GRPO, PPO): generation
    on the rollout engine with the long tail of response lengths, log-prob passes, updates, weight
    sync; time and share per phase, memory per GPU per phase (colocated or split pools).""")
check = _command(CheckRequest, run_check, CheckResult, """`tcalc check FILES`: each job file PASS / FAIL /
    INVALID (the CLI exits 2 if any is invalid, else 1 if any check failed, else 0).""")
presets = _command(PresetsRequest, run_presets, PresetsResult, """`tcalc presets`: the model presets with their
    key numbers and sources.""")
hardware = _command(HardwareRequest, run_hardware, HardwareResult, """`tcalc hardware [NAME]`: the accelerator
    table, or one accelerator in detail.""")
calibrate = _command(CalibrateRequest, lambda r: run_calibrate(r), CalibrateResult, """`tcalc calibrate FILES`: the
    time profile's free constants fitted to measured runs (runs files naming their logs): each
    value, its uncertainty and the leave-one-out error; `.profile` is what --profile reads.""")
sweep = _command(SweepRequest, run_sweep, SweepResult, """`tcalc sweep`: a grid, one row per point. Axes (B, S,
    T, P, dp, zero, ep, cp, recompute, flash, gpu, dtype, weight_dtype) take one value, a list, or
    the CLI's text such as "1,2,4..64"; models: positional (one or several), models=[...],
    preset= (a list, or comma-separated), config=, hf_config=.""")


def load(model: Any = None, *, preset: str | None = None, hf_config: str | Path | None = None,
         config: str | Path | None = None, revision: str | None = None) -> tuple[ModelConfig, Any]:
    """(ModelConfig, job file or None) from a ModelConfig, a dict of its fields, or a string as
    the CLI's MODEL takes it (a preset name, a path: tcalc YAML, config.json, checkpoint folder,
    .gguf file; or a Hugging Face repo id org/name[@revision]), or from exactly one of the
    keywords preset=, hf_config=, config= (the CLI's --preset, --hf-config, --config)."""
    src = load_source(model, preset=preset, hf_config=hf_config, config=config, revision=revision)
    return src.model, src.job


def load_source(model: Any = None, *, preset: str | None = None, hf_config: str | Path | None = None,
                config: str | Path | None = None, revision: str | None = None,
                overrides: dict[str, Any] | None = None) -> Any:
    """As `load`, the whole `sources.Source`: the model, its job file and its checkpoint (the bytes
    a folder, repo or GGUF file stores); `overrides` (ModelConfig fields) are applied and the model
    re-validated, as the CLI's model flags are."""
    from transformer_calc.sources.resolve import load_source as resolve

    given = [x for x in (model, preset, hf_config, config) if x is not None]
    if len(given) != 1 and not (overrides and not given):
        raise TypeError("give the model once: a positional model, preset=, hf_config= or config=")
    return resolve(model, preset=preset, hf_config=Path(hf_config) if hf_config is not None else None,
                   config=Path(config) if config is not None else None, revision=revision, overrides=overrides)


def schema(command: str) -> dict[str, Any]:
    """`tcalc schema COMMAND`: the JSON Schema of a command's result (what `--format json` writes
    and `model_dump(mode="json")` returns), e.g. `tc.schema("memory")`."""
    from transformer_calc.results import result_schema

    return result_schema(command)
