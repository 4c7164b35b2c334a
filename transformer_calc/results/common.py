"""Parts every command's result shares: the model section, the checkpoint section, an accelerator row,
the peak dtype of a GPU.

A result is composed here from the estimators; docs/cli.md documents its keys."""

from __future__ import annotations
from typing import Any
from pydantic import create_model

from transformer_calc.model.config import SHOWN_WHEN_SET, ModelConfig
from transformer_calc.results.base import Section
from transformer_calc.estimators.params import count_params
from transformer_calc.errors import TcalcError, clip


def model_dict(m: ModelConfig) -> dict[str, Any]:
    """The resolved model (every default filled in), plus derived flags."""
    d = m.model_dump(mode="json")
    d["gated_mlp"] = m.gated_mlp
    return d


def _model_section_fields() -> dict[str, Any]:
    # the fields of SHOWN_WHEN_SET (hybrid mixers' widths) are keys only when the model sets them; a
    # text-only decoder's results have no towers key
    fields: dict[str, Any] = {name: (f.annotation, f.default if name in SHOWN_WHEN_SET else ...)
                              for name, f in ModelConfig.model_fields.items()}
    fields["towers"] = (fields["towers"][0], None)
    fields["gated_mlp"] = (bool, ...)
    return fields


# The `model` section of every result: each ModelConfig field as resolved (defaults filled in), in
# ModelConfig's order, and the derived `gated_mlp`. Built from ModelConfig's own fields, so a new
# model field is in every result without a second declaration.
ModelSection = create_model("ModelSection", __base__=Section, **_model_section_fields())


class WorkloadSection(Section):
    """The workload of a step: `model.config.Workload`'s fields."""

    seq_len: int  # S, tokens per sequence
    batch_size: int  # B, sequences per (micro-)batch


def model_section(m: ModelConfig) -> Any:
    """The `model` section of a result."""
    shown = {k: v for k, v in dict(m).items()
             if not (k == "towers" and v is None)  # unset: no key
             and (k not in SHOWN_WHEN_SET or v != ModelConfig.model_fields[k].default)}
    return ModelSection.model_validate({**shown, "gated_mlp": m.gated_mlp})


class AssumedDefault(Section):
    """One default that shaped an answer (requests/defaults.py): the option, its value, why."""

    option: str  # the job-file key (the request field)
    value: bool | int | float | str
    source: str


class Assumptions(Section):
    """What an answer assumed where neither a flag nor the job file said."""

    defaults: list[AssumedDefault]


def assumed_defaults(assumed: Any) -> list[AssumedDefault]:
    return [AssumedDefault(option=a.option, value=a.value, source=a.source) for a in assumed]


def assumptions_section(assumed: Any) -> Assumptions:
    return Assumptions(defaults=assumed_defaults(assumed))


class TowersSection(Section):
    """A multimodal model's parts beside its language model (docs/formulas.md "Towers"), in every
    result of a model that has them; `note` says what this result does with them."""

    counted: bool  # false: text_only, the model's counts are the language model's alone
    language_model: int  # the decoder with its embedding and head
    vision: int  # vision encoder
    audio: int  # audio encoder
    projector: int  # multimodal projector(s) into the language model's width
    towers: int  # vision + audio + projector
    total: int  # language_model + towers: what transformers builds for the config
    image_tokens: int  # language-model tokens one image becomes
    image_patches: int  # patches the vision encoder runs per image
    image_flops: int  # the vision encoder's forward FLOPs for one image (Towers.vision_flops)
    note: str


# What each command does with the towers (they are counted unless text_only).
_TOWER_USE = {
    "params": "counts include the towers",
    "inference": "weights include the towers, whole on every GPU; images (per sequence) add their tokens to "
                 "the prompt and the tower's encoding to the prefill",
    "training": "training memory, FLOPs and time cover the language model only: the towers are not included",
}


def towers_section(m: ModelConfig, command: str) -> TowersSection | None:
    """The `towers` section of a result (None for a text-only decoder); `command` is a _TOWER_USE key."""
    from transformer_calc.estimators.params import tower_params

    tp = tower_params(m)
    if tp is None or m.towers is None:
        return None
    parts = ", ".join(f"{name} {n:,}" for name, n in (("vision", tp.vision), ("audio", tp.audio),
                                                        ("projector", tp.projector)) if n)
    if tp.counted:
        note = f"{_TOWER_USE[command]} ({parts})"
    else:
        note = f"text_only: the towers ({parts}; {tp.towers:,} parameters) are left out of every count"
    return TowersSection(counted=tp.counted, language_model=tp.language_model, vision=tp.vision, audio=tp.audio,
                         projector=tp.projector, towers=tp.towers, total=tp.language_model + tp.towers,
                         image_tokens=m.towers.image_tokens, image_patches=m.towers.image_patches,
                         image_flops=m.towers.vision_flops, note=note)


