"""The `tcalc` command line: parse -> config -> report -> render. The error boundary.

Every estimating command takes the same model source (`--preset` | `--config` | `--hf-config`)
and the same overrides, with the seed's letters as flags (`--L --D --A --E --V --K`) beside the
descriptive names. Bad input prints one `Error: ...` line on stderr and exits 2; nothing is
printed on stdout and no traceback is shown. Heavy modules are imported inside the commands.
"""

import os
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Optional, cast, overload

import typer

from transformer_calc import __version__
from transformer_calc.render.common import OutputFormat
from transformer_calc.results import RESULT_TYPES

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

def _parse_whole(text: Any, low: int, high: int | None = None, binary: bool = False) -> int:
    """An integer flag as people type it (8192, 8k, 4M, 1e3, 1_000): config.parse_whole, the one
    parser of whole numbers, its error a usage error naming the flag."""
    from transformer_calc.model.config import parse_whole

    try:
        return parse_whole(text, low=low, high=high, binary=binary)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _whole(text: Any) -> int:
    """A positive integer flag (counts, sizes, parallel degrees)."""
    return _parse_whole(text, 1)


def _length(text: Any) -> int:
    """A sequence length: 8k = 8192, 128k = 131072."""
    return _parse_whole(text, 1, binary=True)


def _zero_stage(text: Any) -> int:
    return _parse_whole(text, 0, 3)


app = typer.Typer(
    name="tcalc",
    help="Analytic cost calculator for decoder-only transformers: parameters, memory, FLOPs, "
    "KV cache and latency, from cited formulas.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

MODEL = "Model source"
OVERRIDES = "Model overrides (seed letters or descriptive names)"
OUTPUT = "Output"

# ---------------------------------------------------------------------------- shared options
ModelArg = Annotated[
    Optional[str],
    typer.Argument(
        metavar="MODEL", show_default=False,
        help="The model: a preset, a Hugging Face repo id (org/name[@revision]), a checkpoint folder "
        "(config.json + *.safetensors), a .gguf file, a config.json or a tcalc YAML \\[default: none: or --preset/--config/--hf-config].",
    ),
]
RevisionOpt = Annotated[
    Optional[str],
    typer.Option("--revision", help="Hub revision (branch, tag or commit) of a repo id MODEL \\[default: main].", rich_help_panel=MODEL),
]
PresetOpt = Annotated[
    Optional[str], typer.Option("--preset", help="Model preset name (see `tcalc presets`) \\[default: none: give one model source].", rich_help_panel=MODEL)
]
ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", help="tcalc YAML file describing the model \\[default: none].", rich_help_panel=MODEL),
]
HFConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--hf-config", help="Hugging Face config.json (read offline) \\[default: none].", rich_help_panel=MODEL),
]
LOpt = Annotated[Optional[int], typer.Option("--L", "--n-layers", help="L: transformer layers \\[default: the model's].", rich_help_panel=OVERRIDES, parser=_whole)]
DOpt = Annotated[Optional[int], typer.Option("--D", "--d-model", help="D: hidden size \\[default: the model's].", rich_help_panel=OVERRIDES, parser=_whole)]
AOpt = Annotated[Optional[int], typer.Option("--A", "--n-heads", help="A: attention heads \\[default: the model's].", rich_help_panel=OVERRIDES, parser=_whole)]
KVOpt = Annotated[
    Optional[int], typer.Option("--kv-heads", "--n-kv-heads", help="Key/value heads (GQA/MQA) \\[default: the model's].", rich_help_panel=OVERRIDES)
]
HeadDimOpt = Annotated[Optional[int], typer.Option("--head-dim", help="Per-head width \\[default: the model's, else D/A].", rich_help_panel=OVERRIDES, parser=_whole)]
EOpt = Annotated[
    Optional[float], typer.Option("--E", "--expansion", help="E: MLP expansion, d_ff = E*D \\[default: the model's].", rich_help_panel=OVERRIDES)
]
DffOpt = Annotated[Optional[int], typer.Option("--d-ff", help="MLP inner width \\[default: the model's, else E·D].", rich_help_panel=OVERRIDES, parser=_whole)]
VOpt = Annotated[Optional[int], typer.Option("--V", "--vocab-size", help="V: vocabulary size \\[default: the model's].", rich_help_panel=OVERRIDES, parser=_whole)]
KOpt = Annotated[
    Optional[int], typer.Option("--K", "--max-seq-len", help="K: block size (learned positions) \\[default: the model's].", rich_help_panel=OVERRIDES)
]
SetOpt = Annotated[
    Optional[list[str]],
    typer.Option("--set", help="Any model field: --set mlp=swiglu --set tied_embeddings=false \\[default: none].", rich_help_panel=OVERRIDES),
]
FormatOpt = Annotated[
    OutputFormat, typer.Option("--format", "-f", help="Output format.", rich_help_panel=OUTPUT, case_sensitive=False)
]


def _short(value: Any) -> str:
    from transformer_calc.sources.files import clip

    return clip(value)


def _parse_set(items: list[str] | None) -> dict[str, Any]:
    from transformer_calc.model.config import ALIASES
    from transformer_calc.errors import TcalcError

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise TcalcError(f"--set {_short(item)}: expected KEY=VALUE, e.g. --set mlp=swiglu")
        key = key.strip()
        field = ALIASES.get(key, key)
        if any(ALIASES.get(k, k) == field for k in out):
            raise TcalcError(f"--set gives {field} twice; keep one")
        out[key] = _scalar(raw)
    return out


def _scalar(raw: str) -> Any:
    """A --set value: JSON scalars first (1e3, true, null), then YAML (yes/no), else the string."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.sources.files import parse_json, parse_yaml

    if len(raw) > 4096:
        raise TcalcError(f"--set value of {len(raw):,} characters; give a short value")
    try:
        value = parse_json(raw, "--set")
    except TcalcError:
        try:
            value = parse_yaml(raw, "--set") if raw.strip() else raw
        except TcalcError:
            value = raw
    if value is None and raw.strip() not in ("null", "~", "Null", "NULL"):
        value = raw
    return value


def load_model(
    preset: str | None,
    config: Path | None,
    hf_config: Path | None,
    overrides: dict[str, Any],
    model: str | None = None,
    revision: str | None = None,
) -> tuple[Any, Any]:
    """(ModelConfig, JobFile or None): one source plus overrides, re-validated (sources.load_source)."""
    return _load_source(preset, config, hf_config, overrides, model, revision)[:2]


def _load_source(
    preset: str | None, config: Path | None, hf_config: Path | None, overrides: dict[str, Any],
    model: str | None = None, revision: str | None = None,
) -> tuple[Any, Any, Any]:
    from transformer_calc.sources.resolve import load_source

    src = load_source(model, preset=preset, config=config, hf_config=hf_config, revision=revision, overrides=overrides)
    return src.model, src.job, src


# The options every estimating command shares: one model source, then overrides.
MODEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("model", ModelArg), ("revision", RevisionOpt), ("preset", PresetOpt), ("config", ConfigOpt), ("hf_config", HFConfigOpt),
    ("L", LOpt), ("D", DOpt), ("A", AOpt), ("kv_heads", KVOpt), ("head_dim", HeadDimOpt),
    ("E", EOpt), ("d_ff", DffOpt), ("V", VOpt), ("K", KOpt), ("set_", SetOpt),
)
# option name -> ModelConfig field
_OVERRIDE_FIELDS = {
    "L": "n_layers", "D": "d_model", "A": "n_heads", "kv_heads": "n_kv_heads", "head_dim": "head_dim",
    "E": "expansion", "d_ff": "d_ff", "V": "vocab_size", "K": "max_seq_len",
}


class ModelArgs:
    """The model-source and override options of one invocation (see `model_options`)."""

    def __init__(self, **values: Any) -> None:
        self.values = values

    def overrides(self) -> dict[str, Any]:
        """The flags' model fields and --set's; one field given by both is a conflict."""
        from transformer_calc.model.config import ALIASES
        from transformer_calc.errors import TcalcError

        out = {field: self.values[name] for name, field in _OVERRIDE_FIELDS.items() if self.values[name] is not None}
        flag_of = {field: name for name, field in _OVERRIDE_FIELDS.items()}
        for key, value in _parse_set(self.values["set_"]).items():
            field = ALIASES.get(key, key)
            if field in out:
                raise TcalcError(
                    f"{field} is given twice: --{flag_of[field]} {out[field]} and --set {key}={_short(value)}; keep one"
                )
            out[field] = value
        return out

    def checkpoint(self) -> Any:
        """The loaded source's checkpoint (None: not a checkpoint, or overridden)."""
        return getattr(self, "source", None) and self.source.checkpoint

    def typed_checkpoint(self) -> Any:
        """The typed checkpoint section when the model came from a checkpoint, else None."""
        from transformer_calc.results.common import source_checkpoint

        src = getattr(self, "source", None)
        return None if src is None else source_checkpoint(src)

    def command_text(self) -> str:
        """The model source and overrides as they would be typed again (plan's best_command)."""
        import shlex

        v = self.values
        words = [v["model"]] if v["model"] is not None else []
        for name in ("revision", "preset", "config", "hf_config"):
            if v[name] is not None:
                words += [f"--{name.replace('_', '-')}", str(v[name])]
        for name in _OVERRIDE_FIELDS:
            if v[name] is not None:
                words += [f"--{name.replace('_', '-')}", str(v[name])]
        for item in v["set_"] or []:
            words += ["--set", item]
        return shlex.join(words)

    def load(self) -> tuple[Any, Any]:
        """(ModelConfig, JobFile or None), validated; the whole `sources.Source` is kept as `.source`
        (its checkpoint: the bytes a folder, repo or GGUF file stores)."""
        v = self.values
        model, job, self.source = _load_source(
            v["preset"], v["config"], v["hf_config"], self.overrides(), v["model"], v["revision"])
        return model, job


def model_options(command: Any) -> Any:
    """Give a command the shared model options, declared once: typer sees them as ordinary
    parameters (through the signature), the command receives them as one `source: ModelArgs`."""
    import functools
    import inspect

    own = [p for p in inspect.signature(command).parameters.values() if p.name != "source"]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
        for name, annotation in MODEL_OPTIONS
    ]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        source = ModelArgs(**{name: kwargs.pop(name) for name, _ in MODEL_OPTIONS})
        return command(source=source, **kwargs)

    del wrapper.__wrapped__  # typer must read the new signature, not the original one
    # typer reads the parameters from __signature__, which inspect honours but functions do not declare
    wrapper.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        shared + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    )
    wrapper.__annotations__ = {name: annotation for name, annotation in MODEL_OPTIONS} | {
        p.name: p.annotation for p in own
    }
    return wrapper


