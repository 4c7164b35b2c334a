"""The settings of a run beside the model: workload (B, S), parallelism, and training (precision,
optimizer, recomputation, fine-tuning, offload, FP8).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from transformer_calc.errors import TcalcError
from transformer_calc.model.parse import StrictInputs


# ============================================================================ workload, training
class Workload(StrictInputs):
    """What one step processes: S tokens per sequence, B sequences per micro-batch (per GPU)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq_len: int = Field(gt=0, description="S, tokens per sequence")
    batch_size: int = Field(default=1, gt=0, description="B, micro-batch size (sequences per GPU)")


class PipelineSchedule(str, Enum):
    """The pipeline schedule (estimators/training/schedules.py: bubbles and in-flight activations)."""

    one_f_one_b = "1f1b"  # Narayanan et al. 2021 §2.2.1 (PipeDream-Flush)
    interleaved = "interleaved"  # interleaved 1F1B over v model chunks per stage (§2.2.2)
    zb_h1 = "zb-h1"  # zero-bubble H1: backward split into input (B) and weight (W) passes (Qi et al. 2023)
    zb_v = "zb-v"  # zero-bubble V: two chunks per stage in a V (Qi et al. 2024)
    dualpipe = "dualpipe"  # DeepSeek-V3's bidirectional schedule (two chunks per stage, 2x parameters)


class CPCommType(str, Enum):
    """How context parallelism exchanges K/V (Transformer Engine / Megatron-core `cp_comm_type`)."""

    p2p = "p2p"  # ring: K/V blocks passed rank to rank under the attention kernels (Liu et al. 2023)
    all_gather = "all_gather"  # K/V all-gathered, then attention on the local Q chunk (Llama 3 §3.3.2)


MAX_PIPELINE_STAGES = 1024  # P and v: stages are listed one by one; published runs use at most 64


