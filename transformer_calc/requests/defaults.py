"""The one source of defaults: what a command assumes where neither a flag, an API keyword nor the
job file says, the same in every command, each with the source it follows.

The framework decides the training defaults (its attention kernel, its optimizer sharding, its
sequence parallelism); one GPU is the default of every command that prices work. Each default
that shaped an answer is returned as an `Assumption` (option, value, source), which the results
carry in their JSON (`assumptions.defaults`) and print in their header.

The config classes (model.config.Training, Parallelism) keep the seed's neutral defaults for the
estimators' own Python API (eager attention, no sharding): those are the equations' defaults, not a
command's. `--activations seed` asks for the seed's picture and gets the seed's defaults too
(eager attention, plain PyTorch conventions, no sharding), so its case study is reproduced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# One GPU for every command (memory, train, plan, flops, mfu, inference, serve, sweep, check):
# the H100 SXM5 80GB, the most deployed training and serving GPU of 2024-26.
DEFAULT_GPU = "h100"
DEFAULT_GPU_SOURCE = "tcalc's default GPU in every command (H100 SXM5 80GB)"

DEFAULT_FRAMEWORK = "megatron"
FRAMEWORK_SOURCE = "Megatron-core's memory conventions and time profile (NeMo / Megatron-Bridge recipes)"

# The attention kernel every 2026 stack runs by default: PyTorch SDPA (flash / memory-efficient
# backends) in transformers and torchtitan, Transformer Engine's fused attention in Megatron-core.
FLASH_SOURCE = "FlashAttention/SDPA, the default kernel of transformers, Megatron-core (TE) and torchtitan"

# The optimizer sharding each framework runs by default (ZeRO stage).
FRAMEWORK_ZERO: dict[str, tuple[int, str]] = {
    "megatron": (1, "Megatron-core's distributed optimizer (on in every NeMo / Megatron-Bridge recipe)"),
    "torchtitan": (3, "torchtitan's FSDP2 (data_parallel_shard_degree -1)"),
    "pytorch": (0, "PyTorch DDP (no sharding)"),
    "deepspeed": (0, "DeepSpeed's zero_optimization.stage default"),
}

# Sequence parallelism with T > 1: Megatron-Bridge / NeMo recipes set sequence_parallel whenever
# tensor_model_parallel_size > 1; torchtitan's TP plan shards norms and dropout along the sequence
# (SequenceParallel) always.
SP_FRAMEWORKS: dict[str, str] = {
    "megatron": "Megatron-Bridge / NeMo recipes set sequence_parallel whenever T > 1",
    "torchtitan": "torchtitan's tensor-parallel plan (SequenceParallel norms)",
}

from transformer_calc.model.config import FALLBACK_TRAIN_SEQ_LEN

# --activations seed: the seed's own picture (its case study): eager attention, plain PyTorch, no ZeRO.
SEED_DEFAULTS: dict[str, Any] = {"flash": False, "framework": "pytorch", "zero": 0}
SEED_SOURCE = "--activations seed: the seed's picture (eager attention, plain PyTorch, no ZeRO)"


@dataclass(frozen=True)
class Assumption:
    """A default that shaped an answer: the option (job-file key), its value, and why."""

    option: str
    value: Any
    source: str


def train_seq_len(model: Any) -> tuple[int, str]:
    """S for training when none is given: the model's documented pre-training length
    (`train_seq_len`), else min(max_seq_len, 8192)."""
    if model.train_seq_len is not None and model.train_seq_len <= model.max_seq_len:
        from transformer_calc.sources.presets import train_seq_len_source

        cited = train_seq_len_source(model.name)
        return model.train_seq_len, cited or "the model's documented pre-training length (train_seq_len)"
    S = model.training_seq_len
    return S, ("the model's context window (max_seq_len)" if S == model.max_seq_len else
               f"no documented pre-training length: min(max_seq_len {model.max_seq_len:,}, {FALLBACK_TRAIN_SEQ_LEN:,})")


def training_defaults(model: Any, given: dict[str, Any]) -> tuple[dict[str, Any], list[Assumption]]:
    """The defaults of a training command (memory, train, plan; sweep through `sweep_defaults`)
    for the options that `given` (flags, then the job file's training: section; None: not given)
    leaves unset, and the assumptions they make. `model` None: every default but S."""
    seen = {k: v for k, v in given.items() if v is not None}
    seed = str(seen.get("activations", "")) == "seed"
    out: dict[str, Any] = {}
    said: list[Assumption] = []

    def default(option: str, value: Any, source: str) -> None:
        if option not in seen and option not in out:
            out[option] = value
            said.append(Assumption(option, value, source))

    if model is not None:
        default("seq_len", *train_seq_len(model))
    if seed:
        for option, value in SEED_DEFAULTS.items():
            default(option, value, SEED_SOURCE)
    default("framework", DEFAULT_FRAMEWORK, FRAMEWORK_SOURCE)
    framework = str(seen.get("framework", out.get("framework")))
    default("flash", True, FLASH_SOURCE)
    zero, zero_source = FRAMEWORK_ZERO.get(framework, (0, "no ZeRO"))
    default("zero", zero, zero_source)
    default("recompute", "none", "no activation recomputation (Megatron-core's and torchtitan's default)")
    tensor = seen.get("tensor", 1)
    if isinstance(tensor, int) and tensor > 1 and framework in SP_FRAMEWORKS:
        default("sequence_parallel", True, SP_FRAMEWORKS[framework])
    default("gpu", DEFAULT_GPU, DEFAULT_GPU_SOURCE)
    return out, said


def sweep_defaults(given: dict[str, Any]) -> dict[str, Any]:
    """`tcalc sweep`'s defaults, the training commands' (`training_defaults`) as a sweep reads
    them: the flash, zero, recompute and gpu axes' texts, the framework, and whether sequence
    parallelism defaults on at T > 1 (S is each model's training_seq_len; T is an axis)."""
    settings = {k: v for k, v in given.items() if k not in ("tensor", "sequence_parallel")}
    out, _ = training_defaults(None, {**settings, "tensor": 2})  # at T > 1: does SP default on?
    axes: dict[str, Any] = {k: str(out[k]).lower() for k in ("flash", "zero", "recompute", "gpu") if k in out}  # given: none
    return {**axes, "framework": str(settings.get("framework") or out["framework"]),
            "sp_with_tensor": bool(out.get("sequence_parallel", False))}


def inference_defaults(model: Any, given: dict[str, Any], kv: tuple[Any, str] | None, *, prompt_default: bool = True
                       ) -> list[Assumption]:
    """What `tcalc inference` and `tcalc serve` assume where `given` (flags, then the job file's
    inference: section) is silent: the GPU, S (the context window: a prompt fills what the model
    serves; inference only), and the KV cache's dtype (`kv`: the dtype in effect and its source,
    the engine's default)."""
    seen = {k: v for k, v in given.items() if v is not None}
    said: list[Assumption] = []
    if prompt_default and "seq_len" not in seen:
        said.append(Assumption("seq_len", model.max_seq_len, "the model's context window (max_seq_len)"))
    if "gpu" not in seen:
        said.append(Assumption("gpu", DEFAULT_GPU, DEFAULT_GPU_SOURCE))
    if "kv_dtype" not in seen and kv is not None:
        said.append(Assumption("kv_dtype", kv[0], kv[1]))
    return said


# `tcalc rl`: verl's GRPO example (examples/grpo_trainer/run_qwen2-7b.sh: train_batch_size 1024, rollout.n 5,
# max_prompt_length 512, ppo_mini_batch_size 256, use_kl_loss, rollout TP 2, gpu_memory_utilization 0.6,
# gradient checkpointing, FSDP), with the maximum response of its later versions (1024). The fitted
# efficiencies are the RL estimator's (`rl_efficiency_defaults`: imported when `tcalc rl` runs).
VERL_GRPO = "verl's GRPO example (examples/grpo_trainer/run_qwen2-7b.sh)"
RL_DEFAULTS: dict[str, tuple[Any, str]] = {
    "algorithm": ("grpo", "GRPO (Shao et al. 2024), the critic-free default of verl's, OpenRLHF's and NeMo-RL's recipes"),
    "prompts_per_step": (1024, VERL_GRPO + ": data.train_batch_size"),
    "seq_len": (512, VERL_GRPO + ": data.max_prompt_length"),
    "max_response_len": (1024, VERL_GRPO + ": data.max_response_length"),
    "response_len_dist": ("exponential", "a long right tail clipped at the maximum, the shape reasoning runs log"),
    "mini_batches": (4, VERL_GRPO + ": 1024 / ppo_mini_batch_size 256"),
    "epochs": (1, "ppo_epochs 1, verl's and OpenRLHF's default"),
    "off_policy_steps": (0, "on-policy: every step generates with the weights it trains"),
    "gpus": (8, "one 8-GPU node, " + VERL_GRPO),
    "placement": ("colocated", "verl's hybrid engine (trainer and engine on every GPU, in turn)"),
    "rollout_tensor": (2, VERL_GRPO + ": rollout.tensor_model_parallel_size"),
    "weight_dtype": ("bf16", "the trainer's bf16 weights, synced as they are"),
    "framework": ("torchtitan", "verl's FSDP workers: parameters, gradients and optimizer sharded (tcalc's FSDP2 profile)"),
    "recompute": ("full", VERL_GRPO + ": enable_gradient_checkpointing"),
}


def rl_efficiency_defaults() -> dict[str, tuple[Any, str]]:
    """The last of `tcalc rl`'s defaults: the efficiencies fitted in estimators/rl.py."""
    from transformer_calc.estimators.rl import GENERATION_EFFICIENCY, TRAINER_EFFICIENCY

    fitted = "fitted on 6 NeMo-RL H100 runs, checked on 19 others (docs/validation.md)"
    return {"generation_efficiency": (GENERATION_EFFICIENCY, fitted), "trainer_efficiency": (TRAINER_EFFICIENCY, fitted)}


def rl_defaults(given: dict[str, Any]) -> tuple[dict[str, Any], list[Assumption]]:
    """`tcalc rl`'s defaults for what `given` leaves unset (None), with their sources: verl's GRPO
    example, the GPU; G is 1 for PPO; μ is L/2; the engine's memory utilization is verl's 0.6
    when colocated (the trainer's states stay on the GPUs), else the engine's own; the engine's
    pool is half the GPUs when split; the reference is on for GRPO's KL term."""
    seen = {k: v for k, v in given.items() if v is not None}
    out: dict[str, Any] = {}
    said: list[Assumption] = []

    def default(option: str, value: Any, source: str) -> None:
        if option not in seen and option not in out:
            out[option] = value
            said.append(Assumption(option, value, source))

    for option, (value, source) in {**RL_DEFAULTS, **rl_efficiency_defaults()}.items():
        default(option, value, source)
    merged = {**out, **seen}
    if merged["algorithm"] == "ppo":
        default("group_size", 1, "PPO: one sample per prompt, its advantage from the critic")
    default("group_size", 5, VERL_GRPO + ": rollout.n")
    default("kl_reference", True, VERL_GRPO + ": use_kl_loss")
    merged = {**out, **seen}
    default("response_len_mean", merged["max_response_len"] / 2, "half the maximum response (L/2)")
    if merged["placement"] == "colocated":
        default("memory_utilization", 0.6, VERL_GRPO + ": rollout.gpu_memory_utilization (colocated)")
        default("sleep", True, "vLLM sleep mode / SGLang memory release, on in verl's and NeMo-RL's colocated runs")
        default("offload_idle", False, VERL_GRPO + ": actor param_offload and optimizer_offload off")
    else:
        default("rollout_gpus", max(1, merged["gpus"] // 2), "half the GPUs")
    default("gpu", DEFAULT_GPU, DEFAULT_GPU_SOURCE)
    return out, said
