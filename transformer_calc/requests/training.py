"""Training settings (`tcalc memory`, `tcalc train`, `tcalc plan`; the latter two's requests are in
requests/train.py): the workload, training and parallelism settings
of a step, each resolved from the flags (or API keywords), then the job file's training: section,
then the defaults (`model.config.resolve`, the one precedence rule `tcalc memory` uses too)."""

from __future__ import annotations

from typing import Annotated, Any

from transformer_calc.errors import TcalcError
from transformer_calc.model.config import ModelConfig
from transformer_calc.requests.base import DTYPE_HELP, P_HELP, node_size, count, length, opt, positive, whole, zero_stage
from transformer_calc.requests.model import ModelRequest

# ============================================================================ memory, train, plan
# Every training command resolves its settings here: a flag that was given, then the job file's
# training: section, then the one set of defaults (requests/defaults.py: the framework's attention
# kernel, optimizer sharding and sequence parallelism, the model's pre-training S, one GPU).
TRAIN_GPUS = 8  # --gpus when neither the flag nor the job file's layout gives the count

# The layout plan chooses itself: a job file's values for these keys are not used by `tcalc plan`.
PLAN_LAYOUT_KEYS = ("tensor", "sequence_parallel", "pipeline", "data", "zero", "expert", "context", "virtual_stages",
                    "batch_size", "micro_batches", "recompute", "first_stage_layers", "last_stage_layers",
                    "embedding_in_split", "loss_in_split", "pipeline_schedule", "microbatch_group")