def emit(data: Any, fmt: OutputFormat, table: Any) -> None:
    """Write a command's typed result (results/): text formats are its JSON form
    (`model_dump(mode="json")`) as-is; tables through rich. A result that holds NaN or an infinity
    is an error, never output (JSON has no such numbers)."""
    from transformer_calc.sources.files import finite_or_error

    plain = data.model_dump(mode="json")
    finite_or_error(plain)
    if fmt is OutputFormat.table:
        from rich.console import Console

        from transformer_calc.render.common import checkpoint_table

        console = Console(file=cast(IO[str], _Stdout()))  # a file in all but name: the rest is sys.stdout's
        console.print(table(data))
        if getattr(data, "checkpoint", None) is not None:
            console.print(checkpoint_table(data.checkpoint))
    else:
        from transformer_calc.render.common import to_text

        write(to_text(plain, fmt))


class PipeClosed(Exception):
    """The reader of stdout went away. Not an OSError: click turns EPIPE into exit 1."""


class _Stdout:
    """sys.stdout for rich: a broken pipe becomes PipeClosed; everything else is delegated."""

    def write(self, text: str) -> int:
        return write(text)

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise PipeClosed() from None

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stdout, name)


def write(text: str) -> int:
    """Every byte of output goes through here (see PipeClosed)."""
    if sys.stdout is None:
        from transformer_calc.errors import TcalcError

        raise TcalcError("standard output is closed; redirect it to a file or /dev/null")
    try:
        return sys.stdout.write(text)
    except BrokenPipeError:
        raise PipeClosed() from None


