"""What each block does not price, and the one refusal every estimate goes through (issue 35).

`BLOCKS` is the one table: each `Block` is a part of a model beyond the standard attention + MLP/MoE layer
that some estimate or setting does not price. It says how a refusal names the block (`label`), when a model
has it (`present`), what prices the model instead (`priced_by`), and for each `Unpriced` item it does not
price (an estimate, or a setting of one: T > 1, ep > 1, cp > 1, an FP8 recipe, dropout, ...) why not.

`refusal(m, what, item)` builds the one `Error:` line for the model's blocks that do not price `item`:
what was asked (the caller's words, with its value), the blocks, the model, why, and the fix (the setting's
own, else what prices the model). `refuse` raises it when a block of the model does not price the item;
every refusal of a block goes through these two. docs/models.md's support matrix (tools/models_doc.py) is
the commands' answers, so each of its refusals is one of these lines (tests/test_support_table.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from transformer_calc.errors import TcalcError
from transformer_calc.model.config import LayerAttention, LayerStructureKind, ModelConfig
from transformer_calc.model.mixer_blocks import MIXER_BLOCKS


class Unpriced(str, Enum):
    """What a block may not price: an estimate (priced by its own estimators) or a setting of one."""

    training = "training"  # training memory, the timeline, step time
    uniform = "uniform"  # estimates that price every block from one layer's shapes: adapters, quantized formats
    attention_only = "attention_only"  # estimates written for softmax-attention blocks only
    tensor = "tensor"  # T > 1 in any estimate
    training_tensor = "training_tensor"  # T > 1 in the training estimates
    expert = "expert"  # ep > 1
    context = "context"  # cp > 1
    fp8 = "fp8"  # an FP8/FP4 training recipe
    seed = "seed"  # the seed activation profile (the notes' attention-only equations)
    dropout = "dropout"
    shaped_optimizer = "shaped_optimizer"  # an optimizer whose states follow each weight tensor's shape
    shaped_adapter_optimizer = "shaped_adapter_optimizer"  # the same over the adapters' tensors
    gguf = "gguf"  # a GGUF (llama.cpp) weight format
    windowed_flops = "windowed_flops"  # the causal or windowed attention FLOPs conventions
    naive_kv_cache = "naive_kv_cache"  # decoding without a KV cache
    offload = "offload"  # Megatron-core's activation offloading (training/memory.py FrameworkMemory)


# The fix of a setting (the estimates' fix is the block's `priced_by`).
FIXES: dict[Unpriced, str] = {
    Unpriced.tensor: "use T 1", Unpriced.training_tensor: "use T 1", Unpriced.expert: "use ep 1",
    Unpriced.context: "use cp 1", Unpriced.fp8: "use --fp8-recipe none",
    Unpriced.seed: "use --activations default or torch-eager", Unpriced.dropout: "use --dropout off",
    Unpriced.shaped_optimizer: "use adamw, adam, sgd or lion", Unpriced.shaped_adapter_optimizer: "use adamw, adam, sgd or lion",
    Unpriced.gguf: "use gptq-int4, awq-int4, nvfp4 or mxfp4, or the checkpoint's own bytes (--weights)",
    Unpriced.windowed_flops: "use the default convention (every pair eager computes)",
    Unpriced.naive_kv_cache: "drop --no-kv-cache", Unpriced.offload: "use offloaded_layers 0",
}
ESTIMATES = frozenset({Unpriced.training, Unpriced.uniform, Unpriced.attention_only})
# Refused as a plain ValueError, which a search over layouts or formats skips (the planner, serve's T, the
# fit's valid T) and the doors report as one line; the rest as TcalcError, the user's setting.
LAYOUTS = frozenset({Unpriced.tensor, Unpriced.training_tensor, Unpriced.expert, Unpriced.context,
                     Unpriced.naive_kv_cache, Unpriced.gguf, Unpriced.offload})


@dataclass(frozen=True)
class Block:
    """A block some estimate or setting does not price: its name in a refusal, when a model has it, what
    prices such a model, and {item it does not price: why ('' when the item says it all)}."""

    key: str
    label: Callable[[ModelConfig], str]
    present: Callable[[ModelConfig], bool]
    priced_by: str
    unpriced: Mapping[Unpriced, str]


_NO_INVENTORY = "no list of its tensors"
_OFFLOAD = "priced for uniform blocks only"
_KIND_SHAPED = "the notes' equations and these estimates price one attention shape"
_MIXER_UNPRICED: dict[Unpriced, str] = {
    Unpriced.attention_only: "", Unpriced.seed: "the notes' equations cover attention-only transformers",
    Unpriced.shaped_optimizer: _NO_INVENTORY,
    Unpriced.context: "its recurrent state passes from one sequence shard to the next: a pipeline over the cp "
                      "ranks, not a ring",
    Unpriced.gguf: "which of its tensors stay unquantized differs by mixer and llama.cpp version",
    Unpriced.offload: _OFFLOAD,
}
# Mixer kinds whose layers tcalc prices under an FP8 recipe: Megatron-core's MambaMixer runs in_proj
# and out_proj as Transformer Engine linears (TELayerNormColumnParallelLinear, TERowParallelLinear:
# FP8 under the recipe, megatron/core/ssm/mamba_mixer.py), the depthwise conv and the SSD chunked
# scan (mamba_ssm's Triton kernels) in bf16/fp32: priced layer by layer (fp8.py, precision.py). The
# other mixers' FP8 linears are not listed yet.
FP8_MIXERS = frozenset({LayerAttention.mamba2})
_MIXER_FP8 = {Unpriced.fp8: "only Mamba-2 layers price their FP8 weight copies, scaling state and FP8-saved inputs"}
_TRAINED = "tcalc params, flops, inference, serve, memory and train"
_PLAIN_WEIGHTS = "tcalc params, flops, inference and serve (plain weight dtypes), memory and train (no adapters)"
_UNTRAINED = {Unpriced.training: "", Unpriced.uniform: "", Unpriced.attention_only: "", Unpriced.fp8: "",
              Unpriced.seed: "", Unpriced.shaped_optimizer: _NO_INVENTORY}


def _mixer_block(kind: LayerAttention) -> Block:
    """A sequence-mixer kind (model/mixer_blocks.py; estimators/mixers/<module>.py): training priced, as are
    adapters and quantized formats (each from its `Mixer.linears`)."""

    def label(m: ModelConfig) -> str:
        from transformer_calc.estimators.mixers import MIXERS  # loaded for a model with mixers only (issue 39)

        return f"{MIXERS[kind].name} layers"

    fp8 = {} if kind in FP8_MIXERS else _MIXER_FP8
    return Block(kind.value, label, lambda m: kind in m.mixer_kinds, _TRAINED, {**_MIXER_UNPRICED, **fp8})


def _varied(m: ModelConfig, family: str) -> str:
    return f"{', '.join(m.irregular_layers)} ({family})"


_GEMMA4_TRAINING = {Unpriced.seed: "the notes' equations cover uniform blocks", Unpriced.dropout: "Gemma 4 trains without it",
                    Unpriced.fp8: "", Unpriced.shaped_optimizer: _NO_INVENTORY, Unpriced.shaped_adapter_optimizer: _NO_INVENTORY,
                    Unpriced.offload: _OFFLOAD}

BLOCKS: tuple[Block, ...] = (
    Block("deepseek_v4", lambda m: ", ".join(m.deepseek_v4_parts), lambda m: m.deepseek_v4 is not None,
          "tcalc params and flops, and inference and serve at T 1 with a plain weight dtype",
          {**_UNTRAINED,  # estimators/deepseek_v4.py, inference/deepseek_v4.py
           Unpriced.tensor: "transformers keeps its attention, compressors and indexers whole on every rank and "
                            "splits only the routed experts (spread them with ep)",
           Unpriced.windowed_flops: "", Unpriced.naive_kv_cache: "its compressors keep state across steps"}),
    Block("gemma3n", lambda m: _varied(m, "Gemma 3n"), lambda m: bool(m.unpriced_blocks),
          "tcalc params, flops, inference and serve",  # estimators/gemma_layers.py
          {**_UNTRAINED, Unpriced.tensor: "", Unpriced.expert: ""}),
    Block("gemma4", lambda m: _varied(m, "Gemma 4"), lambda m: m.layer_structure_kind is LayerStructureKind.gemma4,
          "tcalc params, flops, inference, serve and (at T 1) memory and train",  # training/gemma4.py
          {Unpriced.uniform: "priced by layer class where supported", Unpriced.attention_only: "", **_GEMMA4_TRAINING,
           Unpriced.context: "its kv-shared layers read other layers' K/V",
           Unpriced.training_tensor: "the layer classes' per-rank activations are not priced yet (tcalc params, "
                                     "inference and serve price T > 1)",
           Unpriced.expert: "tensor parallelism T is priced"}),
    Block("varied_layers", lambda m: ", ".join(m.irregular_layers),  # Gemma 4's layers beside another family's block
          lambda m: (bool(m.irregular_layers) and not m.unpriced_blocks and m.deepseek_v4 is None
                     and m.layer_structure_kind is not LayerStructureKind.gemma4),
          "tcalc params, flops, inference and serve", {**_UNTRAINED, Unpriced.expert: ""}),
    *(_mixer_block(b.kind) for b in MIXER_BLOCKS),
    Block("attn_output_gate", lambda m: "gated attention output", lambda m: m.attn_output_gate, _TRAINED,
          {Unpriced.attention_only: "", Unpriced.seed: "", Unpriced.fp8: "", Unpriced.shaped_optimizer: _NO_INVENTORY}),
    Block("one_mixer_per_layer", lambda m: "one-mixer-per-layer (Nemotron-H) blocks", lambda m: m.one_mixer_per_layer,
          _TRAINED, {Unpriced.attention_only: "", Unpriced.seed: "", Unpriced.shaped_optimizer: _NO_INVENTORY,
                     Unpriced.offload: _OFFLOAD}),
    Block("shared_block", lambda m: "shared transformer blocks (Zamba2)", lambda m: bool(m.shared_block_layer_ids),
          "tcalc params, flops, inference and serve at T 1 with a plain weight dtype",  # estimators/shared_block.py
          {**_UNTRAINED, Unpriced.tensor: "not laid out over tensor-parallel ranks yet"}),
    Block("per_kind_attention", lambda m: "sliding attention with its own K/V heads or sinks (MiMo-V2-Flash)",
          lambda m: m.per_kind_attention, _PLAIN_WEIGHTS,  # training/kind_attention.py
          {Unpriced.uniform: "", Unpriced.attention_only: "", Unpriced.seed: _KIND_SHAPED, Unpriced.dropout: "",
           Unpriced.fp8: "", Unpriced.shaped_optimizer: _NO_INVENTORY, Unpriced.shaped_adapter_optimizer: _NO_INVENTORY,
           Unpriced.offload: _OFFLOAD}),
    Block("latent_moe", lambda m: "latent MoE (Nemotron 3 Super)", lambda m: m.moe_latent_dim is not None,
          _PLAIN_WEIGHTS,  # training prices the experts, all-to-all and casts in ℓ
          {Unpriced.uniform: "", Unpriced.attention_only: ""}),
    Block("narrow_values", lambda m: "value heads narrower than head_dim (MiMo-V2-Flash)",
          lambda m: not m.is_mla and m.v_dim != m.head_dim, _PLAIN_WEIGHTS,  # training/kind_attention.py
          {Unpriced.uniform: "", Unpriced.attention_only: "", Unpriced.seed: _KIND_SHAPED, Unpriced.dropout: "",
           Unpriced.fp8: "", Unpriced.shaped_optimizer: _NO_INVENTORY, Unpriced.shaped_adapter_optimizer: _NO_INVENTORY,
           Unpriced.offload: _OFFLOAD}),
)


def unpriced_blocks(m: ModelConfig, item: Unpriced) -> list[Block]:
    """The model's blocks that do not price `item`, in the table's order."""
    return [b for b in BLOCKS if item in b.unpriced and b.present(m)]


def refusal(m: ModelConfig, what: str, item: Unpriced) -> ValueError:
    """The one line refusing `what` (the estimate or setting as the user gave it, with its value) for the
    model's blocks that do not price `item`: the blocks, the model, why, and the fix (a ValueError for the
    `LAYOUTS`, else a TcalcError)."""
    blocks = unpriced_blocks(m, item) or [b for b in BLOCKS if b.present(m)][:1]
    labels = ", ".join(b.label(m) for b in blocks) or "this model's blocks"
    why = blocks[0].unpriced.get(item, "") if blocks else ""
    fix = FIXES.get(item) or f"{blocks[0].priced_by if blocks else 'tcalc params and flops'} price this model"
    error = ValueError if item in LAYOUTS else TcalcError
    return error(f"{what} is not priced for {labels} (model {m.name or 'given'})" + (f": {why}" if why else "") + f"; {fix}")


def refuse(m: ModelConfig, what: str, item: Unpriced) -> None:
    """Raise `refusal` when a block of the model does not price `item`."""
    if unpriced_blocks(m, item):
        raise refusal(m, what, item)