def expected_component_params(m: ModelConfig) -> dict[str, int]:
    """The parameters the model config accounts for, by checkpoint component
    (checkpoint.COMPONENTS): what a checkpoint of this config should store."""
    c = count_params(m)
    n_moe, n_dense = c.n_moe_layers, c.n_dense_layers

    def layers(field: str) -> int:
        return n_moe * getattr(c.layer, field) + n_dense * getattr(c.dense_layer, field)

    routed = n_moe * (c.layer.mlp_weights + c.layer.mlp_bias) if m.is_moe else 0
    return {
        "embedding": c.embedding + c.position + c.embedding_projection // 2 + c.embedding_norm,
        "attention": n_moe * c.layer.attention + n_dense * c.dense_layer.attention,
        "mlp": layers("mlp_weights") + layers("mlp_bias") + layers("shared_expert") - routed,
        "experts": routed,
        "router": layers("router"),
        "norms": c.n_layers * c.layer.norms + c.final_norm,
        "head": c.lm_head + c.lm_head_bias + c.embedding_projection // 2,
        "towers": m.tower_params,  # vision/audio encoders and projectors the config accounts for
        "mtp": c.mtp,
        "other": 0,
    }


CHECKPOINT_FACTOR = 2  # stored vs the config's parameters: further apart than this, they are not one model


def check_checkpoint(m: ModelConfig, ckpt: Any) -> None:
    """Refuse a checkpoint whose stored parameters contradict its config (a Llama-3-8B config.json
    beside headers holding 90 thousand parameters, or the reverse): priced, it would give a
    confident wrong answer. The tolerance (docs/cli.md, "The checkpoint section"): one V·D head
    either way (a head tied in the config and stored untied, or the reverse), then a factor of
    CHECKPOINT_FACTOR (buffers such as rotary inv_freq, tensors the config does not describe:
    those are listed in `checkpoint.unaccounted`, not refused)."""
    if ckpt is None or not ckpt.tensors:
        return
    expected = sum(expected_component_params(m).values())
    head = m.vocab_size * m.d_model
    stored = ckpt.params
    low, high = (expected - head) / CHECKPOINT_FACTOR, (expected + head) * CHECKPOINT_FACTOR
    if low <= stored <= high:
        return
    raise TcalcError(
        f"checkpoint {clip(ckpt.source, 60)}: its {ckpt.format} headers hold {stored:,} parameters but its config describes "
        f"{expected:,}; they are not one model (a tied or untied head and a factor of {CHECKPOINT_FACTOR} are allowed): "
        "check that the weights and the config belong together"
    )


def with_checkpoint_weights(m: ModelConfig, tr: Any, ckpt: Any) -> Any:
    """Training settings whose frozen weights (LoRA, DoRA) are held as the checkpoint stores them:
    transformers loads an FP8/GPTQ/AWQ checkpoint without dequantizing it, and PEFT adapts it as it
    is. Full training (weights in the training precision) and QLoRA (NF4 from bitsandbytes) keep
    their own weight bytes."""
    if ckpt is None or tr.finetune.value not in ("lora", "dora"):
        return tr
    from transformer_calc.model.checkpoint import stored_weights

    sw = stored_weights(ckpt)
    language_model = sw.embedding_bytes + sw.experts_bytes + sw.rest_bytes
    return tr.model_copy(update={"frozen_weights": (language_model, count_params(m).total)})


class DtypeBytes(Section):
    tensors: int
    elements: int  # as stored (a packed int32 counts once)
    bytes: int


class ComponentBytes(Section):
    tensors: int
    params: int  # logical parameters stored
    expected_params: int  # what the config accounts for
    bytes: int  # weights
    scale_bytes: int  # quantization metadata beside them


class Unaccounted(Section):
    params: int  # stored minus expected
    examples: list[str]  # up to three tensor names