class Parallelism(StrictInputs):
    """How the model and the batch are split over GPUs (Megatron-LM / ZeRO conventions)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor: int = Field(default=1, gt=0, description="T, tensor-parallel ranks")
    sequence_parallel: bool = Field(default=False, description="Korthikanti et al. 2022 sequence parallelism")
    # at most MAX_PIPELINE_STAGES: a pipeline's stages are listed one by one (published runs use <= 64)
    pipeline: int = Field(default=1, gt=0, le=MAX_PIPELINE_STAGES, description="P, pipeline stages")
    data: int = Field(default=1, gt=0, description="data-parallel replicas")
    zero: int = Field(default=0, ge=0, le=3, description="ZeRO stage: 1 optimizer, 2 +gradients, 3 +weights")
    expert: int = Field(default=1, gt=0, description="ep, expert-parallel ranks (routed experts split)")
    context: int = Field(default=1, gt=0, description="cp, context-parallel ranks (the sequence split)")
    virtual_stages: int = Field(default=1, gt=0, le=MAX_PIPELINE_STAGES, description="v, interleaved 1F1B model chunks per stage")
    expert_tensor: int | None = Field(
        default=None, gt=0, description="etp, tensor-parallel ranks of one expert (default T, Megatron-core)"
    )
    # Uneven pipelines as Megatron-core builds them (estimators/training/memory.py pipeline_layout)
    first_stage_layers: int | None = Field(
        default=None, gt=0, description="blocks on the first pipeline stage (Megatron --decoder-first-pipeline-num-layers)"
    )
    last_stage_layers: int | None = Field(
        default=None, gt=0, description="blocks on the last pipeline stage (Megatron --decoder-last-pipeline-num-layers)"
    )
    embedding_in_split: bool = Field(
        default=False, description="the embedding counts as one layer of the split (--account-for-embedding-in-pipeline-split)"
    )
    loss_in_split: bool = Field(
        default=False, description="the head and loss count as one layer of the split (--account-for-loss-in-pipeline-split)"
    )
    pipeline_schedule: PipelineSchedule | None = Field(
        default=None, description="pipeline schedule (default: 1f1b, interleaved with virtual_stages > 1)"
    )
    microbatch_group: int | None = Field(
        default=None, gt=0,
        description="N, contiguous micro-batches per model chunk of the interleaved schedule (Llama 3; default P)"
    )
    cp_comm_type: CPCommType = Field(
        default=CPCommType.p2p, description="context-parallel K/V exchange: p2p (ring, overlapped) or all_gather (exposed)"
    )

    @model_validator(mode="after")
    def _schedule_fits_the_chunks(self) -> Parallelism:
        sched, v = self.pipeline_schedule, self.virtual_stages
        if sched is None:
            return self
        if sched in (PipelineSchedule.one_f_one_b, PipelineSchedule.zb_h1) and v > 1:
            raise ValueError(f"pipeline_schedule {sched.value} runs one model chunk per stage, not virtual_stages {v}; "
                             "drop --virtual-stages or use --pipeline-schedule interleaved")
        if sched is PipelineSchedule.interleaved and v < 2:
            raise ValueError("pipeline_schedule interleaved needs two or more model chunks per stage; give "
                             "--virtual-stages 2 (or more, or auto)")
        if sched in (PipelineSchedule.zb_v, PipelineSchedule.dualpipe) and v != 2:
            raise ValueError(f"pipeline_schedule {sched.value} runs two model chunks per stage; give --virtual-stages 2 "
                             f"(not {v})")
        if sched is PipelineSchedule.dualpipe and self.pipeline % 2:
            raise ValueError(f"pipeline_schedule dualpipe pairs the stages from both ends: P ({self.pipeline}) must be even")
        return self

    @property
    def schedule(self) -> PipelineSchedule:
        """The schedule in effect: the given one, else 1F1B (interleaved with v > 1)."""
        if self.pipeline_schedule is not None:
            return self.pipeline_schedule
        return PipelineSchedule.interleaved if self.virtual_stages > 1 else PipelineSchedule.one_f_one_b

    @property
    def expert_tensor_size(self) -> int:
        return self.tensor if self.expert_tensor is None else self.expert_tensor

    @property
    def gpus(self) -> int:
        return self.tensor * self.context * self.pipeline * self.data


class Precision(str, Enum):
    """Training precision scheme (seed "Parameters, Gradients, Optimizer States, and Mixed Precision")."""

    mixed = "mixed"  # 16-bit compute copy + fp32 master copy and states (Micikevicius et al. 2018)
    fp32 = "fp32"  # everything in 4 bytes
    bf16 = "bf16"  # pure bf16: weights, gradients and optimizer states in 2 bytes, no master copy


class Optimizer(str, Enum):
    adamw = "adamw"
    adam = "adam"
    sgd = "sgd"
    sgd_momentum = "sgd-momentum"
    lion = "lion"
    adam_8bit = "adam-8bit"  # = adamw-8bit's bytes (bitsandbytes Adam8bit)
    adamw_8bit = "adamw-8bit"  # bitsandbytes AdamW8bit: uint8 moments, fp32 absmax per 256
    paged_adamw_8bit = "paged-adamw-8bit"  # the same in CUDA unified memory (paged to the host)
    adafactor = "adafactor"  # factored second moments for matrices (Shazeer & Stern 2018)
    muon = "muon"  # momentum for hidden matrices, AdamW for the rest (KellerJordan/Muon)


class Finetune(str, Enum):
    """What is trained (docs/formulas.md "Fine-tuning")."""

    full = "full"  # every parameter
    lora = "lora"  # frozen base at the compute dtype + low-rank adapters (Hu et al. 2021)
    qlora = "qlora"  # frozen base in NF4 with double quantization + LoRA adapters (Dettmers et al. 2023)
    dora = "dora"  # LoRA + a magnitude vector per output feature (Liu et al. 2024)


class LoraTarget(str, Enum):
    """Modules adapters go on, by tcalc component; each family's module names map onto them
    (docs/formulas.md "Fine-tuning": the table of module names)."""

    q = "q"
    k = "k"
    v = "v"
    o = "o"
    gate = "gate"
    up = "up"
    down = "down"
    all_linear = "all-linear"  # PEFT's shorthand: every nn.Linear/Conv1D but the output layer
    experts = "experts"  # MoE routed experts' stacked projections (PEFT target_parameters); never in all-linear
    router = "router"  # the MoE router's weight (PEFT target_parameters); never in all-linear
    mixer = "mixer"  # every Linear of the sequence mixers other than softmax attention (in_proj, out_proj, ...)


class Offload(str, Enum):
    """What ZeRO-Offload / ZeRO-Infinity moves off the GPU (Ren et al. 2021; Rajbhandari et al. 2021)."""

    none = "none"
    optimizer = "optimizer"  # optimizer states, fp32 master and the gradient partition
    optimizer_params = "optimizer+params"  # ... and the (ZeRO-3 partitioned) 16-bit parameters


class FP8Recipe(str, Enum):
    """FP8 training recipe (Transformer Engine; Megatron-core's --fp8-recipe names)."""

    none = "none"
    delayed = "delayed"  # per-tensor scales from a 1024-step amax history (Hopper, Ada, Blackwell)
    tensorwise = "tensorwise"  # per-tensor scales from the current amax ("current scaling")
    mxfp8 = "mxfp8"  # one E8M0 scale per 32 values (Blackwell)
    rowwise = "rowwise"  # one fp32 scale per row (torchao Float8 "rowwise"), current scaling
    blockwise = "blockwise"  # DeepSeek-V3: 1x128 activation tiles, 128x128 weight blocks (Megatron --fp8-recipe blockwise)
    nvfp4 = "nvfp4"  # FP4 (E2M1) with an E4M3 scale per 16 values and an fp32 tensor scale (Blackwell; Megatron --fp4-recipe nvfp4)


class OffloadDevice(str, Enum):
    cpu = "cpu"  # host memory (ZeRO-Offload)
    nvme = "nvme"  # NVMe (ZeRO-Infinity)


class Recompute(str, Enum):
    """Activation recomputation (Korthikanti et al. 2022, sec. 5)."""

    none = "none"
    selective = "selective"  # recompute the attention core (QK^T, softmax, dropout, x V)
    full = "full"  # keep only each layer's input; recompute the whole layer in backward
    # torchtitan's per-op selective AC (activation_checkpoint.mode "selective", selective_ac_option
    # "op"; torchtitan/parallelisms/parallelize_llama.py _save_list/_custom_policy): save the output
    # of every odd-numbered mm of a block (forward order), SDPA's outputs and reduce-scatters;
    # recompute every second mm and every other op (norms, RoPE, SwiGLU, all-gathers)
    op = "op"


class ActivationProfile(str, Enum):
    """Which activation accounting to use (docs/formulas.md, "Activations")."""

    default = "default"  # the seed's accounting generalized: GQA, gated MLPs, MoE, head and loss terms
    seed = "seed"  # exactly the seed's per-layer equations (MHA, 2-matrix MLP, masks), nothing else
    torch_eager = "torch-eager"  # what eager PyTorch (HF transformers code) saves for backward, by tensor


class Framework(str, Enum):
    """Whose memory conventions the peak timeline follows (docs/formulas.md §2.5)."""

    pytorch = "pytorch"  # eager PyTorch / HF Trainer / FSDP2: grads live from backward to zero_grad
    megatron = "megatron"  # Megatron-core: persistent grad buffer, fused SwiGLU and cross-entropy
    deepspeed = "deepspeed"  # DeepSpeed ZeRO: its bucket defaults and ZeRO-3 live-parameter budget
    torchtitan = "torchtitan"  # PyTorch's torchtitan: FSDP2 whose sharded parameters are the fp32 master copy


class CrossEntropy(str, Enum):
    """How the loss is computed over the vocabulary."""

    eager = "eager"  # log_softmax + nll_loss on materialized fp32 logits (PyTorch, HF)
    fused = "fused"  # Megatron's vocab-parallel CE: keeps the fp32 softmax, gradient in place
    chunked = "chunked"  # fused linear + CE over token chunks (Liger-style): no B·S·V tensor kept


MASTER_COPY_BYTES = 4  # fp32 master weights in mixed precision (Micikevicius et al. 2018)


_ELEMENT_BYTES = {Precision.mixed: 2, Precision.fp32: 4, Precision.bf16: 2}


_GRAD_BYTES = {Precision.mixed: 4, Precision.fp32: 4, Precision.bf16: 2}  # seed: 4 in mixed


class Training(StrictInputs):
    """How a model is trained: precision, optimizer, recomputation, attention kernel.

    `p` is the seed's p: bytes per element of the compute copy of the weights and of activations
    (2 in mixed and pure bf16, 4 in fp32). Gradient bytes default to the seed's 4 in mixed
    precision ("they have to be converted to p=4"); many stacks keep 2 (`grad_bytes: 2`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    precision: Precision = Precision.mixed
    p: int = Field(gt=0, description="bytes per activation / compute-weight element")
    grad_bytes: int = Field(gt=0, le=8, description="bytes per gradient element")
    optimizer: Optimizer = Optimizer.adamw
    recompute: Recompute = Recompute.none
    flash: bool = Field(default=False, description="FlashAttention: no S x S scores stored")
    dropout: bool | None = Field(default=None, description="dropout masks stored (default: model.dropout > 0)")
    activations: ActivationProfile = ActivationProfile.default
    head_activations: bool = Field(default=True, description="count embedding, final norm, head, loss")
    framework: Framework = Framework.pytorch
    cross_entropy: CrossEntropy | None = Field(
        default=None, description="loss kernel (default: fused for megatron, eager otherwise)"
    )
    micro_batches: int | None = Field(
        default=None, gt=0, description="micro-batches per optimizer step (default: P; 1 without a pipeline)"
    )
    fused_optimizer: bool | None = Field(
        default=None, description="fused optimizer step, no temporaries (default: false for pytorch's foreach)"
    )
    finetune: Finetune = Field(default=Finetune.full, description="full training, or LoRA / QLoRA / DoRA adapters")
    lora_rank: int = Field(default=16, gt=0, le=65536, description="r, the adapters' rank")
    lora_alpha: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="alpha: scales the adapter output by alpha/r; no effect on memory"
    )
    lora_targets: tuple[LoraTarget, ...] = Field(
        default=(LoraTarget.all_linear,), min_length=1, description="modules that get adapters"
    )
    train_embeddings: bool = Field(default=False, description="the token embedding is trained too (PEFT modules_to_save)")
    fp32_unquantized: bool = Field(
        default=False,
        description="QLoRA: the parameters bitsandbytes leaves unquantized are upcast to fp32 (PEFT prepare_model_for_kbit_training)",
    )
    train_head: bool = Field(default=False, description="the LM head is trained too (PEFT modules_to_save)")
    offload: Offload = Field(default=Offload.none, description="ZeRO-Offload: what lives off the GPU")
    offload_device: OffloadDevice = Field(default=OffloadDevice.cpu, description="cpu (ZeRO-Offload) or nvme (ZeRO-Infinity)")
    fp8_recipe: FP8Recipe = Field(
        default=FP8Recipe.none, description="low-precision (FP8, NVFP4) GEMMs with their weight copies and saved GEMM inputs (Transformer Engine)"
    )
    compile: bool = Field(
        default=False, description="torch.compile: elementwise chains fused (the torchtitan time profile; eager otherwise)"
    )
    frozen_weights: tuple[int, int] | None = Field(
        default=None, exclude=True,
        description="LoRA/DoRA over a checkpoint (set from MODEL, not a job-file key): (stored bytes, parameters) of its "
        "language model; frozen weights are held at that ratio instead of p bytes, as transformers loads a "
        "quantized checkpoint (FP8, GPTQ, AWQ) without dequantizing it",
    )

    @model_validator(mode="after")
    def _fp8_compatible(self) -> Training:
        if self.fp32_unquantized and self.finetune is not Finetune.qlora:
            raise ValueError("fp32_unquantized upcasts what QLoRA leaves unquantized: it needs --finetune qlora")
        if self.finetune is Finetune.full:  # an adapter setting given for full training is an orphan, never silence
            orphans = sorted(self.model_fields_set & {"lora_rank", "lora_alpha", "lora_targets", "train_embeddings",
                                                       "train_head"})
            if orphans:
                raise ValueError(f"{', '.join(orphans)} {'sets' if len(orphans) == 1 else 'set'} the adapters of "
                                 "--finetune lora|qlora|dora; "
                                 f"with full training (finetune: full) drop {'it' if len(orphans) == 1 else 'them'} "
                                 "or give --finetune")
        if self.compile and self.framework is not Framework.torchtitan:
            raise ValueError("compile fuses the eager elementwise kernels of the torchtitan profile; the "
                             f"{self.framework.value} profile already prices fused kernels: drop compile or give "
                             "--framework torchtitan")
        if "offload_device" in self.model_fields_set and self.offload is Offload.none:
            raise ValueError("offload_device says where --offload puts the states; give --offload optimizer "
                             "(or optimizer+params) or drop it")
        if self.fp8_recipe is FP8Recipe.none:
            return self
        if self.precision is Precision.fp32 or self.p != 2:
            raise ValueError(
                f"fp8_recipe {self.fp8_recipe.value} keeps 16-bit weights and activations beside the FP8 copies: "
                f"use precision mixed or bf16 with p 2 (not precision {self.precision.value}, p {self.p})"
            )
        if self.finetune is not Finetune.full:
            raise ValueError(f"fp8_recipe {self.fp8_recipe.value} is modeled for full training; drop it or use --finetune full")
        return self

    @property
    def adapters(self) -> bool:
        return self.finetune is not Finetune.full

    @property
    def loss_kernel(self) -> CrossEntropy:
        if self.cross_entropy is not None:
            return self.cross_entropy
        return CrossEntropy.fused if self.framework is Framework.megatron else CrossEntropy.eager

    @property
    def optimizer_fused(self) -> bool:
        if self.fused_optimizer is not None:
            return self.fused_optimizer
        return self.framework not in (Framework.pytorch, Framework.torchtitan)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        d = dict(data)
        precision, p = d.get("precision"), d.get("p")
        if precision is None and p is not None:  # the seed: p=4 is plain fp32 training
            d["precision"] = Precision.fp32 if p == 4 else Precision.mixed
        try:
            prec = Precision(d.get("precision") or Precision.mixed)
        except TcalcError:
            raise
        except ValueError:
            return d  # pydantic reports the bad precision with its name
        expected = _ELEMENT_BYTES[prec]
        allowed = (1, 2) if prec is Precision.mixed else (expected,)  # mixed: 16-bit or fp8 compute
        if p is None:
            d["p"] = expected
        elif isinstance(p, int) and not isinstance(p, bool) and p not in allowed:
            raise ValueError(
                f"p ({p}) does not match precision {prec.value} "
                f"({' or '.join(map(str, allowed))}-byte elements); drop p or choose the matching precision"
            )
        if d.get("grad_bytes") is None:
            d["grad_bytes"] = _GRAD_BYTES[prec]
        targets = d.get("lora_targets")
        if isinstance(targets, str):  # "q,v" as typed on the command line
            d["lora_targets"] = [t.strip() for t in targets.split(",") if t.strip()]
        return d
