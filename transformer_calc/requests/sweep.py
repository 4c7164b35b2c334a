"""`tcalc sweep`: its request (models, the grid's axes, the settings of every point) and the models
it prices."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar

from transformer_calc.errors import TcalcError, clip
from transformer_calc.requests.base import checked_job, count, fraction, opt, whole
from transformer_calc.requests.model import MODEL, OUTPUT, ModelRequest
from transformer_calc.requests.inference import InferenceRequest
from transformer_calc.requests.training import Finetune, LoraRank, LoraTargets, MemoryRequest

SWEEP = "Grid (comma lists; a..b doubles, a..b:s steps)"
SWEEP_TRAINING = "Training, every point (as tcalc memory)"
SWEEP_INFERENCE = "Inference, every point (as tcalc inference)"


def axis(value: Any) -> Any:
    """An axis as given: the CLI's text ("1,2,4..64"), or the API's one value or list."""
    if isinstance(value, (list, tuple)):
        bad = next((v for v in value if not isinstance(v, (str, int, float))), None)
        if bad is not None:  # a nested list (or a 5,000-deep one) is no axis value
            raise ValueError(f"takes one value or a list of values (numbers or names), not a list holding {clip(bad, 30)}")
        return [str(v).lower() if isinstance(v, bool) else v for v in value]
    if not isinstance(value, (str, int, float)):
        raise ValueError(f"takes one value or a list of values (numbers or names), not {type(value).__name__}")
    if isinstance(value, bool):
        return [str(value).lower()]
    return value if isinstance(value, str) else [value]


def names(value: Any) -> list[Any]:
    """One model or several (a list), or names comma-separated in one string (--preset a,b)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    out: list[Any] = []
    for item in items:
        if isinstance(item, str) and "," in item:
            parts = [n.strip() for n in item.split(",")]
            if not all(parts):
                raise ValueError(f"{clip(item)}: empty name in the list")
            out += parts
        else:
            out.append(item)
    return out


def _metrics(value: Any) -> list[str]:
    if isinstance(value, str):
        return [m.strip() for m in value.split(",")]
    if isinstance(value, (list, tuple)) and all(isinstance(m, str) for m in value):
        return list(value)
    raise ValueError("takes metric names, comma-separated or a list")