def _version(value: bool) -> None:
    if value:
        write(f"tcalc {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """tcalc: analytic cost calculator for decoder-only transformers."""


# ---------------------------------------------------------------------------- commands
@app.command()
@model_options
def params(
    source: ModelArgs,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="Compute dtype of the weights line: fp32 | fp16 | bf16 | fp8 \\[default: bf16].")] = None,
    p: Annotated[Optional[int], typer.Option("--p", help="p: bytes per value of the compute dtype (4 fp32, 2 bf16, 1 fp8) \\[default: 2].", parser=_whole)] = None,
    T: Annotated[int, typer.Option("--T", "--tensor-parallel", min=1, help="T: tensor-parallel ranks.", parser=_whole)] = 1,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Exact parameter count, per component, beside the seed's approximations.

    Example: tcalc params --preset llama-2-7b --format json
    """
    from transformer_calc.devices.hardware import COMPUTE_DTYPE_BYTES, compute_dtype
    from transformer_calc.render.params import params_table
    from transformer_calc.results.params import params_report

    name = compute_dtype(dtype, p) or "bf16"
    model = source.load()[0]
    emit(params_report(model, bytes_per_param=COMPUTE_DTYPE_BYTES[name], T=T, dtype=name,
                       checkpoint=source.typed_checkpoint()), fmt, params_table)


WORKLOAD = "Workload"
TRAINING = "Training"
DTYPE_HELP = "Compute dtype: fp32 | fp16 | bf16 | fp8 (the design card's p: 4, 2, 2, 1 bytes per value)"
PHelp = "p: bytes per value of the compute dtype (4 fp32, 2 bf16, 1 fp8); the same as --dtype"
PARALLEL = "Parallelism"
FINETUNE = "Fine-tuning and offload"
FinetuneOpt = Annotated[Optional[str], typer.Option("--finetune", help="full | lora | qlora (NF4 base, double quantization) | dora \\[default: full].", rich_help_panel=FINETUNE)]
LoraRankOpt = Annotated[Optional[int], typer.Option("--lora-rank", help="r: the adapters' rank \\[default: 16].", rich_help_panel=FINETUNE, parser=_whole)]
LoraAlphaOpt = Annotated[Optional[float], typer.Option("--lora-alpha", help="alpha (scales adapters by alpha/r): recorded, no effect on memory \\[default: none].", rich_help_panel=FINETUNE)]
LoraTargetsOpt = Annotated[Optional[str], typer.Option("--lora-targets", help="Comma list of q,k,v,o,gate,up,down, all-linear (PEFT's: every Linear but the LM head), experts, router (MoE, PEFT target_parameters) \\[default: all-linear].", rich_help_panel=FINETUNE)]
TrainEmbOpt = Annotated[Optional[bool], typer.Option("--train-embeddings/--no-train-embeddings", help="Train the token embedding too (PEFT modules_to_save) \\[default: off].", rich_help_panel=FINETUNE)]
FP32UnqOpt = Annotated[Optional[bool], typer.Option("--fp32-unquantized/--no-fp32-unquantized", help="QLoRA: the parameters left unquantized (embeddings, LM head, norms) in fp32, as PEFT's prepare_model_for_kbit_training casts them \\[default: off].", rich_help_panel=FINETUNE)]
TrainHeadOpt = Annotated[Optional[bool], typer.Option("--train-head/--no-train-head", help="Train the LM head too (PEFT modules_to_save) \\[default: off].", rich_help_panel=FINETUNE)]
OffloadOpt = Annotated[Optional[str], typer.Option("--offload", help="none | optimizer (ZeRO-Offload: states, fp32 master, gradient partition) | optimizer+params (ZeRO-3) \\[default: none].", rich_help_panel=FINETUNE)]
OffloadDeviceOpt = Annotated[Optional[str], typer.Option("--offload-device", help="cpu (host memory) | nvme (ZeRO-Infinity) \\[default: cpu].", rich_help_panel=FINETUNE)]
FP8Opt = Annotated[Optional[str], typer.Option("--fp8-recipe", help="none | delayed | tensorwise | mxfp8 (Blackwell): FP8 GEMMs, FP8 weight copies, FP8-saved GEMM inputs (Transformer Engine) \\[default: none].", rich_help_panel=TRAINING)]
# Training settings memory and train share (one declaration each)
GradBytesOpt = Annotated[Optional[int], typer.Option("--grad-bytes", help="Bytes per gradient \\[default: 4 mixed (seed), 4 fp32, 2 bf16].", rich_help_panel=TRAINING, parser=_whole)]
OptimizerOpt = Annotated[Optional[str], typer.Option("--optimizer", help="adamw | adam | sgd | sgd-momentum | lion | adam-8bit | adamw-8bit | paged-adamw-8bit | adafactor | muon \\[default: adamw].", rich_help_panel=TRAINING)]
DropoutOpt = Annotated[Optional[bool], typer.Option("--dropout/--no-dropout", help="Dropout masks kept \\[default: the model's dropout > 0].", rich_help_panel=TRAINING)]
ActivationsOpt = Annotated[Optional[str], typer.Option("--activations", help="default | seed (exactly the seed's per-layer equations) | torch-eager \\[default: default].", rich_help_panel=TRAINING)]
HeadOpt = Annotated[Optional[bool], typer.Option("--head/--no-head", help="Count embedding, final-norm, head and loss activations \\[default: on].", rich_help_panel=TRAINING)]
CrossEntropyOpt = Annotated[Optional[str], typer.Option("--cross-entropy", help="Loss kernel: eager | fused (Megatron vocab-parallel) | chunked (Liger-style) \\[default: fused for megatron, else eager].", rich_help_panel=TRAINING)]
FusedOptimizerOpt = Annotated[Optional[bool], typer.Option("--fused-optimizer/--foreach-optimizer", help="Fused optimizer step (no temporaries) or PyTorch's foreach \\[default: foreach for pytorch, fused otherwise].", rich_help_panel=TRAINING)]
EtpOpt = Annotated[Optional[int], typer.Option("--etp", "--expert-tensor-parallel", help="Tensor-parallel ranks of one expert \\[default: T, as Megatron-core].", rich_help_panel=PARALLEL, parser=_whole)]
SOpt = Annotated[Optional[int], typer.Option("--S", "--seq-len", help="S: tokens per sequence (8k = 8192) \\[default: the model's max_seq_len].", rich_help_panel=WORKLOAD, parser=_length)]


@app.command()
@model_options
def memory(
    source: ModelArgs,
    S: SOpt = None,
    B: Annotated[Optional[int], typer.Option("--B", "--batch-size", help="B: micro-batch per GPU (sequences) \\[default: 1].", rich_help_panel=WORKLOAD, parser=_whole)] = None,
    precision: Annotated[Optional[str], typer.Option("--precision", help="mixed (16-bit + fp32 master, the seed's) | fp32 | bf16 (pure) \\[default: mixed; fp32 with --dtype fp32].", rich_help_panel=TRAINING)] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help=DTYPE_HELP + "; fp32 implies --precision fp32 \\[default: bf16].", rich_help_panel=TRAINING)] = None,
    p: Annotated[Optional[int], typer.Option("--p", help=PHelp + "; 4 implies fp32 \\[default: 2].", rich_help_panel=TRAINING, parser=_whole)] = None,
    grad_bytes: GradBytesOpt = None,
    optimizer: OptimizerOpt = None,
    recompute: Annotated[Optional[str], typer.Option("--recompute", help="none | selective | full (Korthikanti et al. 2022) \\[default: none].", rich_help_panel=TRAINING)] = None,
    flash: Annotated[Optional[bool], typer.Option("--flash/--no-flash", help="FlashAttention: no S×S scores kept \\[default: off].", rich_help_panel=TRAINING)] = None,
    dropout: DropoutOpt = None,
    activations: ActivationsOpt = None,
    head: HeadOpt = None,
    framework: Annotated[Optional[str], typer.Option("--framework", help="Peak-memory conventions: pytorch (eager/HF Trainer/FSDP2) | megatron | deepspeed \\[default: pytorch].", rich_help_panel=TRAINING)] = None,
    cross_entropy: CrossEntropyOpt = None,
    micro_batches: Annotated[Optional[int], typer.Option("--micro-batches", help="Micro-batches per optimizer step (gradients stay allocated across them) \\[default: P, or 1].", rich_help_panel=TRAINING, parser=_whole)] = None,
    fused_optimizer: FusedOptimizerOpt = None,
    T: Annotated[Optional[int], typer.Option("--T", "--tensor-parallel", help="T: tensor-parallel ranks \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    sp: Annotated[Optional[bool], typer.Option("--sp/--no-sp", help="Sequence parallelism (with T) \\[default: off].", rich_help_panel=PARALLEL)] = None,
    P: Annotated[Optional[int], typer.Option("--P", "--pipeline-parallel", help="P: pipeline stages (1F1B) \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    virtual_stages: Annotated[Optional[int], typer.Option("--virtual-stages", help="Interleaved model chunks per pipeline stage \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    dp: Annotated[Optional[int], typer.Option("--dp", "--data-parallel", help="Data-parallel replicas (for ZeRO) \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    zero: Annotated[Optional[int], typer.Option("--zero", help="ZeRO stage 0-3: shard optimizer; +gradients; +weights \\[default: 0].", rich_help_panel=PARALLEL, parser=_zero_stage)] = None,
    ep: Annotated[Optional[int], typer.Option("--ep", "--expert-parallel", help="Expert-parallel ranks: routed experts split ep ways (MoE) \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    etp: EtpOpt = None,
    cp: Annotated[Optional[int], typer.Option("--cp", "--context-parallel", help="Context-parallel ranks: the sequence split cp ways \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    finetune: FinetuneOpt = None,
    lora_rank: LoraRankOpt = None,
    lora_alpha: LoraAlphaOpt = None,
    lora_targets: LoraTargetsOpt = None,
    train_embeddings: TrainEmbOpt = None,
    train_head: TrainHeadOpt = None,
    fp32_unquantized: FP32UnqOpt = None,
    offload: OffloadOpt = None,
    offload_device: OffloadDeviceOpt = None,
    fp8_recipe: FP8Opt = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="Check the fit on this GPU, e.g. a100-80gb \\[default: none: no fit check].", rich_help_panel=OUTPUT)] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Training memory per GPU: weights, gradients, optimizer states, activations; fit finding.

    Example: tcalc memory --preset gpt3 --T 8 --sp --recompute selective --gpu a100-80gb
    """
    from transformer_calc.render.memory import memory_table
    from transformer_calc.results.memory import memory_command

    model, job = source.load()
    flags = dict(
        seq_len=S, batch_size=B, precision=precision, dtype=dtype, p=p, grad_bytes=grad_bytes, optimizer=optimizer,
        recompute=recompute, flash=flash, dropout=dropout, activations=activations, head_activations=head,
        framework=framework, cross_entropy=cross_entropy, micro_batches=micro_batches, fused_optimizer=fused_optimizer,
        tensor=T, sequence_parallel=sp, pipeline=P, virtual_stages=virtual_stages, data=dp, zero=zero, expert=ep,
        expert_tensor=etp, context=cp, gpu=gpu, finetune=finetune, lora_rank=lora_rank, lora_alpha=lora_alpha,
        lora_targets=lora_targets, train_embeddings=train_embeddings, train_head=train_head, offload=offload,
        offload_device=offload_device, fp8_recipe=fp8_recipe, fp32_unquantized=fp32_unquantized,
    )
    report = memory_command(source.source, flags)
    _note_seq_len(model, report.workload.seq_len, S is not None or bool(job and "seq_len" in job.training))
    emit(report, fmt, memory_table)


CausalOpt = Annotated[bool, typer.Option("--causal/--no-causal", help="Halve the attention scores and re-weighting FLOPs (Megatron, FlashAttention convention) \\[default: full, as eager PyTorch].")]
RecomputeOpt = Annotated[Optional[str], typer.Option("--recompute", help="none | selective | full: hardware FLOPs (Korthikanti et al. 2022) \\[default: none].")]
DtypeOpt = Annotated[Optional[str], typer.Option("--dtype", help=DTYPE_HELP + ", whose dense peak is the denominator \\[default: bf16, else fp16].")]
PeakPOpt = Annotated[Optional[int], typer.Option("--p", help=PHelp + " \\[default: 2].", parser=_whole)]


@overload
def _count(text: str, what: str) -> int: ...


@overload
def _count(text: str | None, what: str) -> int | None: ...


def _count(text: str | None, what: str) -> int | None:
    from transformer_calc.model.config import parse_count
    from transformer_calc.errors import TcalcError

    if text is None:
        return None
    try:
        return parse_count(text, what)
    except ValueError as exc:
        raise TcalcError(str(exc)) from None


@app.command()
@model_options
def flops(
    source: ModelArgs,
    S: SOpt = None,
    B: Annotated[Optional[int], typer.Option("--B", "--batch-size", min=1, help="B: sequences per step \\[default: 1].", rich_help_panel=WORKLOAD, parser=_whole)] = None,
    causal: CausalOpt = False,
    windowed: Annotated[bool, typer.Option("--windowed/--no-windowed", help="Sliding/chunked layers at what a windowed kernel computes (~S·W) \\[default: off: full S×S masked, as eager PyTorch].")] = False,
    recompute: RecomputeOpt = None,
    tokens: Annotated[Optional[str], typer.Option("--tokens", help="Training-time estimate for this token budget, e.g. 300e9 or 1.4T \\[default: none].")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=1, help="GPUs for the training-time estimate \\[default: none; needed with --tokens].", parser=_whole)] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU for the training-time estimate, e.g. a100-80gb \\[default: none; needed with --tokens].")] = None,
    dtype: DtypeOpt = None,
    p: PeakPOpt = None,
    mfu: Annotated[Optional[float], typer.Option("--mfu", help="Assumed MFU (fraction) for the training-time estimate \\[default: 0.4].")] = None,
    budget: Annotated[Optional[str], typer.Option("--budget", help="Compute-optimal N and tokens for this FLOP budget, e.g. 1e24 \\[default: none].")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Model and hardware FLOPs per step, rules of thumb, training time, compute-optimal sizing.

    Example: tcalc flops --preset gpt3 --tokens 300e9 --gpus 1024 --gpu a100-80gb --mfu 0.45
    """
    from transformer_calc.render.flops import flops_table
    from transformer_calc.results.flops import flops_request

    model, job = source.load()
    section = job.training if job else {}  # a job file's training: section; flags win
    report = flops_request(
        model, section, S=S, B=B, recompute=recompute, causal=causal, windowed=windowed,
        tokens=_count(tokens, "--tokens"), gpus=gpus, gpu_name=gpu, dtype=_compute_dtype(dtype, p), mfu=mfu,
        budget=_count(budget, "--budget"),
    )
    _note_seq_len(model, report.workload.seq_len, S is not None or "seq_len" in section)
    emit(report, fmt, flops_table)


@app.command()
@model_options
def mfu(
    source: ModelArgs,
    S: SOpt = None,
    gpus: Annotated[int, typer.Option("--gpus", min=1, help="GPUs (accelerator chips) in the run.", parser=_whole)] = 1,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU, e.g. a100-80gb.")] = "a100-80gb",
    dtype: DtypeOpt = None,
    p: PeakPOpt = None,
    global_batch: Annotated[Optional[int], typer.Option("--global-batch", min=1, help="Sequences per optimizer step (all GPUs) \\[default: none; with --step-time].", parser=_whole)] = None,
    global_batch_tokens: Annotated[Optional[str], typer.Option("--global-batch-tokens", help="Tokens per optimizer step (all GPUs), e.g. 4M; instead of --global-batch \\[default: none].")] = None,
    hfu_convention: Annotated[str, typer.Option("--hfu-convention", help="executed (the recomputed attention core once) | paper (Korthikanti et al. 2022 eq. 8: three times).")] = "executed",
    step_time: Annotated[Optional[float], typer.Option("--step-time", help="Measured seconds per step \\[default: none; with --global-batch].")] = None,
    tokens_per_s: Annotated[Optional[float], typer.Option("--tokens-per-s", help="Measured throughput, tokens/s (all GPUs) \\[default: none; instead of --step-time].")] = None,
    recompute: RecomputeOpt = None,
    causal: CausalOpt = False,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """MFU and HFU from a measured step time (with the global batch) or throughput.

    Example: tcalc mfu --preset gpt3 --V 51200 --global-batch 64 --step-time 13.75 --gpus 64 --gpu a100-80gb
    """
    from transformer_calc.render.flops import mfu_table
    from transformer_calc.results.flops import mfu_request

    model, job = source.load()
    section = job.training if job else {}
    if global_batch_tokens is not None:
        seq = _first(S, section.get("seq_len"), model.max_seq_len)
        if global_batch is not None:
            from transformer_calc.errors import TcalcError

            raise TcalcError("give the global batch once: --global-batch (sequences) or --global-batch-tokens, not both")
        global_batch = _global_batch(None, global_batch_tokens, seq)
    report = mfu_request(
        model, section, S=S, gpus=gpus, gpu_name=gpu, dtype=_compute_dtype(dtype, p), global_batch=global_batch, step_time=step_time,
        tokens_per_s=tokens_per_s, recompute=recompute, causal=causal, hfu_convention=hfu_convention,
    )
    emit(report, fmt, mfu_table)


INFERENCE = "Inference"
EXPECTED = "Expected latency (achievable rates, fixed costs)"


def _fraction(text: Any) -> float:
    """A fraction in (0, 1] (an efficiency, a memory utilization)."""
    import math

    try:
        value = float(str(text).strip())
    except ValueError:
        raise typer.BadParameter(f"{str(text)[:40]!r} is not a number; write a fraction such as 0.9") from None
    if not (math.isfinite(value) and 0 < value <= 1):
        raise typer.BadParameter(f"{value} is out of range; use a fraction in (0, 1], e.g. 0.9")
    return value


def _seconds(text: Any) -> float:
    """A duration in seconds >= 0 (finite)."""
    import math

    try:
        value = float(str(text).strip())
    except ValueError:
        raise typer.BadParameter(f"{str(text)[:40]!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value} is out of range; use a finite number of seconds >= 0")
    return value


def _positive_seconds(text: Any) -> float:
    """A positive finite number (seconds, a rate)."""
    value = _seconds(text)
    if value <= 0:
        raise typer.BadParameter(f"{value} is out of range; use a positive number")
    return value


def _unit_interval(text: Any) -> float:
    """A fraction in [0, 1] (an acceptance rate)."""
    import math

    try:
        value = float(str(text).strip())
    except ValueError:
        raise typer.BadParameter(f"{str(text)[:40]!r} is not a number; write a fraction such as 0.7") from None
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise typer.BadParameter(f"{value} is out of range; use a fraction in [0, 1]")
    return value


SPECULATIVE = "Speculative decoding"
SERVING = "Serving capacity (paged KV cache)"
ExpNodeOpt = Annotated[Optional[int], typer.Option("--node-size", help="GPUs per NVLink domain \\[default: per platform, 8; 72 for GB200/GB300 NVL72].", rich_help_panel=EXPECTED, parser=_whole)]
ExpNicOpt = Annotated[Optional[float], typer.Option("--inter-node-gb-s", help="Per-GPU network bandwidth between nodes, GB/s one way \\[default: 25 A100 HDR, 50 H100/H200/B200 NDR].", rich_help_panel=EXPECTED)]
BlockOpt = Annotated[Optional[int], typer.Option("--block-size", help="Tokens per KV-cache block \\[default: 16, vLLM's].", rich_help_panel=SERVING, parser=_whole)]
UtilOpt = Annotated[Optional[float], typer.Option("--memory-utilization", help="Fraction of GPU memory the engine may use \\[default: 0.9, vLLM's gpu_memory_utilization].", rich_help_panel=SERVING, parser=_fraction)]
BatchedOpt = Annotated[Optional[int], typer.Option("--max-num-batched-tokens", help="Tokens per engine step (the largest prefill chunk) \\[default: 8192, vLLM V1's].", rich_help_panel=SERVING, parser=_whole)]
SeqsOpt = Annotated[Optional[int], typer.Option("--max-num-seqs", help="Sequences per engine step \\[default: 256, vLLM's].", rich_help_panel=SERVING, parser=_whole)]
CtxOpt = Annotated[Optional[str], typer.Option("--cuda-context", help="Reserve for the CUDA context, e.g. 512MiB \\[default: 512MiB].", rich_help_panel=SERVING)]
ActOpt = Annotated[Optional[str], typer.Option("--activation-peak", help="Reserve for activations, e.g. 2GiB \\[default: the largest prefill chunk's through one block + the sampler's logits].", rich_help_panel=SERVING)]
WsOpt = Annotated[Optional[str], typer.Option("--engine-workspace", help="Reserve for CUDA graphs and all-reduce buffers \\[default: 512MiB].", rich_help_panel=SERVING)]
MatmulEffOpt = Annotated[Optional[float], typer.Option("--matmul-efficiency", help="Achievable fraction of the dense peak \\[default: measured MAMF per GPU, e.g. H100 0.801].", rich_help_panel=EXPECTED, parser=_fraction)]
MemoryEffOpt = Annotated[Optional[float], typer.Option("--memory-efficiency", help="Achievable fraction of the HBM bandwidth \\[default: 0.9].", rich_help_panel=EXPECTED, parser=_fraction)]
GraphsOpt = Annotated[Optional[bool], typer.Option("--cuda-graphs/--no-cuda-graphs", help="Kernels launched from CUDA graphs (vLLM, TensorRT-LLM decode) or eagerly \\[default: --cuda-graphs].", rich_help_panel=EXPECTED)]
SeqOverheadOpt = Annotated[Optional[float], typer.Option("--sequence-overhead-s", help="Engine work per sequence per step, seconds \\[default: 10.4e-6 (fitted)].", rich_help_panel=EXPECTED, parser=_seconds)]
KernelOpt = Annotated[Optional[float], typer.Option("--kernel-launch-s", help="Fixed cost per kernel, seconds \\[default: 7.8e-6 with CUDA graphs (fitted), 15.8e-6 without].", rich_help_panel=EXPECTED, parser=_seconds)]


@app.command()
@model_options
def inference(
    source: ModelArgs,
    B: Annotated[Optional[int], typer.Option("--B", "--batch-size", help="B: concurrent sequences \\[default: 1].", rich_help_panel=INFERENCE, parser=_whole)] = None,
    S: Annotated[Optional[int], typer.Option("--S", "--prompt-len", "--seq-len", help="S: prompt tokens per sequence (8k = 8192) \\[default: the model's max_seq_len].", rich_help_panel=INFERENCE, parser=_length)] = None,
    new_tokens: Annotated[Optional[int], typer.Option("--new-tokens", "--output-len", help="Tokens generated per sequence; the first comes from the prefill \\[default: 1].", rich_help_panel=INFERENCE, parser=_whole)] = None,
    T: Annotated[Optional[int], typer.Option("--T", "--tensor-parallel", help="T: tensor-parallel GPUs \\[default: 1].", rich_help_panel=INFERENCE, parser=_whole)] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU \\[default: a100-80gb].", rich_help_panel=INFERENCE)] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help=DTYPE_HELP + "; the weights' and the cache's unless given \\[default: bf16].", rich_help_panel=INFERENCE)] = None,
    p: Annotated[Optional[int], typer.Option("--p", help=PHelp + " \\[default: 2].", rich_help_panel=INFERENCE, parser=_whole)] = None,
    weight_dtype: Annotated[Optional[str], typer.Option("--weight-dtype", help="Stored weights: fp32 | fp16 | bf16 | fp8 | int8 | int4, or a format with its scales: gptq-int4 | awq-int4 | q8_0 | q4_k_m | q5_k_m | mxfp4 | nvfp4 \\[default: the model's weight_format (gpt-oss: mxfp4), else bf16].", rich_help_panel=INFERENCE)] = None,
    kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="KV-cache dtype \\[default: the activation dtype].", rich_help_panel=INFERENCE)] = None,
    cache_kv_heads: Annotated[Optional[int], typer.Option("--cache-kv-heads", help="K/V heads the cache holds, weights unchanged (the seed's Falcon study: MHA) \\[default: the model's].", rich_help_panel=INFERENCE, parser=_whole)] = None,
    kv_cache: Annotated[Optional[bool], typer.Option("--kv-cache/--no-kv-cache", help="--no-kv-cache: the seed's naive mode, every token reprocesses the context \\[default: on].", rich_help_panel=INFERENCE)] = None,
    ep: Annotated[Optional[int], typer.Option("--ep", "--expert-parallel", help="Expert-parallel GPUs: each holds n_experts / ep routed experts \\[default: 1].", rich_help_panel=INFERENCE, parser=_whole)] = None,
    mla_cache: Annotated[Optional[str], typer.Option("--mla-cache", help="MLA models: latent (r_kv + d_rope per token, replicated over T; transformers) | decompressed (per-head K and V) \\[default: latent].", rich_help_panel=INFERENCE)] = None,
    matmul_efficiency: MatmulEffOpt = None,
    memory_efficiency: MemoryEffOpt = None,
    cuda_graphs: GraphsOpt = None,
    kernel_launch_s: KernelOpt = None,
    sequence_overhead_s: SeqOverheadOpt = None,
    node_size: ExpNodeOpt = None,
    inter_node_gb_s: ExpNicOpt = None,
    block_size: BlockOpt = None,
    memory_utilization: UtilOpt = None,
    max_num_batched_tokens: BatchedOpt = None,
    max_num_seqs: SeqsOpt = None,
    cuda_context: CtxOpt = None,
    activation_peak: ActOpt = None,
    engine_workspace: WsOpt = None,
    draft: Annotated[Optional[str], typer.Option("--draft", help="Speculative decoding: the draft model (a preset, a tcalc YAML or an HF config.json) \\[default: none].", rich_help_panel=SPECULATIVE)] = None,
    mtp: Annotated[bool, typer.Option("--mtp", help="Speculative decoding with the model's multi-token-prediction modules as the draft.", rich_help_panel=SPECULATIVE)] = False,
    speculative_tokens: Annotated[int, typer.Option("--speculative-tokens", help="k: draft tokens per verification step \\[default: 4].", rich_help_panel=SPECULATIVE, parser=_whole)] = 4,
    acceptance_rate: Annotated[float, typer.Option("--acceptance-rate", help="α: the chance the target accepts a draft token \\[default: 0.7].", rich_help_panel=SPECULATIVE, parser=_unit_interval)] = 0.7,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """KV cache, inference memory per GPU, prefill and decode latency: the roofline bound and the
    expected time (achievable rates, kernel launches, collectives, sampling); the paged KV cache's
    serving capacity (KV blocks, concurrent sequences, the context x concurrency budget matrix).

    Example: tcalc inference --preset falcon-40b --T 4 --B 8 --S 2048 --new-tokens 256
    """
    from transformer_calc.render.inference import inference_table
    from transformer_calc.results.inference import inference_command

    model, job = source.load()
    flags = dict(
        batch_size=B, seq_len=S, new_tokens=new_tokens, tensor=T, gpu=gpu, dtype=dtype, p=p, weight_dtype=weight_dtype,
        kv_dtype=kv_dtype, cache_kv_heads=cache_kv_heads, kv_cache=kv_cache, mla_cache=mla_cache, expert=ep,
        matmul_efficiency=matmul_efficiency, memory_efficiency=memory_efficiency, cuda_graphs=cuda_graphs,
        kernel_launch_s=kernel_launch_s, sequence_overhead_s=sequence_overhead_s, node_size=node_size,
        inter_node_gb_s=inter_node_gb_s, block_size=block_size, memory_utilization=memory_utilization,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, cuda_context=cuda_context,
        activation_peak=activation_peak, engine_workspace=engine_workspace, draft=draft, mtp=mtp,
        speculative_tokens=speculative_tokens, acceptance_rate=acceptance_rate,
    )
    report = inference_command(source.source, flags)
    _note_seq_len(model, report.inference.prompt_len, S is not None or bool(job and "seq_len" in job.inference),
                  "--S (the prompt)")
    emit(report, fmt, inference_table)


SERVE = "Serve (targets and layouts)"


@app.command()
@model_options
def serve(
    source: ModelArgs,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU \\[default: a100-80gb].", rich_help_panel=SERVE)] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="GPUs in all; replicas = gpus / (T·ep) \\[default: 8].", rich_help_panel=SERVE, parser=_whole)] = None,
    prompt_len: Annotated[Optional[int], typer.Option("--prompt-len", "--S", "--seq-len", help="Prompt tokens per request (8k = 8192) \\[default: none: required here or in the job file].", rich_help_panel=SERVE, parser=_length)] = None,
    output_len: Annotated[Optional[int], typer.Option("--output-len", "--new-tokens", help="Output tokens per request \\[default: none: required here or in the job file].", rich_help_panel=SERVE, parser=_whole)] = None,
    ttft_s: Annotated[Optional[float], typer.Option("--ttft", help="Target time to first token, seconds \\[default: none].", rich_help_panel=SERVE, parser=_positive_seconds)] = None,
    tpot_s: Annotated[Optional[float], typer.Option("--tpot", help="Target time per output token, seconds \\[default: none].", rich_help_panel=SERVE, parser=_positive_seconds)] = None,
    request_rate: Annotated[Optional[float], typer.Option("--request-rate", help="Requests per second for the whole deployment: concurrency is what serves it \\[default: none: the most the targets allow].", rich_help_panel=SERVE, parser=_positive_seconds)] = None,
    T: Annotated[Optional[int], typer.Option("--T", "--tensor-parallel", help="Fix T (else every T within a node that divides --gpus) \\[default: search].", rich_help_panel=SERVE, parser=_whole)] = None,
    ep: Annotated[Optional[int], typer.Option("--ep", "--expert-parallel", help="Expert-parallel GPUs per replica \\[default: 1].", rich_help_panel=SERVE, parser=_whole)] = None,
    B: Annotated[Optional[int], typer.Option("--B", "--batch-size", help="Fix the concurrency per replica (sequences in flight) \\[default: search].", rich_help_panel=SERVE, parser=_whole)] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help=DTYPE_HELP + "; the weights' and the cache's unless given \\[default: bf16].", rich_help_panel=SERVE)] = None,
    p: Annotated[Optional[int], typer.Option("--p", help=PHelp + " \\[default: 2].", rich_help_panel=SERVE, parser=_whole)] = None,
    weight_dtype: Annotated[Optional[str], typer.Option("--weight-dtype", help="As in `tcalc inference` \\[default: the model's weight_format, else the compute dtype].", rich_help_panel=SERVE)] = None,
    kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="KV-cache dtype \\[default: the activation dtype].", rich_help_panel=SERVE)] = None,
    matmul_efficiency: MatmulEffOpt = None,
    memory_efficiency: MemoryEffOpt = None,
    cuda_graphs: GraphsOpt = None,
    kernel_launch_s: KernelOpt = None,
    sequence_overhead_s: SeqOverheadOpt = None,
    node_size: ExpNodeOpt = None,
    inter_node_gb_s: ExpNicOpt = None,
    block_size: BlockOpt = None,
    memory_utilization: UtilOpt = None,
    max_num_batched_tokens: BatchedOpt = None,
    max_num_seqs: SeqsOpt = None,
    cuda_context: CtxOpt = None,
    activation_peak: ActOpt = None,
    engine_workspace: WsOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Size a deployment against latency targets: layouts (T within a node, replicas, concurrency)
    under continuous batching, with TTFT, TPOT and throughput; the best first, rejections with reasons.

    Example: tcalc serve --preset llama-3.1-70b --gpu h100 --gpus 8 --prompt-len 2000 --output-len 500 --ttft 1 --tpot 0.05
    """
    from transformer_calc.render.serve import serve_table
    from transformer_calc.results.serve import serve_request

    model, job = source.load()
    section = job.inference if job else {}
    flags = dict(seq_len=prompt_len, new_tokens=output_len, gpu=gpu, dtype=dtype, p=p, weight_dtype=weight_dtype,
                 kv_dtype=kv_dtype, expert=ep, tensor=T, batch_size=B, matmul_efficiency=matmul_efficiency,
                 memory_efficiency=memory_efficiency, cuda_graphs=cuda_graphs, kernel_launch_s=kernel_launch_s,
                 sequence_overhead_s=sequence_overhead_s, node_size=node_size, inter_node_gb_s=inter_node_gb_s,
                 block_size=block_size, memory_utilization=memory_utilization,
                 max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, cuda_context=cuda_context,
                 activation_peak=activation_peak, engine_workspace=engine_workspace)
    report = serve_request(model, section, flags, source.checkpoint(), checkpoint_section=source.typed_checkpoint(),
                           ttft_s=ttft_s, tpot_s=tpot_s,
                           request_rate=request_rate, gpus=gpus)
    _note_seq_len(model, report.serve.prompt_len, True, "--prompt-len")
    emit(report, fmt, serve_table)


LONG_DEFAULT_CONTEXT = 8192  # a default S above this is said on stderr (issue: silent 128k defaults)


def _note_seq_len(model: Any, used: int, explicit: bool, flag: str = "--S") -> None:
    """Say on stderr when S falls back to a long context window, or exceeds the model's context."""
    if not explicit and used > LONG_DEFAULT_CONTEXT:
        sys.stderr.write(
            f"note: S = {used:,}, the model's context window (max_seq_len); give {flag} to use another length\n"
        )
    elif explicit and used > model.max_seq_len:
        sys.stderr.write(
            f"warning: S = {used:,} exceeds the model's context window ({model.max_seq_len:,}); "
            "the numbers assume the model can run it\n"
        )


def _compute_dtype(dtype: str | None, p: int | None) -> str | None:
    from transformer_calc.devices.hardware import compute_dtype

    return compute_dtype(dtype, p)


def _first(*values: Any) -> Any:
    """The first value that is not None (a flag, then the job file, then the default)."""
    return next((v for v in values if v is not None), None)


SWEEP = "Grid (comma lists; a..b doubles, a..b:s steps)"
SWEEP_TRAINING = "Training, every point (as tcalc memory)"
SWEEP_INFERENCE = "Inference, every point (as tcalc inference)"


@app.command()
def sweep(
    model: Annotated[Optional[list[str]], typer.Argument(metavar="[MODEL]...", show_default=False, help="Models, as every command takes them: presets, Hugging Face repo ids, checkpoint folders, .gguf files, config.json files \\[default: none; or --preset/--config/--hf-config].")] = None,
    revision: RevisionOpt = None,
    preset: Annotated[Optional[list[str]], typer.Option("--preset", help="Model presets (repeat or comma-separate) \\[default: none; or --config/--hf-config].", rich_help_panel=MODEL)] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="tcalc YAML job file: its model:, training: and inference: sections \\[default: none].", rich_help_panel=MODEL)] = None,
    hf_config: Annotated[Optional[Path], typer.Option("--hf-config", help="Hugging Face config.json (read offline) \\[default: none].", rich_help_panel=MODEL)] = None,
    L: LOpt = None, D: DOpt = None, A: AOpt = None, kv_heads: KVOpt = None, head_dim: HeadDimOpt = None,
    E: EOpt = None, d_ff: DffOpt = None, V: VOpt = None, K: KOpt = None, set_: SetOpt = None,
    B: Annotated[Optional[str], typer.Option("--B", "--batch-size", help="B values, e.g. 1,2,4..64 \\[default: the job file's, else 1].", rich_help_panel=SWEEP)] = None,
    S: Annotated[Optional[str], typer.Option("--S", "--seq-len", "--prompt-len", help="S values (the prompt for inference metrics), e.g. 2k,8k \\[default: the job file's, else each model's max_seq_len].", rich_help_panel=SWEEP)] = None,
    T: Annotated[Optional[str], typer.Option("--T", "--tensor-parallel", help="T values \\[default: the job file's, else 1].", rich_help_panel=SWEEP)] = None,
    P: Annotated[Optional[str], typer.Option("--P", "--pipeline-parallel", help="P values \\[default: the job file's, else 1].", rich_help_panel=SWEEP)] = None,
    dp: Annotated[Optional[str], typer.Option("--dp", "--data-parallel", help="Data-parallel values \\[default: the job file's, else 1].", rich_help_panel=SWEEP)] = None,
    zero: Annotated[Optional[str], typer.Option("--zero", help="ZeRO stages \\[default: the job file's, else 0].", rich_help_panel=SWEEP)] = None,
    ep: Annotated[Optional[str], typer.Option("--ep", "--expert-parallel", help="Expert-parallel values (MoE) \\[default: the job file's, else 1].", rich_help_panel=SWEEP)] = None,
    cp: Annotated[Optional[str], typer.Option("--cp", "--context-parallel", help="Context-parallel values \\[default: the job file's, else 1].", rich_help_panel=SWEEP)] = None,
    recompute: Annotated[Optional[str], typer.Option("--recompute", help="none, selective, full \\[default: the job file's, else none].", rich_help_panel=SWEEP)] = None,
    flash: Annotated[Optional[str], typer.Option("--flash", help="true, false \\[default: the job file's, else false].", rich_help_panel=SWEEP)] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPUs, e.g. a100-80gb,h100 \\[default: the job file's, else none].", rich_help_panel=SWEEP)] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="Compute dtypes: the dense peak of train_days and of the inference roofline \\[default: bf16 (fp16 without bf16) for train_days; from the weight dtype for inference].", rich_help_panel=SWEEP)] = None,
    weight_dtype: Annotated[Optional[str], typer.Option("--weight-dtype", help="Inference weight dtypes: fp32 fp16 bf16 fp8 int8 int4 \\[default: the job file's, else the compute dtype (--dtype), else bf16].", rich_help_panel=SWEEP)] = None,
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="Comma list: peak_bytes weights_bytes activations_bytes fits headroom_bytes model_flops hardware_flops train_days kv_cache_bytes inference_memory_bytes inference_fits time_to_first_token_s time_per_output_token_s decode_tokens_per_s decode_bound tokens_per_s total_s \\[default: peak_bytes,model_flops (+ fits with --gpu)].")] = None,
    precision: Annotated[Optional[str], typer.Option("--precision", help="mixed | fp32 | bf16 \\[default: mixed].", rich_help_panel=SWEEP_TRAINING)] = None,
    p: Annotated[Optional[int], typer.Option("--p", help="p: bytes per activation/compute-weight element; 4 implies fp32 \\[default: from --precision].", rich_help_panel=SWEEP_TRAINING, parser=_whole)] = None,
    grad_bytes: Annotated[Optional[int], typer.Option("--grad-bytes", help="Bytes per gradient \\[default: 4 mixed (seed), 4 fp32, 2 bf16].", rich_help_panel=SWEEP_TRAINING, parser=_whole)] = None,
    optimizer: Annotated[Optional[str], typer.Option("--optimizer", help="adamw | adam | sgd | sgd-momentum | lion | adam-8bit \\[default: adamw].", rich_help_panel=SWEEP_TRAINING)] = None,
    dropout: Annotated[Optional[bool], typer.Option("--dropout/--no-dropout", help="Dropout masks kept \\[default: the model's dropout > 0].", rich_help_panel=SWEEP_TRAINING)] = None,
    activations: Annotated[Optional[str], typer.Option("--activations", help="default | seed | torch-eager \\[default: default].", rich_help_panel=SWEEP_TRAINING)] = None,
    head: Annotated[Optional[bool], typer.Option("--head/--no-head", help="Count embedding, final-norm, head and loss activations \\[default: on].", rich_help_panel=SWEEP_TRAINING)] = None,
    framework: Annotated[Optional[str], typer.Option("--framework", help="pytorch | megatron | deepspeed \\[default: pytorch].", rich_help_panel=SWEEP_TRAINING)] = None,
    cross_entropy: Annotated[Optional[str], typer.Option("--cross-entropy", help="eager | fused | chunked \\[default: fused for megatron, else eager].", rich_help_panel=SWEEP_TRAINING)] = None,
    micro_batches: Annotated[Optional[int], typer.Option("--micro-batches", help="Micro-batches per optimizer step \\[default: P, or 1].", rich_help_panel=SWEEP_TRAINING, parser=_whole)] = None,
    fused_optimizer: Annotated[Optional[bool], typer.Option("--fused-optimizer/--foreach-optimizer", help="Fused optimizer step \\[default: foreach for pytorch, fused otherwise].", rich_help_panel=SWEEP_TRAINING)] = None,
    sp: Annotated[Optional[bool], typer.Option("--sp/--no-sp", help="Sequence parallelism (with T) \\[default: off].", rich_help_panel=SWEEP_TRAINING)] = None,
    etp: Annotated[Optional[int], typer.Option("--etp", "--expert-tensor-parallel", help="Tensor-parallel ranks of one expert \\[default: T].", rich_help_panel=SWEEP_TRAINING, parser=_whole)] = None,
    virtual_stages: Annotated[Optional[int], typer.Option("--virtual-stages", help="Interleaved model chunks per pipeline stage \\[default: the job file's, else 1].", rich_help_panel=SWEEP_TRAINING, parser=_whole)] = None,
    finetune: FinetuneOpt = None,
    lora_rank: LoraRankOpt = None,
    lora_targets: LoraTargetsOpt = None,
    tokens: Annotated[Optional[str], typer.Option("--tokens", help="train_days: the token budget, e.g. 300e9 \\[default: none].", rich_help_panel=SWEEP_TRAINING)] = None,
    mfu: Annotated[Optional[float], typer.Option("--mfu", help="train_days: assumed MFU \\[default: 0.4].", rich_help_panel=SWEEP_TRAINING)] = None,
    new_tokens: Annotated[Optional[int], typer.Option("--new-tokens", "--output-len", help="Tokens generated per sequence \\[default: 1].", rich_help_panel=SWEEP_INFERENCE, parser=_whole)] = None,
    kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="KV-cache dtype \\[default: the activation dtype].", rich_help_panel=SWEEP_INFERENCE)] = None,
    cache_kv_heads: Annotated[Optional[int], typer.Option("--cache-kv-heads", help="K/V heads the cache holds, weights unchanged \\[default: the model's].", rich_help_panel=SWEEP_INFERENCE, parser=_whole)] = None,
    kv_cache: Annotated[Optional[bool], typer.Option("--kv-cache/--no-kv-cache", help="--no-kv-cache: every token reprocesses the context \\[default: on].", rich_help_panel=SWEEP_INFERENCE)] = None,
    mla_cache: Annotated[Optional[str], typer.Option("--mla-cache", help="MLA models: latent | decompressed \\[default: latent].", rich_help_panel=SWEEP_INFERENCE)] = None,
    fits_only: Annotated[bool, typer.Option("--fits-only", help="Keep only the points that fit the GPU \\[default: off].", rich_help_panel=OUTPUT)] = False,
    sort: Annotated[Optional[str], typer.Option("--sort", help="Sort by a column; -column for descending \\[default: grid order, streamed].", rich_help_panel=OUTPUT)] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Show at most this many rows \\[default: all].", rich_help_panel=OUTPUT, parser=_whole)] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write a figure (png, svg, pdf; needs the plot extra) \\[default: none].", rich_help_panel=OUTPUT)] = None,
    x: Annotated[Optional[str], typer.Option("--x", help="Plot: x axis \\[default: the first axis that varies].", rich_help_panel=OUTPUT)] = None,
    y: Annotated[Optional[str], typer.Option("--y", help="Plot: the metric \\[default: the first numeric metric].", rich_help_panel=OUTPUT)] = None,
    series: Annotated[Optional[str], typer.Option("--series", help="Plot: one line per value of this axis \\[default: the next axis that varies].", rich_help_panel=OUTPUT)] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """A grid over models, B, S, T, P, dp, ZeRO, EP, CP, recompute, flash, GPUs and dtypes: one row per point.

    Every point is priced as `tcalc memory`, `tcalc flops` and `tcalc inference` price it, with the
    same flags and job-file sections. Without --sort, rows are streamed as they are computed.
    Example: tcalc sweep --preset llama-2-7b --B 1,2,4..64 --T 1,2,4,8 --gpu a100-80gb --fits-only --sort peak_bytes
    """
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.common import peak_for
    from transformer_calc.estimators.sweep import prepare

    source = ModelArgs(preset=None, config=None, hf_config=None, L=L, D=D, A=A, kv_heads=kv_heads, head_dim=head_dim,
                       E=E, d_ff=d_ff, V=V, K=K, set_=set_)
    models, job = _sweep_models(preset, config, hf_config, source.overrides(), model, revision)
    axes = {"batch_size": B, "seq_len": S, "tensor": T, "pipeline": P, "data": dp, "zero": zero, "expert": ep,
            "context": cp, "recompute": recompute, "flash": flash, "gpu": gpu, "dtype": dtype, "weight_dtype": weight_dtype}
    settings = dict(
        precision=precision, p=p, grad_bytes=grad_bytes, optimizer=optimizer, dropout=dropout, activations=activations,
        head_activations=head, framework=framework, cross_entropy=cross_entropy, micro_batches=micro_batches,
        fused_optimizer=fused_optimizer, sequence_parallel=sp, expert_tensor=etp, virtual_stages=virtual_stages, new_tokens=new_tokens,
        kv_dtype=kv_dtype, cache_kv_heads=cache_kv_heads, kv_cache=kv_cache, mla_cache=mla_cache,
        finetune=finetune, lora_rank=lora_rank, lora_targets=lora_targets,
    )
    sweep_run = prepare(models, axes, settings, metrics.split(",") if metrics is not None else None, job,
                        tokens=_count(tokens, "--tokens"), mfu=mfu, fits_only=fits_only, sort=sort, limit=limit,
                        number=_sweep_number, gpu_lookup=find_gpu, peak=peak_for)
    plotting = _sweep_plot_args(sweep_run, plot, x, y, series) if plot is not None else None
    lengths = sweep_run.spec.axes.get("seq_len")
    for m in models.values():  # as memory and inference say it: a long default S, an S beyond the context
        _note_seq_len(m, max(lengths) if lengths else m.max_seq_len, lengths is not None)
    with _sweep_progress(sweep_run.spec.size) as progress:
        if plotting is None and fmt in (OutputFormat.csv, OutputFormat.json):
            from transformer_calc.render.sweep import sweep_csv, sweep_json

            rows = sweep_run.rows(progress)  # streamed: each row written as it is priced
            if fmt is OutputFormat.csv:
                pieces = sweep_csv(sweep_run.columns, rows)
            else:
                pieces = sweep_json(sweep_run.head(), rows, sweep_run.tail)
            for piece in pieces:
                write(piece)
            return
        from transformer_calc.render.sweep import TABLE_MAX_ROWS
        from transformer_calc.results.sweep import sweep_report

        keep = TABLE_MAX_ROWS if fmt is OutputFormat.table and plotting is None else None
        report = sweep_report(sweep_run, progress, keep=keep)
    if plotting is not None:
        from transformer_calc.render.sweep import plot_sweep

        plot_sweep(report, *plotting)
    if fmt is OutputFormat.csv:
        from transformer_calc.render.sweep import sweep_csv

        for piece in sweep_csv(sweep_run.columns, report.points):
            write(piece)
    else:
        from transformer_calc.render.sweep import sweep_table

        emit(report, fmt, sweep_table)