def training_settings(m: ModelConfig, section: dict[str, Any], flags: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """The settings of a training command by job-file key (config.resolve's precedence over
    requests.defaults.training_defaults) and the defaults that were assumed (Assumption)."""
    from transformer_calc.model.config import resolve
    from transformer_calc.requests.defaults import training_defaults

    defaults, assumed = training_defaults(m, resolve(flags, section))
    return resolve(flags, section, defaults), assumed


def memory_configs(m: ModelConfig, section: dict[str, Any], flags: dict[str, Any]) -> tuple[Any, Any, Any, str, list[Any]]:
    """`tcalc memory`'s (and `tcalc check`'s) settings: (Workload, Training, Parallelism, gpu name,
    the assumed defaults), resolved as train's and plan's (`training_settings`)."""
    from transformer_calc.model.config import Parallelism, Training, Workload, build, check_expert_layout, split_training

    settings, assumed = training_settings(m, section, flags)
    parts = split_training(settings)
    par = build(Parallelism, parts["parallelism"], "training")
    check_expert_layout(m, par)
    return (build(Workload, parts["workload"], "training"), build(Training, parts["training"], "training"), par,
            str(parts["gpu"]["gpu"]), assumed)


def train_configs(
    m: ModelConfig, section: dict[str, Any], flags: dict[str, Any], gpus: int | None = None
) -> tuple[Any, Any, Any, str, bool, list[Any]]:
    """`tcalc train`'s settings, resolved as `tcalc memory`'s (config.resolve): a flag that was
    given, then the job file's training: section, then the default (`training_settings`). Data parallelism is what the GPUs leave, dp = gpus / (T·P·CP); without `gpus`, the
    job file's layout sets the count (data·T·P·CP), else TRAIN_GPUS. A micro-batch given as a flag
    fixes the micro-batches per step (G / (dp·b)); the section's `micro_batches` is then not used.
    Returns (Workload, Training, Parallelism, gpu name, whether the micro-batch was given, the
    assumed defaults); the CLI and the Python API both call it."""
    from transformer_calc.model.config import Parallelism, Training, Workload, build, check_expert_layout, split_training
    from transformer_calc.errors import TcalcError

    settings, assumed = training_settings(m, section, flags)
    if flags.get("batch_size") is not None:
        settings.pop("micro_batches", None)
    parts = split_training(settings)
    layout = build(Parallelism, parts["parallelism"], "training")
    T, P, cp = layout.tensor, layout.pipeline, layout.context
    if gpus is None:
        gpus = layout.gpus if "data" in parts["parallelism"] else TRAIN_GPUS
    if gpus % (T * P * cp):
        raise TcalcError(f"--gpus ({gpus}) must be a multiple of T x P x CP ({T} x {P} x {cp}); data parallelism is what is left")
    par = build(Parallelism, {**parts["parallelism"], "data": gpus // (T * P * cp)}, "training")
    check_expert_layout(m, par)
    w = build(Workload, {"batch_size": 1, **parts["workload"]}, "training")
    tr = build(Training, parts["training"], "training")
    return w, tr, par, str(parts["gpu"]["gpu"]), "batch_size" in parts["workload"], assumed

def plan_configs(m: ModelConfig, section: dict[str, Any], flags: dict[str, Any]) -> tuple[int, Any, str, int | None, list[Any]]:
    """`tcalc plan`'s settings, as train's (`train_configs`) but for the layout, which plan
    chooses (PLAN_LAYOUT_KEYS of the section are not used). Returns (S, Training, gpu name, the
    expert-tensor size or None, the assumed defaults but the layout's)."""
    from transformer_calc.model.config import Parallelism, Training, Workload, build, split_training

    fixed = {k: v for k, v in section.items() if k not in PLAN_LAYOUT_KEYS}
    settings, assumed = training_settings(m, fixed, flags)
    parts = split_training(settings)
    assumed = [a for a in assumed if a.option not in PLAN_LAYOUT_KEYS]  # plan chooses the layout
    w = build(Workload, parts["workload"], "training")
    tr = build(Training, parts["training"], "training")
    etp = build(Parallelism, {k: v for k, v in parts["parallelism"].items() if k == "expert_tensor"}, "training")
    return w.seq_len, tr, str(parts["gpu"]["gpu"]), etp.expert_tensor, assumed



# ============================================================================ the options
WORKLOAD = "Workload"
TRAINING = "Training"
PARALLEL = "Parallelism"
FINETUNE = "Fine-tuning and offload"

SeqLen = Annotated[int | None, opt("--S", "--seq-len", help="S: tokens per sequence (8k = 8192) \\[default: the model's documented pre-training length, else min(max_seq_len, 8192)].", panel=WORKLOAD, parse=length)]
# The options every training command shares, declared once (their defaults: requests/defaults.py).
FlashOpt = Annotated[bool | None, opt("--flash/--no-flash", help="FlashAttention / SDPA: no S×S scores kept; --no-flash for eager attention \\[default: on; off with --activations seed].", panel=TRAINING)]
FrameworkOpt = Annotated[str | None, opt("--framework", help="Memory conventions and time profile: megatron | pytorch (eager/HF Trainer/DDP) | deepspeed | torchtitan (FSDP2: the sharded parameters are the fp32 master; eager or --compile) \\[default: megatron].", panel=TRAINING)]
ZeroOpt = Annotated[int | None, opt("--zero", help="ZeRO stage 0-3: shard optimizer; +gradients; +weights \\[default: the framework's: 1 megatron (distributed optimizer), 3 torchtitan (FSDP2), 0 pytorch, deepspeed].", panel=PARALLEL, parse=zero_stage)]
SequenceParallelOpt = Annotated[bool | None, opt("--sp/--no-sp", help="Sequence parallelism (with T) \\[default: on with T > 1 under megatron and torchtitan, else off].", panel=PARALLEL)]
RecomputeOpt = Annotated[str | None, opt("--recompute", help="none | selective | full (Korthikanti et al. 2022) | op (torchtitan per-op AC) \\[default: none].", panel=TRAINING)]
GpuOpt = Annotated[str | None, opt("--gpu", help="GPU, e.g. h100, a100-80gb, b200 \\[default: the job file's, else h100].")]
GradBytes = Annotated[int | None, opt("--grad-bytes", help="Bytes per gradient \\[default: 4 mixed (seed), 4 fp32, 2 bf16].", panel=TRAINING, parse=whole)]
OptimizerOpt = Annotated[str | None, opt("--optimizer", help="adamw | adam | sgd | sgd-momentum | lion | adam-8bit | adamw-8bit | paged-adamw-8bit | adafactor | muon \\[default: adamw].", panel=TRAINING)]
Dropout = Annotated[bool | None, opt("--dropout/--no-dropout", help="Dropout masks kept \\[default: the model's dropout > 0].", panel=TRAINING)]
Activations = Annotated[str | None, opt("--activations", help="default | seed (exactly the seed's per-layer equations) | torch-eager \\[default: default].", panel=TRAINING)]
Head = Annotated[bool | None, opt("--head/--no-head", help="Count embedding, final-norm, head and loss activations \\[default: on].", panel=TRAINING)]
CrossEntropy = Annotated[str | None, opt("--cross-entropy", help="Loss kernel: eager | fused (Megatron vocab-parallel) | chunked (Liger-style) \\[default: fused for megatron, else eager].", panel=TRAINING)]
FusedOptimizer = Annotated[bool | None, opt("--fused-optimizer/--foreach-optimizer", help="Fused optimizer step (no temporaries) or PyTorch's foreach \\[default: foreach for pytorch, fused otherwise].", panel=TRAINING)]
Etp = Annotated[int | None, opt("--etp", "--expert-tensor-parallel", help="Tensor-parallel ranks of one expert \\[default: T, as Megatron-core].", panel=PARALLEL, parse=whole)]
Finetune = Annotated[str | None, opt("--finetune", help="full | lora | qlora (NF4 base, double quantization) | dora \\[default: full].", panel=FINETUNE)]
LoraRank = Annotated[int | None, opt("--lora-rank", help="r: the adapters' rank \\[default: 16].", panel=FINETUNE, parse=whole)]
LoraAlpha = Annotated[float | None, opt("--lora-alpha", help="alpha (scales adapters by alpha/r): recorded, no effect on memory \\[default: none].", panel=FINETUNE, parse=positive)]
LoraTargets = Annotated[str | None, opt("--lora-targets", help="Comma list of q,k,v,o,gate,up,down, all-linear (PEFT's: every Linear but the LM head), experts, router (MoE, PEFT target_parameters), mixer (hybrids: every Linear of the non-attention mixers) \\[default: all-linear].", panel=FINETUNE)]
TrainEmbeddings = Annotated[bool | None, opt("--train-embeddings/--no-train-embeddings", help="Train the token embedding too (PEFT modules_to_save) \\[default: off].", panel=FINETUNE)]
TrainHead = Annotated[bool | None, opt("--train-head/--no-train-head", help="Train the LM head too (PEFT modules_to_save) \\[default: off].", panel=FINETUNE)]
FP32Unquantized = Annotated[bool | None, opt("--fp32-unquantized/--no-fp32-unquantized", help="QLoRA: the parameters left unquantized (embeddings, LM head, norms) in fp32, as PEFT's prepare_model_for_kbit_training casts them \\[default: off].", panel=FINETUNE)]
OffloadOpt = Annotated[str | None, opt("--offload", help="none | optimizer (ZeRO-Offload: states, fp32 master, gradient partition) | optimizer+params (ZeRO-3) \\[default: none].", panel=FINETUNE)]
OffloadDevice = Annotated[str | None, opt("--offload-device", help="cpu (host memory) | nvme (ZeRO-Infinity) \\[default: cpu].", panel=FINETUNE)]
Compile = Annotated[bool | None, opt("--compile/--no-compile", help="torch.compile: the eager elementwise kernels fused (with --framework torchtitan; step time only, the peak memory is the eager one) \\[default: off].", panel=TRAINING)]
FP8 = Annotated[str | None, opt("--fp8-recipe", help="none | delayed | tensorwise | rowwise | blockwise (DeepSeek 1x128/128x128) | mxfp8 (Blackwell) | nvfp4 (Blackwell FP4): low-precision GEMMs, their weight copies and saved inputs (Transformer Engine) \\[default: none].", panel=TRAINING)]
GlobalBatch = Annotated[int | None, opt("--global-batch", help="Global batch in sequences, e.g. 1536 \\[default: none; this or --global-batch-tokens].", parse=count, job=False)]
GlobalBatchTokens = Annotated[int | str | None, opt("--global-batch-tokens", help="Global batch in tokens, e.g. 4M \\[default: none; this or --global-batch].", parse=lambda v: _token_text(v), job=False)]
FirstStage = Annotated[int | None, opt("--first-stage-layers", "--decoder-first-pipeline-num-layers", help="Blocks on the first pipeline stage; the middle stages split the rest evenly (Megatron-core uneven pipeline) \\[default: an even split].", panel=PARALLEL, parse=whole)]
LastStage = Annotated[int | None, opt("--last-stage-layers", "--decoder-last-pipeline-num-layers", help="Blocks on the last pipeline stage (Megatron-core uneven pipeline) \\[default: an even split].", panel=PARALLEL, parse=whole)]
EmbeddingInSplit = Annotated[bool | None, opt("--embedding-in-split/--no-embedding-in-split", help="The embedding counts as one layer of the pipeline split (Megatron --account-for-embedding-in-pipeline-split) \\[default: off].", panel=PARALLEL)]
LossInSplit = Annotated[bool | None, opt("--loss-in-split/--no-loss-in-split", help="The head and loss count as one layer of the pipeline split (Megatron --account-for-loss-in-pipeline-split) \\[default: off].", panel=PARALLEL)]
PipelineScheduleOpt = Annotated[str | None, opt("--pipeline-schedule", help="1f1b | interleaved (v > 1) | zb-h1 (zero-bubble H1) | zb-v (two chunks in a V) | dualpipe (DeepSeek-V3; 2x parameters) \\[default: 1f1b, interleaved with --virtual-stages > 1].", panel=PARALLEL)]
CPCommTypeOpt = Annotated[str | None, opt("--cp-comm-type", help="How context parallelism exchanges K/V: p2p (a ring under the attention kernels) | all_gather (K/V all-gathered before attention, exposed: Llama 3) \\[default: p2p].", panel=PARALLEL)]
MicrobatchGroup = Annotated[int | None, opt("--microbatch-group", help="N: contiguous micro-batches per model chunk of the interleaved schedule, P to the micro-batches per step (Llama 3's tunable N; Megatron microbatch_group_size_per_vp_stage); the warm-up holds (v − 1)·N + 2·(P − s − 1) + 1 chunk forwards \\[default: P].", panel=PARALLEL, parse=whole)]
NodeSize = Annotated[int | None, opt("--node-size", help="GPUs per NVLink domain \\[default: per platform, 8; 72 for GB200/GB300 NVL72].", panel=PARALLEL, parse=node_size, job=False)]
InterNode = Annotated[float | None, opt("--inter-node-gb-s", help="Per-GPU network bandwidth between nodes, GB/s one way \\[default: 25 A100 HDR, 50 H100/H200/B200 NDR].", panel=PARALLEL, parse=positive, job=False)]


def _token_text(value: Any) -> int | str:
    """A token count as given: checked now (count's rules), read once S is known (`global_batch`)
    since 4M of 8192-token sequences may mean 2^22 (said on stderr)."""
    count(value)
    return value if isinstance(value, int) else str(value).strip()


class MemoryRequest(ModelRequest):
    """`tcalc memory`: every key of a job file's training: section, and the GPU to fit."""

    command = "memory"
    common = ('model', 'seq_len', 'batch_size', 'gpu', 'tensor', 'pipeline', 'data', 'zero', 'recompute', 'finetune')  # the options shown first (help, MCP schema)
    section = "training"
    seq_len: SeqLen = None
    batch_size: Annotated[int | None, opt("--B", "--batch-size", help="B: micro-batch per GPU (sequences) \\[default: 1].", panel=WORKLOAD, parse=whole)] = None
    precision: Annotated[str | None, opt("--precision", help="mixed (16-bit + fp32 master, the seed's) | fp32 | bf16 (pure) \\[default: mixed; fp32 with --dtype fp32].", panel=TRAINING)] = None
    dtype: Annotated[str | None, opt("--dtype", help=DTYPE_HELP + "; fp32 implies --precision fp32 \\[default: bf16].", panel=TRAINING, job=False)] = None
    p: Annotated[int | None, opt("--p", help=P_HELP + "; 4 implies fp32 \\[default: 2].", panel=TRAINING, parse=whole)] = None
    grad_bytes: GradBytes = None
    optimizer: OptimizerOpt = None
    recompute: RecomputeOpt = None
    flash: FlashOpt = None
    dropout: Dropout = None
    activations: Activations = None
    head_activations: Head = None
    framework: FrameworkOpt = None
    cross_entropy: CrossEntropy = None
    micro_batches: Annotated[int | None, opt("--micro-batches", help="Micro-batches per optimizer step (gradients stay allocated across them) \\[default: P, or 1].", panel=TRAINING, parse=whole)] = None
    fused_optimizer: FusedOptimizer = None
    tensor: Annotated[int | None, opt("--T", "--tensor-parallel", help="T: tensor-parallel ranks \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    sequence_parallel: SequenceParallelOpt = None
    pipeline: Annotated[int | None, opt("--P", "--pipeline-parallel", help="P: pipeline stages (1F1B) \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    virtual_stages: Annotated[int | None, opt("--virtual-stages", help="Interleaved model chunks per pipeline stage \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    first_stage_layers: FirstStage = None
    last_stage_layers: LastStage = None
    embedding_in_split: EmbeddingInSplit = None
    loss_in_split: LossInSplit = None
    pipeline_schedule: PipelineScheduleOpt = None
    data: Annotated[int | None, opt("--dp", "--data-parallel", help="Data-parallel replicas (for ZeRO) \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    zero: ZeroOpt = None
    expert: Annotated[int | None, opt("--ep", "--expert-parallel", help="Expert-parallel ranks: routed experts split ep ways (MoE) \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    expert_tensor: Etp = None
    context: Annotated[int | None, opt("--cp", "--context-parallel", help="Context-parallel ranks: the sequence split cp ways \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    cp_comm_type: CPCommTypeOpt = None
    microbatch_group: MicrobatchGroup = None
    finetune: Finetune = None
    lora_rank: LoraRank = None
    lora_alpha: LoraAlpha = None
    lora_targets: LoraTargets = None
    train_embeddings: TrainEmbeddings = None
    train_head: TrainHead = None
    fp32_unquantized: FP32Unquantized = None
    offload: OffloadOpt = None
    offload_device: OffloadDevice = None
    fp8_recipe: FP8 = None
    compile: Compile = None
    gpu: GpuOpt = None




def global_batch(sequences: int | None, tokens: int | str | None, S: int, note: Any = None) -> int:
    """The global batch in sequences: given, or whole sequences of S in the tokens. A token count
    with a k/M/G suffix that S does not divide is read as binary when that divides (4M of 8192:
    2^22, 512 sequences); both readings are said through `note`."""
    import re

    from transformer_calc.errors import TcalcError

    if sequences is not None and tokens is None:
        return sequences
    if tokens is None or sequences is not None:  # neither, or both
        raise TcalcError("give the global batch once: --global-batch SEQUENCES or --global-batch-tokens TOKENS (e.g. 4M)")
    n = count(tokens)
    if n < S:
        raise TcalcError(f"--global-batch-tokens ({n}) is less than one sequence of S = {S} tokens")
    text = str(tokens).strip()
    binary = {"k": 2**10, "m": 2**20, "g": 2**30}.get(text[-1:].lower())
    if n % S and binary:
        number = re.fullmatch(r"([0-9]+)\s*[kKmMgG]", text)
        if number and (int(number.group(1)) * binary) % S == 0:
            n2 = int(number.group(1)) * binary
            if note is not None:
                note(f"--global-batch-tokens {text} read as {n2:,} (binary {text[-1]}), {n2 // S} sequences of {S}")
            return n2 // S
    if n % S and note is not None:  # whole sequences only
        note(f"--global-batch-tokens {n:,} is {n // S} sequences of {S} ({n // S * S:,} tokens)")
    return n // S