def _one(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


Axis = Any


class SweepRequest(ModelRequest):
    """`tcalc sweep`: a grid over models and axes; every point priced as memory, flops, inference."""

    command = "sweep"
    common = ('model', 'batch_size', 'seq_len', 'tensor', 'gpu', 'metrics', 'fits_only')  # the options shown first (help, MCP schema)
    model: Annotated[list[Any] | None, opt(help="Models, as every command takes them: presets, Hugging Face repo ids, checkpoint folders, .gguf files, config.json files \\[default: none; or --preset/--config/--hf-config].", metavar="[MODEL]...", parse=_one, job=False, repeat=True)] = None
    models: Annotated[list[Any] | None, opt(help="Several models (the Python API's list; the CLI takes several MODEL arguments).", parse=_one, job=False, cli=False)] = None
    preset: Annotated[list[str] | None, opt("--preset", help="Model presets (repeat or comma-separate) \\[default: none; or --config/--hf-config].", panel=MODEL, parse=names, job=False, repeat=True)] = None  # type: ignore[assignment]
    config: Annotated[Path | None, opt("--config", help="tcalc YAML job file: its model:, training: and inference: sections \\[default: none].", panel=MODEL, job=False)] = None
    batch_size: Annotated[Axis, opt("--B", "--batch-size", help="B values, e.g. 1,2,4..64 \\[default: the job file's, else 1].", panel=SWEEP, parse=axis)] = None
    seq_len: Annotated[Axis, opt("--S", "--seq-len", "--prompt-len", help="S values (the prompt for inference metrics), e.g. 2k,8k \\[default: the job file's, else each model's max_seq_len].", panel=SWEEP, parse=axis)] = None
    tensor: Annotated[Axis, opt("--T", "--tensor-parallel", help="T values \\[default: the job file's, else 1].", panel=SWEEP, parse=axis)] = None
    pipeline: Annotated[Axis, opt("--P", "--pipeline-parallel", help="P values \\[default: the job file's, else 1].", panel=SWEEP, parse=axis)] = None
    data: Annotated[Axis, opt("--dp", "--data-parallel", help="Data-parallel values \\[default: the job file's, else 1].", panel=SWEEP, parse=axis)] = None
    zero: Annotated[Axis, opt("--zero", help="ZeRO stages \\[default: the job file's, else the framework's: 1 megatron, 3 torchtitan, 0 pytorch and deepspeed].", panel=SWEEP, parse=axis)] = None
    expert: Annotated[Axis, opt("--ep", "--expert-parallel", help="Expert-parallel values (MoE) \\[default: the job file's, else 1].", panel=SWEEP, parse=axis)] = None
    context: Annotated[Axis, opt("--cp", "--context-parallel", help="Context-parallel values \\[default: the job file's, else 1].", panel=SWEEP, parse=axis)] = None
    recompute: Annotated[Axis, opt("--recompute", help="none, selective, full, op \\[default: the job file's, else none].", panel=SWEEP, parse=axis)] = None
    flash: Annotated[Axis, opt("--flash", help="true, false \\[default: the job file's, else true (false with --activations seed)].", panel=SWEEP, parse=axis)] = None
    gpu: Annotated[Axis, opt("--gpu", help="GPUs, e.g. a100-80gb,h100 \\[default: the job file's, else h100].", panel=SWEEP, parse=axis)] = None
    dtype: Annotated[Axis, opt("--dtype", help="Compute dtypes: the dense peak of train_days and of the inference roofline \\[default: bf16 (fp16 without bf16) for train_days; from the weight dtype for inference].", panel=SWEEP, parse=axis)] = None
    weight_dtype: Annotated[Axis, opt("--weight-dtype", help="Inference weight dtypes: fp32 fp16 bf16 fp8 int8 int4 \\[default: the job file's, else the compute dtype (--dtype), else bf16].", panel=SWEEP, parse=axis)] = None
    metrics: Annotated[list[str] | None, opt("--metrics", help="Comma list: peak_bytes weights_bytes activations_bytes fits headroom_bytes model_flops hardware_flops train_days kv_cache_bytes inference_memory_bytes inference_fits time_to_first_token_s time_per_output_token_s decode_tokens_per_s decode_bound tokens_per_s total_s max_concurrent_sequences \\[default: peak_bytes,model_flops (+ fits with --gpu)].", parse=_metrics, job=False)] = None
    precision: Annotated[str | None, opt("--precision", help="mixed | fp32 | bf16 \\[default: mixed].", panel=SWEEP_TRAINING)] = None
    p: Annotated[int | None, opt("--p", help="p: bytes per activation/compute-weight element; 4 implies fp32 \\[default: from --precision].", panel=SWEEP_TRAINING, parse=whole)] = None
    grad_bytes: Annotated[int | None, opt("--grad-bytes", help="Bytes per gradient \\[default: 4 mixed (seed), 4 fp32, 2 bf16].", panel=SWEEP_TRAINING, parse=whole)] = None
    optimizer: Annotated[str | None, opt("--optimizer", help="adamw | adam | sgd | sgd-momentum | lion | adam-8bit \\[default: adamw].", panel=SWEEP_TRAINING)] = None
    dropout: Annotated[bool | None, opt("--dropout/--no-dropout", help="Dropout masks kept \\[default: the model's dropout > 0].", panel=SWEEP_TRAINING)] = None
    activations: Annotated[str | None, opt("--activations", help="default | seed | torch-eager \\[default: default].", panel=SWEEP_TRAINING)] = None
    head_activations: Annotated[bool | None, opt("--head/--no-head", help="Count embedding, final-norm, head and loss activations \\[default: on].", panel=SWEEP_TRAINING)] = None
    framework: Annotated[str | None, opt("--framework", help="megatron | pytorch | deepspeed | torchtitan \\[default: megatron].", panel=SWEEP_TRAINING)] = None
    cross_entropy: Annotated[str | None, opt("--cross-entropy", help="eager | fused | chunked \\[default: fused for megatron, else eager].", panel=SWEEP_TRAINING)] = None
    micro_batches: Annotated[int | None, opt("--micro-batches", help="Micro-batches per optimizer step \\[default: P, or 1].", panel=SWEEP_TRAINING, parse=whole)] = None
    fused_optimizer: Annotated[bool | None, opt("--fused-optimizer/--foreach-optimizer", help="Fused optimizer step \\[default: foreach for pytorch, fused otherwise].", panel=SWEEP_TRAINING)] = None
    sequence_parallel: Annotated[bool | None, opt("--sp/--no-sp", help="Sequence parallelism (with T) \\[default: on with T > 1 under megatron and torchtitan, else off].", panel=SWEEP_TRAINING)] = None
    expert_tensor: Annotated[int | None, opt("--etp", "--expert-tensor-parallel", help="Tensor-parallel ranks of one expert \\[default: T].", panel=SWEEP_TRAINING, parse=whole)] = None
    virtual_stages: Annotated[int | None, opt("--virtual-stages", help="Interleaved model chunks per pipeline stage \\[default: the job file's, else 1].", panel=SWEEP_TRAINING, parse=whole)] = None
    finetune: Finetune = None
    lora_rank: LoraRank = None
    lora_targets: LoraTargets = None
    tokens: Annotated[int | None, opt("--tokens", help="train_days: the token budget, e.g. 300e9 \\[default: none].", panel=SWEEP_TRAINING, parse=count, job=False)] = None
    mfu: Annotated[float | None, opt("--mfu", help="train_days: assumed MFU \\[default: 0.4].", panel=SWEEP_TRAINING, parse=fraction, job=False)] = None
    new_tokens: Annotated[int | None, opt("--new-tokens", "--output-len", help="Tokens generated per sequence \\[default: 1].", panel=SWEEP_INFERENCE, parse=whole)] = None
    kv_dtype: Annotated[str | None, opt("--kv-dtype", help="KV-cache dtype \\[default: the activation dtype].", panel=SWEEP_INFERENCE)] = None
    cache_kv_heads: Annotated[int | None, opt("--cache-kv-heads", help="K/V heads the cache holds, weights unchanged \\[default: the model's].", panel=SWEEP_INFERENCE, parse=whole)] = None
    kv_cache: Annotated[bool | None, opt("--kv-cache/--no-kv-cache", help="--no-kv-cache: every token reprocesses the context \\[default: on].", panel=SWEEP_INFERENCE)] = None
    mla_cache: Annotated[str | None, opt("--mla-cache", help="MLA models: latent | decompressed \\[default: latent].", panel=SWEEP_INFERENCE)] = None
    engine: Annotated[str | None, opt("--engine", help="Serving engine of max_concurrent_sequences (its paged KV cache): vllm | sglang | trtllm \\[default: vllm].", panel=SWEEP_INFERENCE)] = None
    fits_only: Annotated[bool, opt("--fits-only", help="Keep only the points that fit the GPU \\[default: off].", panel=OUTPUT, job=False)] = False
    sort: Annotated[str | None, opt("--sort", help="Sort by a column; -column for descending \\[default: grid order, streamed].", panel=OUTPUT, job=False)] = None
    limit: Annotated[int | None, opt("--limit", help="Show at most this many rows \\[default: all].", panel=OUTPUT, parse=whole, job=False)] = None
    plot: Annotated[Path | None, opt("--plot", help="Write a figure (png, svg, pdf; needs the plot extra) \\[default: none].", panel=OUTPUT, job=False, api=False)] = None
    x: Annotated[str | None, opt("--x", help="Plot: x axis \\[default: the first axis that varies].", panel=OUTPUT, job=False, api=False)] = None
    y: Annotated[str | None, opt("--y", help="Plot: the metric \\[default: the first numeric metric].", panel=OUTPUT, job=False, api=False)] = None
    series: Annotated[str | None, opt("--series", help="Plot: one line per value of this axis \\[default: the next axis that varies].", panel=OUTPUT, job=False, api=False)] = None

    AXES: ClassVar[tuple[str, ...]] = ("batch_size", "seq_len", "tensor", "pipeline", "data", "zero", "expert", "context", "recompute", "flash",
            "gpu", "dtype", "weight_dtype")

    def axes(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.AXES}

    def fixed(self) -> dict[str, Any]:
        """The settings of every point (job-file keys that are not axes)."""
        return {name: value for name, value in self.given().items() if name not in self.AXES}

    def models_of(self) -> tuple[dict[str, Any], Any]:
        """({label: ModelConfig}, job file or None): each positional model, each --preset, and
        --config or --hf-config, with the model overrides applied to every one; the job file is the
        first source's that has one."""
        from transformer_calc.model.config import ModelConfig
        from transformer_calc.sources.presets import resolve_preset
        from transformer_calc.sources.resolve import load_source

        overrides = self.overrides()
        positional = [*(self.model or []), *(self.models or [])]
        if self.revision is not None and not positional:
            raise TcalcError(f"--revision {clip(self.revision)} needs a Hugging Face repo id as MODEL (org/name)")
        out: dict[str, Any] = {}
        job = None

        def add(label: str, src: Any, where: str) -> None:
            nonlocal job
            job = job or checked_job(src.job, MemoryRequest, InferenceRequest)
            out[label if label not in out else f"{label} ({where})"] = src.model

        for item in positional:
            src = load_source(item, revision=self.revision, overrides=overrides, text_only=self.text_only,
                              hub_timeout=self.hub_timeout)
            from transformer_calc.results.common import check_checkpoint

            check_checkpoint(src.model, src.checkpoint)
            label = src.model.name or ("model" if isinstance(item, (ModelConfig, dict)) else str(item))
            add(label, src, str(item) if isinstance(item, (str, Path)) else "model")
        for name in self.preset or []:
            add(resolve_preset(name), load_source(None, preset=name, overrides=overrides, text_only=self.text_only), name)
        for key in ("config", "hf_config"):
            path = getattr(self, key)
            if path is not None:
                src = load_source(None, overrides=overrides, text_only=self.text_only, **{key: path})
                add(src.model.name or str(path), src, str(path))
        if not out and overrides:
            src = load_source(None, overrides=overrides)
            add(src.model.name or "model", src, "model")
        if not out:
            raise TcalcError("no model given; use --preset NAME[,NAME...], --config FILE or --hf-config FILE, "
                             "or give --L --D --A --V")
        return out, job