def _sweep_number(axis: str, flag: str, text: str) -> int:
    """One number of a sweep axis, read by the CLI's one integer parser (k = 1024 for S)."""
    from transformer_calc.errors import TcalcError

    try:
        return _parse_whole(text, 0 if axis == "zero" else 1, 3 if axis == "zero" else None, binary=axis == "seq_len")
    except typer.BadParameter as exc:
        raise TcalcError(f"{flag} ({_short(text)}): {exc.message}") from None


def _sweep_models(preset: list[str] | None, config: Path | None, hf_config: Path | None,
                  overrides: dict[str, Any], model: list[str] | None = None,
                  revision: str | None = None) -> tuple[dict[str, Any], Any]:
    """({label: ModelConfig}, job file or None): every --preset, and --config or --hf-config, each
    with the model overrides applied (as `load_model` applies them for the other commands)."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.sources.presets import resolve_preset

    models: dict[str, Any] = {}
    job = None
    for text in model or []:
        m = load_model(None, None, None, overrides, model=text, revision=revision)[0]
        label = m.name or text
        models[label if label not in models else f"{label} ({text})"] = m
    if revision is not None and not model:
        raise TcalcError(f"--revision {_short(revision)} needs a Hugging Face repo id as MODEL (org/name)")
    for item in preset or []:
        for name in (n.strip() for n in item.split(",")):
            if not name:
                raise TcalcError(f"--preset {_short(item)}: empty name in the list")
            models[resolve_preset(name)] = load_model(name, None, None, overrides)[0]
    if config is not None or hf_config is not None:
        m, job = load_model(None, config, hf_config, overrides)
        label = m.name or str(config or hf_config)
        models[label if label not in models else f"{label} ({config or hf_config})"] = m
    if not models and overrides:
        m = load_model(None, None, None, overrides)[0]
        models[m.name or "model"] = m
    if not models:
        raise TcalcError("no model given; use --preset NAME[,NAME...], --config FILE or --hf-config FILE, or give --L --D --A --V")
    return models, job


def _sweep_plot_args(sweep_run: Any, plot: Path, x: str | None, y: str | None, series: str | None) -> tuple[Any, ...]:
    """(path, x axis, y metric, series axis, capacity) for render.plot_sweep, checked before the
    sweep runs: a bad --plot, --x, --y or --series writes nothing."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.sweep import axis_name

    if plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise TcalcError(
            f"--plot {_short(str(plot))}: name the format by the suffix (.png, .svg or .pdf); "
            "tcalc writes only the file you name"
        )
    axes, wanted = sweep_run.spec.axes, sweep_run.spec.metrics
    varying = [a for a, v in axes.items() if len(v) > 1]
    x_axis = axis_name(x) if x else next((a for a in varying if a not in ("model", "gpu")), varying[0] if varying else "batch_size")
    series_axis = axis_name(series) if series else next((a for a in varying if a != x_axis), None)
    for name, value, given in (("--x", x_axis, x), ("--series", series_axis, series)):
        if value is not None and value not in axes:
            raise TcalcError(f"{name} {_short(given or value)}: not an axis; choose from {', '.join(axes)}")
    y_metric = y or next((m for m in wanted if m not in ("fits", "inference_fits", "decode_bound")), None)
    if y_metric is None:
        raise TcalcError("--plot needs a numeric metric; add one to --metrics or give --y")
    if y_metric not in wanted:
        raise TcalcError(f"--y {_short(y_metric)}: not among --metrics ({', '.join(wanted)})")
    capacity = next(iter(sweep_run.gpus.values())).memory_bytes if len(sweep_run.gpus) == 1 else None
    return str(plot), x_axis, y_metric, series_axis, capacity


