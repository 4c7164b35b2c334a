"""The Python API: a function per command, the same options as keyword arguments, typed results.

    import transformer_calc.api as tc
    r = tc.memory("llama-3-8b", S=8192, B=2, recompute="full", dp=64, zero=3)
    r.memory.peak_bytes, r.model_dump(mode="json")      # == `tcalc memory ... -f json`

A model is a preset name, a `ModelConfig`, a dict of ModelConfig fields, or a path to a tcalc
YAML job file or a Hugging Face config.json (by suffix). Options take the descriptive names of
docs/notation.md or the seed's letters (S, B, T, P, dp, ep, cp), as the command's flags do; a
keyword a function does not take is a TypeError naming it, with did-you-mean. Each function returns a pydantic
result whose top-level fields are the command's JSON keys; `model_dump(mode="json")` equals the
command's `--format json` output (tests/test_api.py checks every command).
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any


from transformer_calc.model.config import SECTION_ALIASES, TRAINING_KEYS, ModelConfig
from transformer_calc.estimators.sweep import INFERENCE_SETTINGS, PARALLEL_SETTINGS, TRAINING_SETTINGS


from transformer_calc.model.config import ModelConfig
from transformer_calc.results.common import source_checkpoint
from transformer_calc.results.params import ParamsResult  # noqa: F401 (the API's result types)
from transformer_calc.results.memory import MemoryResult  # noqa: F401
from transformer_calc.results.flops import FlopsResult, MfuResult  # noqa: F401
from transformer_calc.results.inference import InferenceResult  # noqa: F401
from transformer_calc.results.train import TrainResult, PlanResult  # noqa: F401
from transformer_calc.results.serve import ServeResult  # noqa: F401
from transformer_calc.results.check import CheckResult  # noqa: F401
from transformer_calc.results.catalog import PresetsResult, HardwareResult  # noqa: F401
from transformer_calc.results.sweep import SweepResult  # noqa: F401


# The model keywords: its source, and the CLI's model overrides (--L --D --A --kv-heads --head-dim
# --E --d-ff --V --K --set), as `tcalc params gpt2 --L 24` is `tc.params("gpt2", L=24)`.
OVERRIDE_FIELDS = {"L": "n_layers", "D": "d_model", "A": "n_heads", "kv_heads": "n_kv_heads", "head_dim": "head_dim",
                   "E": "expansion", "d_ff": "d_ff", "V": "vocab_size", "K": "max_seq_len"}
_SOURCE_KEYS = ("preset", "hf_config", "config", "revision", *OVERRIDE_FIELDS, "set")


def _keywords(*options: str, aliases: dict[str, str] | None = None) -> Any:
    """Check a function's keyword arguments as the CLI checks its flags: a name the function does
    not take is a TypeError that names it, with the nearest names it does take
    (errors.did_you_mean), never ignored. `options` are the names a **options function reads (a
    **source function takes only the model keywords there). The seed's letters and the
    descriptive names of docs/notation.md (config.SECTION_ALIASES) are one option: a function whose
    parameter is a letter (S) also takes the name (seq_len), one that reads names also takes the
    letters; `aliases` adds names (new name -> the parameter or option). One option given under two
    names is an error."""
    from transformer_calc.errors import did_you_mean

    def decorate(fn: Any) -> Any:
        params = inspect.signature(fn).parameters.values()
        named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        extra = list(options) or (list(_SOURCE_KEYS) if any(p.kind is p.VAR_KEYWORD for p in params) else [])
        names = {**{canon: letter for letter, canon in SECTION_ALIASES.items() if letter in named},
                 **{letter: canon for letter, canon in SECTION_ALIASES.items() if canon in extra}, **(aliases or {})}
        known = [*named, *extra, *names]

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            for key in list(kwargs):
                if key in names:
                    target = names[key]
                    if target in kwargs:
                        raise TypeError(f"{fn.__name__}() got {target!r} and {key!r}, one option under two names; give one")
                    kwargs[target] = kwargs.pop(key)
                elif key not in known:
                    hint = did_you_mean(key, known)
                    raise TypeError(f"{fn.__name__}() got an unexpected keyword argument {key!r}" + (f"; {hint}" if hint else ""))
            return fn(*args, **kwargs)

        checked.keywords = frozenset(known)  # type: ignore[attr-defined]  # what tests/test_vocabulary.py compares with the CLI
        return checked

    return decorate


@_keywords()
def load(model: Any = None, *, preset: str | None = None, hf_config: str | Path | None = None,
         config: str | Path | None = None, revision: str | None = None) -> tuple[ModelConfig, Any]:
    """(ModelConfig, job file or None) from a ModelConfig, a dict of its fields, or a string as
    the CLI's MODEL takes it (a preset name, a path: tcalc YAML, config.json, checkpoint folder,
    .gguf file; or a Hugging Face repo id org/name[@revision]), or from exactly one of the
    keywords preset=, hf_config=, config= (the CLI's --preset, --hf-config, --config)."""
    src = load_source(model, preset=preset, hf_config=hf_config, config=config, revision=revision)
    return src.model, src.job


@_keywords()
def load_source(model: Any = None, *, preset: str | None = None, hf_config: str | Path | None = None,
                config: str | Path | None = None, revision: str | None = None,
                overrides: dict[str, Any] | None = None) -> Any:
    """As `load`, the whole `sources.Source`: the model, its job file and its checkpoint (the bytes
    a folder, repo or GGUF file stores); `overrides` (ModelConfig fields) are applied and the model
    re-validated, as the CLI's model flags are."""
    from transformer_calc.sources.resolve import Source, load_source as resolve

    if overrides:
        from transformer_calc.model.config import build_model, merge_spec

        if isinstance(model, ModelConfig):
            return Source(build_model(merge_spec(model.given, overrides) | {"name": None}), None, None, None, "model")
        if isinstance(model, dict):
            return Source(build_model(merge_spec(dict(model), overrides)), None, None, None, "model")

    given = [x for x in (model, preset, hf_config, config) if x is not None]
    if len(given) != 1:
        raise TypeError("give the model once: a positional model, preset=, hf_config= or config=")
    if isinstance(model, ModelConfig):
        return Source(model, None, None, None, "model")
    if isinstance(model, dict):
        from transformer_calc.model.config import build_model

        return Source(build_model(dict(model)), None, None, None, "model")
    if model is not None and not isinstance(model, (str, Path)):
        raise TypeError(f"model must be a preset name, a path, a repo id, a ModelConfig or a dict, not {type(model).__name__}")
    return resolve(str(model) if model is not None else None, preset=preset,
                   hf_config=Path(hf_config) if hf_config is not None else None,
                   config=Path(config) if config is not None else None, revision=revision, overrides=overrides)


def _source(model: Any, options: dict[str, Any]) -> tuple[ModelConfig, Any]:
    """load() with the model keywords taken out of a function's **options."""
    src = _full_source(model, options)
    return src.model, src.job


def _overrides(options: dict[str, Any]) -> dict[str, Any]:
    """The model overrides among a function's keywords (taken out of them), as ModelConfig fields."""
    out = {field: options.pop(key) for key, field in OVERRIDE_FIELDS.items() if options.get(key) is not None}
    for key in OVERRIDE_FIELDS:
        options.pop(key, None)
    extra = options.pop("set", None)
    if extra is not None:
        if not isinstance(extra, dict):
            raise TypeError(f"set= takes a dict of model fields, e.g. set={{'mlp': 'swiglu'}}, not {type(extra).__name__}")
        from transformer_calc.model.config import ALIASES

        for key, value in extra.items():
            field: str = ALIASES.get(str(key)) or str(key)
            if field in out:
                raise TypeError(f"{field} is given twice (a keyword and set=); give it once")
            out[field] = value
    return out


def _full_source(model: Any, options: dict[str, Any]) -> Any:
    overrides = _overrides(options)
    return load_source(model, **{k: options.pop(k) for k in _SOURCE_KEYS if k in options}, overrides=overrides)


def _command_source(model: Any, options: dict[str, Any]) -> str | None:
    """The model as `tcalc` would take it on a command line (plan's best_command), or None for a
    ModelConfig or a dict: `--preset NAME` for a preset name, else the path or repo id as MODEL."""
    import shlex

    flags = [f"--{key.replace('_', '-')} {shlex.quote(str(options[key]))}" for key in OVERRIDE_FIELDS
             if options.get(key) is not None]
    flags += [f"--set {shlex.quote(f'{k}={v}')}" for k, v in (options.get("set") or {}).items()]
    tail = "".join(" " + f for f in flags)
    for key in ("preset", "config", "hf_config"):
        if options.get(key) is not None:
            return f"--{key.replace('_', '-')} {shlex.quote(str(options[key]))}" + tail
    if not isinstance(model, (str, Path)):
        return None
    text = str(model)
    if Path(text).exists() or "/" in text:  # a file or folder, or a Hub repo id
        words = [text] + (["--revision", str(options["revision"])] if options.get("revision") is not None else [])
        return shlex.join(words) + tail
    return f"--preset {shlex.quote(text)}" + tail





def _canonical(options: dict[str, Any]) -> dict[str, Any]:
    """The options that were given (not None), under their descriptive names."""
    return {SECTION_ALIASES.get(k, k): v for k, v in options.items() if v is not None}




@_keywords()
def params(model: Any = None, *, dtype: str | None = None, p: int | None = None, T: int = 1,
           **source: Any) -> ParamsResult:
    """`tcalc params`: exact parameter count with its breakdown (the weights line in `dtype`, or p
    bytes per value; bf16)."""
    from transformer_calc.devices.hardware import COMPUTE_DTYPE_BYTES, compute_dtype
    from transformer_calc.results.params import params_report

    name = compute_dtype(dtype, p) or "bf16"
    src = _full_source(model, source)
    return params_report(src.model, bytes_per_param=COMPUTE_DTYPE_BYTES[name], T=T, dtype=name,
                         checkpoint=source_checkpoint(src))


MEMORY_OPTIONS = (*(k for k in TRAINING_KEYS if k != "gpu"), "dtype", *_SOURCE_KEYS)


@_keywords(*MEMORY_OPTIONS)
def memory(model: Any = None, *, gpu: str | None = None, **options: Any) -> MemoryResult:
    """`tcalc memory`: the peak training memory per GPU (options: S, B, precision, dtype, p,
    grad_bytes, optimizer, recompute, flash, dropout, activations, head, framework, cross_entropy,
    micro_batches, fused_optimizer, T, sp, P, dp, zero, ep, etp, cp, finetune, lora_rank, lora_alpha,
    lora_targets, train_embeddings, train_head, fp32_unquantized, offload, offload_device, fp8_recipe;
    the job-file keys, each also by its descriptive name)."""
    from transformer_calc.results.memory import memory_command

    src = _full_source(model, options)
    return memory_command(src, _canonical(options) | ({"gpu": gpu} if gpu is not None else {}))


@_keywords()
def flops(model: Any = None, *, S: int | None = None, B: int | None = None, causal: bool = False,
          windowed: bool = False, recompute: str | None = None, tokens: int | None = None, gpus: int | None = None, gpu: str | None = None,
          dtype: str | None = None, p: int | None = None, mfu: float | None = None, budget: int | None = None,
          **source: Any) -> FlopsResult:
    """`tcalc flops`: model and hardware FLOPs of a step, and a training-time estimate."""
    from transformer_calc.devices.hardware import compute_dtype
    from transformer_calc.results.flops import flops_request

    m, job = _source(model, source)
    report = flops_request(m, job.training if job else {}, S=S, B=B, recompute=recompute, causal=causal,
                           windowed=windowed, tokens=tokens, gpus=gpus, gpu_name=gpu, dtype=compute_dtype(dtype, p),
                           mfu=mfu, budget=budget)
    return report


# The expected-latency and serving-capacity settings `tcalc inference` and `tcalc serve` share.
EXPECTED_OPTIONS = ("matmul_efficiency", "memory_efficiency", "cuda_graphs", "kernel_launch_s", "sequence_overhead_s",
                    "node_size", "inter_node_gb_s")
SERVING_OPTIONS = ("block_size", "memory_utilization", "max_num_batched_tokens", "max_num_seqs", "cuda_context",
                   "activation_peak", "engine_workspace")
INFERENCE_OPTIONS = ("batch_size", "seq_len", "new_tokens", "tensor", "expert", "gpu", "dtype", "p", "weight_dtype",
                     "kv_dtype", "cache_kv_heads", "kv_cache", "mla_cache", *EXPECTED_OPTIONS, *SERVING_OPTIONS,
                     "draft", "mtp", "speculative_tokens", "acceptance_rate", *_SOURCE_KEYS)


@_keywords(*INFERENCE_OPTIONS, aliases={"prompt_len": "seq_len", "output_len": "new_tokens"})
def inference(model: Any = None, **options: Any) -> InferenceResult:
    """`tcalc inference` (options: B, S, new_tokens, T, ep, gpu, dtype, p, weight_dtype, kv_dtype, cache_kv_heads,
    kv_cache, mla_cache; expected latency: matmul_efficiency, memory_efficiency, cuda_graphs,
    kernel_launch_s, sequence_overhead_s, node_size, inter_node_gb_s; serving: block_size,
    memory_utilization, ...; speculative: draft, mtp, speculative_tokens, acceptance_rate)."""
    from transformer_calc.results.inference import inference_command

    src = _full_source(model, options)
    return inference_command(src, _canonical(options))


@_keywords("expert", "dtype", "p", "weight_dtype", "kv_dtype", *EXPECTED_OPTIONS, *SERVING_OPTIONS, *_SOURCE_KEYS,
           aliases={"S": "prompt_len", "seq_len": "prompt_len", "new_tokens": "output_len"})
def serve(model: Any = None, *, prompt_len: int | None = None, output_len: int | None = None, gpus: int | None = None,
          gpu: str | None = None, ttft_s: float | None = None, tpot_s: float | None = None,
          request_rate: float | None = None, T: int | None = None, B: int | None = None, **options: Any) -> ServeResult:
    """`tcalc serve`: layouts of `gpus` GPUs against TTFT/TPOT targets (options as `inference`:
    ep, dtype, p, weight_dtype, kv_dtype, the expected-latency and serving-capacity settings); each
    a keyword, then a job file's inference: section, then the default, as the command."""
    from transformer_calc.results.serve import serve_request

    src = _full_source(model, options)
    flags = _canonical(options) | _canonical(dict(seq_len=prompt_len, new_tokens=output_len, gpu=gpu, tensor=T,
                                                  batch_size=B))
    return serve_request(src.model, src.job.inference if src.job else {}, flags, src.checkpoint,
                         checkpoint_section=source_checkpoint(src), ttft_s=ttft_s, tpot_s=tpot_s,
                         request_rate=request_rate, gpus=gpus)


@_keywords(aliases={"B": "micro_batch", "batch_size": "micro_batch"})
def train(model: Any = None, *, global_batch: int | None = None, global_batch_tokens: int | None = None,
          gpus: int | None = None, gpu: str | None = None, S: int | None = None, micro_batch: int | None = None,
          T: int | None = None, P: int | None = None, virtual_stages: int | None = None, cp: int | None = None,
          ep: int | None = None, sp: bool | None = None, zero: int | None = None, recompute: str | None = None,
          flash: bool | None = None, precision: str | None = None, dtype: str | None = None, p: int | None = None,
          framework: str | None = None, finetune: str | None = None, lora_rank: int | None = None,
          lora_targets: str | None = None, offload: str | None = None, offload_device: str | None = None,
          fp8_recipe: str | None = None, matmul_efficiency: float | None = None, node_size: int | None = None,
          inter_node_gb_s: float | None = None, tokens: int | None = None, price_per_gpu_hour: float | None = None,
          optimizer: str | None = None, grad_bytes: int | None = None, activations: str | None = None,
          cross_entropy: str | None = None, dropout: bool | None = None, head: bool | None = None,
          fused_optimizer: bool | None = None, etp: int | None = None, lora_alpha: float | None = None,
          train_embeddings: bool | None = None, train_head: bool | None = None, fp32_unquantized: bool | None = None,
          **source: Any) -> TrainResult:
    """`tcalc train`: the step time of a layout (global_batch in sequences, or global_batch_tokens).
    Settings as the command's: a keyword, then a job file's training: section, then the default."""
    from transformer_calc.requests.training import train_flags
    from transformer_calc.results.train import train_command

    src = _full_source(model, source)
    flags = train_flags(locals())
    return train_command(src, flags, gpus=gpus, global_batch_of=lambda seq: _sequences(global_batch, global_batch_tokens, seq),
                         node_size=node_size, inter_node_gb_s=inter_node_gb_s, matmul_efficiency=matmul_efficiency,
                         tokens=tokens, price_per_gpu_hour=price_per_gpu_hour)


@_keywords()
def plan(model: Any = None, *, global_batch: int | None = None, global_batch_tokens: int | None = None, gpus: int = 8,
         gpu: str | None = None, S: int | None = None, top: int = 10, flash: bool | None = None,
         framework: str | None = None, finetune: str | None = None, lora_rank: int | None = None,
         lora_targets: str | None = None, node_size: int | None = None, inter_node_gb_s: float | None = None,
         **source: Any) -> PlanResult:
    """`tcalc plan`: the fastest layouts that fit (global_batch in sequences, or global_batch_tokens).
    Settings as train's; the layout keys of a job file's training: section are plan's to choose."""
    from transformer_calc.results.train import plan_command

    text = _command_source(model, source)
    src = _full_source(model, source)
    flags = dict(seq_len=S, flash=flash, framework=framework, finetune=finetune, lora_rank=lora_rank,
                 lora_targets=lora_targets, gpu=gpu)
    return plan_command(src, flags, gpus=gpus, global_batch_of=lambda seq: _sequences(global_batch, global_batch_tokens, seq),
                        top=top, node_size=node_size, inter_node_gb_s=inter_node_gb_s, source_text=text)


def _sequences(global_batch: int | None, global_batch_tokens: int | None, S: int) -> int:
    """The global batch in sequences: given, or whole sequences of S in the tokens (as the CLI)."""
    from transformer_calc.errors import TcalcError

    if global_batch is not None and global_batch_tokens is None:
        return global_batch
    if global_batch_tokens is None or global_batch is not None:  # neither, or both
        raise TcalcError("give the global batch once: global_batch (sequences) or global_batch_tokens")
    if global_batch_tokens < S:
        raise TcalcError(f"global_batch_tokens ({global_batch_tokens}) is less than one sequence of S = {S} tokens")
    return global_batch_tokens // S


@_keywords()
def mfu(model: Any = None, *, S: int | None = None, gpus: int = 1, gpu: str = "a100-80gb", dtype: str | None = None,
        p: int | None = None, global_batch: int | None = None, global_batch_tokens: int | None = None,
        step_time: float | None = None, tokens_per_s: float | None = None, recompute: str | None = None,
        causal: bool = False, hfu_convention: str = "executed", **source: Any) -> MfuResult:
    """`tcalc mfu`: MFU and HFU from a measured step time (with the global batch, in sequences or
    tokens) or a throughput in tokens/s."""
    from transformer_calc.devices.hardware import compute_dtype
    from transformer_calc.results.flops import mfu_request

    m, job = _source(model, source)
    report = mfu_request(m, job.training if job else {}, S=S, gpus=gpus, gpu_name=gpu, dtype=compute_dtype(dtype, p),
                         global_batch=global_batch, global_batch_tokens=global_batch_tokens, step_time=step_time,
                         tokens_per_s=tokens_per_s, recompute=recompute, causal=causal, hfu_convention=hfu_convention)
    return report


@_keywords()
def check(*files: str | Path, gpu: str | None = None, max_memory: str | None = None,
          min_tokens_per_s: float | None = None, max_ttft_s: float | None = None,
          max_tpot_s: float | None = None) -> CheckResult:
    """`tcalc check FILES`: each job file PASS / FAIL / INVALID (the CLI exits 2 if any is invalid,
    else 1 if any check failed, else 0)."""
    from transformer_calc.results.check import check_report

    return check_report([Path(f) for f in files], gpu, max_memory, min_tokens_per_s, max_ttft_s, max_tpot_s)


@_keywords()
def presets() -> PresetsResult:
    """`tcalc presets`: the model presets with their key numbers and sources."""
    from transformer_calc.results.catalog import presets_report

    return presets_report()


@_keywords()
def hardware(name: str | None = None) -> HardwareResult:
    """`tcalc hardware [NAME]`: the accelerator table, or one accelerator in detail."""
    from transformer_calc.results.catalog import gpu_report, hardware_report

    return hardware_report() if name is None else gpu_report(name)


SWEEP_AXES = ("batch_size", "seq_len", "tensor", "pipeline", "data", "zero", "expert", "context", "recompute", "flash",
              "gpu", "dtype", "weight_dtype")


@_keywords(*SWEEP_AXES, *TRAINING_SETTINGS, *PARALLEL_SETTINGS, *INFERENCE_SETTINGS, *_SOURCE_KEYS)
def sweep(model: Any = None, *, models: list[Any] | None = None, metrics: list[str] | str | None = None,
          tokens: int | None = None, mfu: float | None = None, fits_only: bool = False, sort: str | None = None,
          limit: int | None = None, **options: Any) -> SweepResult:
    """`tcalc sweep`: a grid, one row per point (options: the axes B, S, T, P, dp, zero, ep, cp,
    recompute, flash, gpu, dtype, weight_dtype, each one value, a list, or the CLI's text such as
    "1,2,4..64"; the fixed settings precision, p, grad_bytes, optimizer, dropout, activations,
    head (head_activations), framework, cross_entropy, micro_batches, fused_optimizer, finetune,
    lora_rank, lora_targets, sp, etp, virtual_stages, new_tokens, kv_dtype, cache_kv_heads, kv_cache,
    mla_cache). `model` is one model (see `load`; `revision=` for a repo id); `models` several,
    labelled by preset name (or the model's name); or preset= (a list, or names comma-separated),
    config=, hf_config= as the CLI's --preset, --config, --hf-config."""
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.common import peak_for
    from transformer_calc.estimators.sweep import prepare
    from transformer_calc.results.sweep import sweep_report

    loaded: dict[str, ModelConfig] = {}
    job = None
    overrides = _overrides(options)  # the model flags, applied to every model (as the CLI's)
    presets = options.pop("preset", None)  # the CLI's --preset (a list or comma-separated), --config, --hf-config
    names = [n.strip() for n in presets.split(",")] if isinstance(presets, str) else list(presets or [])
    files = [Path(options.pop(k)) for k in ("config", "hf_config") if options.get(k) is not None]
    options.pop("config", None), options.pop("hf_config", None)
    revision = options.pop("revision", None)  # the CLI's --revision: of the positional models (repo ids)
    positional = ([model] if model is not None else []) + list(models or [])
    for source in positional + names + files:
        src = load_source(source, revision=revision if source in positional else None, overrides=overrides)
        m, found = src.model, src.job
        job = job or found
        label = source if isinstance(source, str) and Path(source).suffix not in (".yaml", ".yml", ".json") else None
        if label is not None:
            from transformer_calc.sources.presets import resolve_preset

            label = resolve_preset(label)
        loaded[label or m.name or str(source)] = m
    canon = _canonical(options)
    axes = {k: _axis_text(canon.pop(k)) for k in SWEEP_AXES if k in canon}
    settings = {**canon}
    run = prepare(loaded, axes, settings, metrics.split(",") if isinstance(metrics, str) else metrics, job,
                  tokens=tokens, mfu=mfu, fits_only=fits_only, sort=sort, limit=limit, gpu_lookup=find_gpu,
                  peak=peak_for)
    return sweep_report(run)


def schema(command: str) -> dict[str, Any]:
    """`tcalc schema COMMAND`: the JSON Schema of a command's result (what `--format json` writes
    and `model_dump(mode="json")` returns), e.g. `tc.schema("memory")`."""
    from transformer_calc.results import result_schema

    return result_schema(command)


def _axis_text(value: Any) -> Any:
    """An axis given as one value, a list, or the CLI's text: the list form parse_values reads."""
    if isinstance(value, (list, tuple)):
        return [str(v).lower() if isinstance(v, bool) else v for v in value]
    if isinstance(value, bool):
        return [str(value).lower()]
    return value if isinstance(value, str) else [value]