class CheckpointSection(Section):
    """What a checkpoint stores (its headers), beside what the config accounts for."""

    available: bool  # false: the stored bytes are not known or not used (see note)
    note: str | None
    format: str | None = None  # safetensors | gguf
    source: str | None = None
    quantization: str | None = None
    files: int | None = None
    tensors: int | None = None
    stored_bytes: int | None = None
    scale_bytes: int | None = None
    file_bytes: int | None = None
    resident_bytes: int | None = None
    params: int | None = None
    expected_params: int | None = None
    unaccounted_params: int | None = None
    compute_dtype: str | None = None
    by_dtype: dict[str, DtypeBytes] | None = None
    by_component: dict[str, ComponentBytes] | None = None
    unaccounted: dict[str, Unaccounted] | None = None


def checkpoint_section(m: ModelConfig, ckpt: Any, note: str | None) -> CheckpointSection:
    """The `checkpoint` section: what the checkpoint stores, per dtype and per component, beside
    what the config accounts for; parameters the config does not account for are listed, not
    dropped."""
    from transformer_calc.model.checkpoint import COMPONENTS, stored_weights

    if ckpt is None:
        return CheckpointSection(available=False, note=note)
    expected = expected_component_params(m)
    stored = ckpt.by_component()
    rows: dict[str, ComponentBytes] = {}
    for comp in COMPONENTS:
        got = stored.get(comp, {"params": 0, "bytes": 0, "scale_bytes": 0, "tensors": 0})
        if not got["tensors"] and not expected[comp]:
            continue
        rows[comp] = ComponentBytes(tensors=got["tensors"], params=got["params"], expected_params=expected[comp],
                                    bytes=got["bytes"], scale_bytes=got["scale_bytes"])
    unaccounted = {c: r.params - r.expected_params for c, r in rows.items() if r.params != r.expected_params}
    sw = stored_weights(ckpt)
    return CheckpointSection(
        available=True,
        note=note,
        format=ckpt.format,
        source=ckpt.source,
        quantization=ckpt.quantization,
        files=ckpt.files,
        tensors=len(ckpt.tensors),
        stored_bytes=ckpt.total_bytes,
        scale_bytes=sum(r.scale_bytes for r in rows.values()),
        file_bytes=ckpt.file_bytes,
        resident_bytes=sw.resident_bytes,
        params=ckpt.params,
        expected_params=sum(expected.values()),
        unaccounted_params=ckpt.params - sum(expected.values()),
        compute_dtype=sw.compute_dtype,
        by_dtype={k: DtypeBytes(**v) for k, v in ckpt.by_dtype().items()},
        by_component=rows,
        unaccounted={
            c: Unaccounted(params=n, examples=[t.name for t in ckpt.tensors if t.component == c][:3])
            for c, n in unaccounted.items()
        },
    )


def source_checkpoint(src: Any) -> CheckpointSection | None:
    """The checkpoint section of a resolved model source (`sources.resolve.Source`): present when
    the model came from a checkpoint (folder, repo, GGUF), also when its bytes are not known or
    not used (the note says why); None for a preset, a config or a job file."""
    if src.checkpoint is None and src.checkpoint_note is None:
        return None
    return checkpoint_section(src.model, src.checkpoint, src.checkpoint_note)


def peak_for(gpu: Any, dtype: str | None) -> tuple[str, Any]:
    """(dtype, dense peak FLOP/s): the asked dtype, else bf16, else fp16 (Volta, Turing)."""
    from transformer_calc.devices.hardware import peak_flops

    from transformer_calc.devices.hardware import peak_dtype

    dtype = peak_dtype(gpu, dtype)
    return dtype, peak_flops(gpu, dtype)


def network_for(gpu: Any, node_size: int | None = None, inter_node_gb_s: float | None = None) -> Any:
    """The GPU's default fabric (train.default_network) with --node-size and --inter-node-gb-s
    (GB/s per GPU, one way) applied; bad values are errors naming the flag."""
    import math

    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.training.train import default_network

    net = default_network(gpu)
    if node_size is not None:
        if isinstance(node_size, bool) or not isinstance(node_size, int) or node_size < 1:
            raise TcalcError(f"--node-size ({str(node_size)[:40]}) must be a whole number >= 1")
        net = net.__class__(node_size, net.intra_bytes_s, net.inter_bytes_s)
    if inter_node_gb_s is not None:
        if (isinstance(inter_node_gb_s, bool) or not isinstance(inter_node_gb_s, (int, float))
                or not (math.isfinite(inter_node_gb_s) and inter_node_gb_s > 0)):
            raise TcalcError(f"--inter-node-gb-s ({str(inter_node_gb_s)[:40]}) must be a positive number of GB/s")
        net = net.__class__(net.node_size, net.intra_bytes_s, inter_node_gb_s * 1e9)
    return net