class _sweep_progress:
    """A rich progress bar on stderr (a terminal only) once a sweep is predicted to run longer
    than a second; the callback gets the number of points done."""

    def __init__(self, total: int) -> None:
        import time

        self.total, self.started = total, time.perf_counter()
        self.bar: tuple[Progress, TaskID] | None = None  # the bar and its task, once shown

    def __enter__(self) -> Any:
        return self.update

    def update(self, done: int) -> None:
        import time

        if self.bar is not None:
            bar, task = self.bar
            bar.update(task, completed=done)
        elif done and (time.perf_counter() - self.started) * self.total / done > 1.0 and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            bar = Progress(transient=True, console=Console(stderr=True))
            bar.start()
            self.bar = bar, bar.add_task("sweep", total=self.total, completed=done)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar[0].stop()


@app.command()
def check(
    files: Annotated[list[Path], typer.Argument(help="Job files (YAML) to validate and check.", show_default=False)],
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="Memory must fit this GPU (overrides the files) \\[default: the files' checks.gpu or gpu].")] = None,
    max_memory: Annotated[
        Optional[str], typer.Option("--max-memory", help="Memory per GPU must not exceed this, e.g. 70GiB or 80GB \\[default: the files' checks.max_memory].")
    ] = None,
    min_tokens_per_s: Annotated[
        Optional[float], typer.Option("--min-tokens-per-s", help="Inference decode throughput must reach this (tokens/s) \\[default: the files' checks.min_tokens_per_s].")
    ] = None,
    max_ttft_s: Annotated[
        Optional[float], typer.Option("--max-ttft", help="Inference time to first token must not exceed this, seconds \\[default: the files' checks.max_ttft_s].")
    ] = None,
    max_tpot_s: Annotated[
        Optional[float], typer.Option("--max-tpot", help="Inference time per output token must not exceed this, seconds \\[default: the files' checks.max_tpot_s].")
    ] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Validate job files and check them against limits: a CI gate.

    One line per file: PASS, FAIL (a check failed) or ERROR (invalid file). Exit code 0 when all
    pass, 1 when a check failed, 2 when a file or flag is invalid.
    Example: tcalc check configs/*.yaml --gpu a100-80gb --max-memory 70GiB
    """
    from transformer_calc.render.check import check_lines
    from transformer_calc.results.check import check_report

    report = check_report(files, gpu, max_memory, min_tokens_per_s, max_ttft_s, max_tpot_s)
    try:  # a reader that leaves early (`| head`) must not change check's verdict
        if fmt is OutputFormat.table:
            write(check_lines(report))
        else:
            emit(report, fmt, None)
        _flush_stdout()
    except (PipeClosed, BrokenPipeError):
        _broken_pipe()
    if report.invalid:
        raise typer.Exit(2)
    if report.failed:
        raise typer.Exit(1)


@app.command()
def presets(fmt: FormatOpt = OutputFormat.table) -> None:
    """List the model presets with their key numbers and sources."""
    from transformer_calc.render.catalog import presets_table
    from transformer_calc.results.catalog import presets_report

    emit(presets_report(), fmt, presets_table)


@app.command()
def hardware(
    name: Annotated[Optional[str], typer.Argument(help="One accelerator in detail, e.g. a100-80gb.")] = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """List the accelerators: memory, bandwidth, dense peaks per dtype, λ_math, interconnect."""
    from transformer_calc.render.catalog import gpu_detail, hardware_table
    from transformer_calc.results.catalog import gpu_report, hardware_report

    if name is None:
        emit(hardware_report(), fmt, hardware_table)
    else:
        emit(gpu_report(name), fmt, gpu_detail)


@app.command()
def schema(
    command: Annotated[str, typer.Argument(metavar="COMMAND", help="A command with a result: " + ", ".join(RESULT_TYPES) + ".", show_default=False)],
) -> None:
    """Print the JSON Schema of a command's result: what its `--format json` writes (always JSON)."""
    from transformer_calc.render.common import schema_json
    from transformer_calc.results import result_schema

    write(schema_json(result_schema(command)))


# ---------------------------------------------------------------------------- error boundary
MAX_MESSAGE_CHARS = 400  # an error is one line; values in it are clipped, the whole line too


def _fail(message: str, code: int) -> int:
    line = " ".join(str(message).split())
    if len(line) > MAX_MESSAGE_CHARS:
        line = line[: MAX_MESSAGE_CHARS - 3] + "..."
    try:
        sys.stderr.write(f"Error: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed too: the exit code says it
        pass
    return code


def _usage_message(exc: Any, argv: list[str]) -> str:
    """The parser's message on one line, with the offending value when an option was given one."""
    message = " ".join(exc.format_message().split())
    param = getattr(exc, "param", None)
    opts = list(getattr(param, "opts", []) or [])
    if not opts or type(exc).__name__ != "BadParameter":
        return message
    values = [argv[i + 1] for i, tok in enumerate(argv[:-1]) if tok in opts]
    values += [tok.split("=", 1)[1] for tok in argv if "=" in tok and tok.split("=", 1)[0] in opts]
    if not values:
        return message
    problem = message.split(": ", 1)[-1].removeprefix("Value error, ").rstrip(".")
    low = problem.lower()
    fix = next((f for key, f in _USAGE_FIXES if key in low), "see --help")
    return f"{' / '.join(opts)} ({values[-1]!r}): {problem[:1].lower() + problem[1:]}; {fix}"


_USAGE_FIXES = (
    ("valid integer", "use a whole number"),
    ("valid number", "use a number"),
    ("is not one of", "choose one of those"),
    ("greater than", "use a larger value"),
    ("less than", "use a smaller value"),
)





def _global_batch(sequences: str | None, tokens: str | None, S: int) -> int:
    from transformer_calc.errors import TcalcError

    if sequences is not None and tokens is None:
        return _count(sequences, "--global-batch")
    if tokens is None or sequences is not None:  # neither, or both
        raise TcalcError("give the global batch once: --global-batch SEQUENCES or --global-batch-tokens TOKENS (e.g. 4M)")
    n = _count(tokens, "--global-batch-tokens")
    if n < S:
        raise TcalcError(f"--global-batch-tokens ({n}) is less than one sequence of S = {S} tokens")
    binary = {"k": 2**10, "m": 2**20, "g": 2**30}.get(str(tokens).strip()[-1:].lower())
    if n % S and binary:  # "4M tokens" of a 8192-token batch is 2^22: the binary reading divides
        import re

        number = re.fullmatch(r"\s*([0-9]+)\s*[kKmMgG]\s*", str(tokens))
        if number and (int(number.group(1)) * binary) % S == 0:
            n2 = int(number.group(1)) * binary
            sys.stderr.write(f"note: --global-batch-tokens {tokens} read as {n2:,} (binary {tokens[-1]}), {n2 // S} sequences of {S}\n")
            return n2 // S
    if n % S:  # whole sequences only, said on stderr
        sys.stderr.write(f"note: --global-batch-tokens {n:,} is {n // S} sequences of {S} ({n // S * S:,} tokens)\n")
    return n // S


NodeOpt = Annotated[Optional[int], typer.Option("--node-size", help="GPUs per NVLink domain \\[default: per platform, 8; 72 for GB200/GB300 NVL72].", rich_help_panel=PARALLEL, parser=_whole)]
NicOpt = Annotated[Optional[float], typer.Option("--inter-node-gb-s", help="Per-GPU network bandwidth between nodes, GB/s one way \\[default: 25 A100 HDR, 50 H100/H200/B200 NDR].", rich_help_panel=PARALLEL)]


@app.command()
@model_options
def train(
    source: ModelArgs,
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=1, help="GPUs in all; dp = gpus / (T·P·CP) \\[default: the job file's data x T x P x CP, else 8].", parser=_whole)] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU, e.g. a100-80gb, h100 \\[default: the job file's, else h100].")] = None,
    S: SOpt = None,
    global_batch: Annotated[Optional[str], typer.Option("--global-batch", help="Global batch in sequences, e.g. 1536 \\[default: none; this or --global-batch-tokens].")] = None,
    global_batch_tokens: Annotated[Optional[str], typer.Option("--global-batch-tokens", help="Global batch in tokens, e.g. 4M \\[default: none; this or --global-batch].")] = None,
    micro_batch: Annotated[Optional[int], typer.Option("--micro-batch", "--B", "--batch-size", min=1, help="Micro-batch b \\[default: the job file's, else the fastest that fits].", parser=_whole)] = None,
    T: Annotated[Optional[int], typer.Option("--T", "--tensor-parallel", min=1, help="T: tensor-parallel ranks \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    P: Annotated[Optional[int], typer.Option("--P", "--pipeline-parallel", min=1, help="P: pipeline stages (1F1B) \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    virtual_stages: Annotated[Optional[int], typer.Option("--virtual-stages", min=1, help="Interleaved model chunks per stage \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    cp: Annotated[Optional[int], typer.Option("--cp", "--context-parallel", min=1, help="Context-parallel ranks (long sequences) \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    ep: Annotated[Optional[int], typer.Option("--ep", "--expert-parallel", min=1, help="Expert-parallel ranks (MoE) \\[default: 1].", rich_help_panel=PARALLEL, parser=_whole)] = None,
    sp: Annotated[Optional[bool], typer.Option("--sp/--no-sp", help="Sequence parallelism (with T) \\[default: off].", rich_help_panel=PARALLEL)] = None,
    zero: Annotated[Optional[int], typer.Option("--zero", help="ZeRO stage 0-3 (1: a distributed optimizer) \\[default: 1].", rich_help_panel=PARALLEL, parser=_zero_stage)] = None,
    recompute: Annotated[Optional[str], typer.Option("--recompute", help="none | selective | full \\[default: none].", rich_help_panel=TRAINING)] = None,
    flash: Annotated[Optional[bool], typer.Option("--flash/--no-flash", help="FlashAttention \\[default: on].", rich_help_panel=TRAINING)] = None,
    precision: Annotated[Optional[str], typer.Option("--precision", help="mixed | bf16 | fp32 \\[default: mixed; fp32 with --dtype fp32].", rich_help_panel=TRAINING)] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help=DTYPE_HELP + " (fp8: matmuls at the fp8 peak) \\[default: bf16].", rich_help_panel=TRAINING)] = None,
    p: Annotated[Optional[int], typer.Option("--p", help=PHelp + " \\[default: 2].", rich_help_panel=TRAINING, parser=_whole)] = None,
    framework: Annotated[Optional[str], typer.Option("--framework", help="Memory conventions: pytorch | megatron | deepspeed \\[default: megatron].", rich_help_panel=TRAINING)] = None,
    finetune: FinetuneOpt = None,
    lora_rank: LoraRankOpt = None,
    lora_targets: LoraTargetsOpt = None,
    offload: OffloadOpt = None,
    offload_device: OffloadDeviceOpt = None,
    fp8_recipe: FP8Opt = None,
    matmul_efficiency: Annotated[Optional[float], typer.Option("--matmul-efficiency", help="Achievable fraction of the dense peak \\[default: measured MAMF per GPU].")] = None,
    node_size: NodeOpt = None,
    inter_node_gb_s: NicOpt = None,
    tokens: Annotated[Optional[str], typer.Option("--tokens", help="Token budget for days, GPU-hours and cost, e.g. 15T \\[default: none].")] = None,
    price_per_gpu_hour: Annotated[Optional[float], typer.Option("--price-per-gpu-hour", help="Cost per GPU-hour for the budget \\[default: none].")] = None,
    optimizer: OptimizerOpt = None,
    grad_bytes: GradBytesOpt = None,
    activations: ActivationsOpt = None,
    cross_entropy: CrossEntropyOpt = None,
    dropout: DropoutOpt = None,
    head: HeadOpt = None,
    fused_optimizer: FusedOptimizerOpt = None,
    etp: EtpOpt = None,
    lora_alpha: LoraAlphaOpt = None,
    train_embeddings: TrainEmbOpt = None,
    train_head: TrainHeadOpt = None,
    fp32_unquantized: FP32UnqOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """Training step time of a parallel layout: compute, communication, pipeline bubble; MFU.

    Settings come from the flags, then the job file's training: section (--config), then the defaults.
    Example: tcalc train --preset gpt3 --gpus 64 --gpu a100-80gb --T 8 --P 8 --sp --recompute selective --global-batch 64 --micro-batch 1 --S 2048
    """
    from transformer_calc.render.train import train_table
    from transformer_calc.requests.training import train_flags
    from transformer_calc.results.train import train_command

    source.load()
    flags = train_flags(locals())
    report = train_command(source.source, flags, gpus=gpus,
                           global_batch_of=lambda seq: _global_batch(global_batch, global_batch_tokens, seq),
                           node_size=node_size, inter_node_gb_s=inter_node_gb_s, matmul_efficiency=matmul_efficiency,
                           tokens=_count(tokens, "--tokens"), price_per_gpu_hour=price_per_gpu_hour)
    emit(report, fmt, train_table)


@app.command()
@model_options
def plan(
    source: ModelArgs,
    gpus: Annotated[int, typer.Option("--gpus", min=1, help="GPUs in all.", parser=_whole)] = 8,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="GPU, e.g. h100 \\[default: the job file's, else h100].")] = None,
    S: SOpt = None,
    global_batch: Annotated[Optional[str], typer.Option("--global-batch", help="Global batch in sequences \\[default: none; this or --global-batch-tokens].")] = None,
    global_batch_tokens: Annotated[Optional[str], typer.Option("--global-batch-tokens", help="Global batch in tokens, e.g. 4M \\[default: none; this or --global-batch].")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Layouts shown.", parser=_whole)] = 10,
    flash: Annotated[Optional[bool], typer.Option("--flash/--no-flash", help="FlashAttention \\[default: on].")] = None,
    framework: Annotated[Optional[str], typer.Option("--framework", help="Memory conventions: pytorch | megatron | deepspeed \\[default: megatron].")] = None,
    finetune: FinetuneOpt = None,
    lora_rank: LoraRankOpt = None,
    lora_targets: LoraTargetsOpt = None,
    node_size: NodeOpt = None,
    inter_node_gb_s: NicOpt = None,
    fmt: FormatOpt = OutputFormat.table,
) -> None:
    """The fastest layouts that fit: T within a node, P, virtual stages, CP, EP, dp, micro-batch, recompute.

    Settings come from the flags, then the job file's training: section (--config), then the
    defaults; the layout (T, P, dp, CP, EP, ZeRO, micro-batch, recompute) is what plan chooses.
    Example: tcalc plan --preset llama-3-70b --gpus 1024 --gpu h100 --global-batch-tokens 4M --S 8192
    """
    from transformer_calc.render.train import plan_table
    from transformer_calc.requests.training import PLAN_LAYOUT_KEYS
    from transformer_calc.results.train import plan_command

    model, job = source.load()
    section = job.training if job else {}
    flags = dict(seq_len=S, flash=flash, framework=framework, finetune=finetune, lora_rank=lora_rank,
                 lora_targets=lora_targets, gpu=gpu)
    report = plan_command(source.source, flags, gpus=gpus,
                          global_batch_of=lambda seq: _global_batch(global_batch, global_batch_tokens, seq),
                          top=top, node_size=node_size, inter_node_gb_s=inter_node_gb_s,
                          source_text=source.command_text())
    unused = [k for k in PLAN_LAYOUT_KEYS if k in section]
    if unused:
        sys.stderr.write(f"note: plan chooses the layout; the job file's {', '.join(unused)} are not used\n")
    emit(report, fmt, plan_table)


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the invoked command registered, when the first argument names one.

    typer builds every registered command's parameters on each run; building one keeps start-up
    fast (issue: tcalc must feel instant). Help, --version and unknown commands get the full app.
    """
    if not args or args[0].startswith("-"):
        return app
    chosen = [c for c in app.registered_commands
              if c.callback is not None and (c.name or c.callback.__name__) == args[0]]
    if not chosen:
        return app
    single = typer.Typer(
        name=app.info.name, help=app.info.help, add_completion=False, pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    single.registered_callback = app.registered_callback
    single.registered_commands = chosen
    return single


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code; every failure is one `Error:` line on stderr.

    Exit codes: 0 success (and a reader that closed the pipe early: `tcalc ... | head`), 1 a
    failed check (`tcalc check`), 2 invalid input or an output that cannot be written (closed or
    full stdout), 130 interrupted (Ctrl-C).
    """
    from transformer_calc.errors import TcalcError

    args = sys.argv[1:] if argv is None else list(argv)
    if sys.stdout is None:  # started with stdout closed (`tcalc ... >&-`)
        return _fail("standard output is closed; redirect it to a file or /dev/null", 2)
    try:
        command = typer.main.get_command(_app_for(args))
        result = command.main(args=args, prog_name="tcalc", standalone_mode=False)
        code = result if isinstance(result, int) else 0
        _flush_stdout()
        return code
    except KeyboardInterrupt:
        return _interrupted()
    except TcalcError as exc:
        return _fail(str(exc), exc.exit_code)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return _interrupted()
    except (BrokenPipeError, PipeClosed):
        return _broken_pipe()
    except RecursionError:
        return _fail("the input is nested too deeply to process; simplify it", 2)
    except ValueError as exc:  # estimators reject impossible inputs with ValueError
        return _fail(str(exc), 2)
    except OverflowError as exc:
        return _fail(f"a value is too large to compute with: {exc}", 2)
    except OSError as exc:  # writing the output failed: a closed or full stdout
        return _fail(f"cannot write the output: {exc.strerror or exc}", 2)
    except Exception as exc:  # noqa: BLE001 - the boundary: never show a traceback
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # click usage errors
            ctx = getattr(exc, "ctx", None)
            if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
                write(ctx.get_help() + "\n")
                return 0
            return _fail(_usage_message(exc, sys.argv[1:] if argv is None else argv), exc.exit_code)
        if os.environ.get("TCALC_DEBUG"):
            raise
        return _fail(f"internal error ({type(exc).__name__}: {exc}); please report it (TCALC_DEBUG=1 shows details)", 1)


def _flush_stdout() -> None:
    """Write out what is buffered now, so that a closed, broken or full stdout is seen here."""
    if sys.stdout is not None:
        sys.stdout.flush()


def _broken_pipe() -> int:
    """The reader went away (`| head`): not an error. Point stdout at /dev/null so that the
    interpreter's own flush at exit does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def _interrupted() -> int:
    try:
        sys.stderr.write("Error: interrupted\n")
    except (OSError, ValueError):
        pass
    return 130


def main() -> None:
    try:
        code = run()
    except KeyboardInterrupt:  # between the handler's frames
        code = _interrupted()
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:  # the reader left: quiet, and the exit code keeps its meaning
        _broken_pipe()
    except (OSError, ValueError) as exc:
        code = _fail(f"cannot write the output: {getattr(exc, 'strerror', None) or exc}", 2)
        _broken_pipe()
    sys.exit(code)
