"""Fine-tuning with adapters: trainable parameters, quantized frozen weights, adapter activations.

Sources: Hu et al. 2021 (LoRA: W x + B A x, A r x d_in, B d_out x r, only A and B trained),
Dettmers et al. 2023 (QLoRA: NF4 storage with double quantization, sec. 3), Liu et al. 2024 (DoRA:
a magnitude vector of d_out per adapted matrix, m (W + BA) / ||W + BA||_c), PEFT 0.21.2
(`get_peft_model`, `LoraConfig(target_modules=..., use_dora=..., modules_to_save=...)`), which
tools/crosscheck/peft_params.py checks tcalc's trainable count against, family by family.

Conventions (docs/formulas.md "Fine-tuning"):
- A target (q, k, v, o, gate, up, down) selects the Linear modules that compute that part; a fused
  module (GPT-2's c_attn, NeoX/Falcon/BLOOM query_key_value, Phi-3 qkv_proj and gate_up_proj) is
  adapted whole when any of its parts is named, as PEFT can only wrap the module. `all-linear` is
  PEFT's shorthand: every Linear/Conv1D module but the output layer (the LM head), OPT's embedding
  projections and a MoE block's shared expert and its gate included.
- Routed MoE experts and routers are not part of `all-linear`: transformers 5 stores experts as
  3-D parameters and routers as custom modules, which `all-linear` (a type match on nn.Linear) does
  not reach. The `experts` and `router` targets adapt them as PEFT's `target_parameters` does
  (`adapter_linears`). PEFT 0.21's own `all-linear` converts Mixtral-pattern models (mixtral,
  qwen3_moe, glm4_moe, deepseek_v3, kimi_k2) back to their transformers-4 targets (experts and
  router adapted, gate_up at rank 2r, dense MLPs and shared experts dropped); tcalc's all-linear does
  the same for models with `all_linear_experts` (set from the model_type). qwen2_moe's conversion
  and Llama 4's nn.Linear router are not reproduced (tools/crosscheck/peft_params.py
  compares those families on the other targets).
- lora_alpha scales the adapter output by alpha/r: it changes no tensor's size (no memory term).
- LoRA dropout is off (PEFT's default lora_dropout = 0: an nn.Identity, no mask, no copy of x).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from transformer_calc.estimators.attention import attention_block
from transformer_calc.estimators.mixers import MIXERS, require_uniform_blocks
from transformer_calc.estimators.training.attention_blocks import (adapter_input_delta, attention_training,
                                                             beside_attention_linears)
from transformer_calc.estimators.training.latent_moe import latent_matrices
from transformer_calc.model.units import FLOPS_PER_MAC
from transformer_calc.model.config import (
    ATTENTION_KINDS, Finetune, LayerAttention, LoraTarget, ModelConfig, Parallelism, Precision, Training,
)
from transformer_calc.estimators.training.trainable import Trainable, all_trainable, head_trained  # noqa: F401  (their home before issue 39)

if TYPE_CHECKING:
    from transformer_calc.estimators.flops import StepFlops

ATTENTION_TARGETS = frozenset({LoraTarget.q, LoraTarget.k, LoraTarget.v, LoraTarget.o})

# NF4 with double quantization (Dettmers et al. 2023, sec. 3 "Double Quantization"): 4-bit codes,
# one absmax per block of 64 weights quantized to 8 bits, one fp32 constant per 256 such blocks.
NF4_CODE_BITS = 4
NF4_BLOCK = 64
NF4_ABSMAX_BYTES = 1  # the first-level constant after double quantization (FP8 in the paper's words)
NF4_BLOCKS_PER_GROUP = 256
NF4_GROUP_CONSTANT_BYTES = 4  # the second-level constant c2 (fp32)

ADAPTER_FP32_BYTES = 4  # PEFT autocast_adapter_dtype=True: adapters over a 16-bit base are fp32
FP32_BYTES = 4


@dataclass(frozen=True)
class Linear:
    """One Linear module of a block (on one tensor-parallel rank, `d_in` x `d_out` as sharded).

    `parts` are the targets that select it; `split` says how Megatron-style tensor parallelism
    cuts it: 'col' (the output dimension, and lora_B with it), 'row' (the input dimension, and
    lora_A with it), 'rep' (replicated on every rank).
    """

    name: str
    parts: frozenset[LoraTarget]
    d_in: int
    d_out: int
    split: str = "col"
    all_linear_only: bool = False  # selected by `all-linear` only (a shared expert's gate, OPT's projections)
    count: int = 1  # identical modules on this rank (routed experts: n_experts / ep)
    all_linear: int = 1  # `all-linear` adapts it at rank all_linear·r (0: all-linear leaves it out)
    routed: bool = False  # a routed expert's: it sees k·B·S tokens over all `count` of them, not B·S each
    bypassed: bool = False  # the model multiplies by its weight directly: an adapter on it never runs (no FLOPs)




def _col(name: str, parts: set[LoraTarget], d_in: int, d_out: int, T: int) -> Linear:
    return Linear(name, frozenset(parts), d_in, d_out // T, "col")


def _row(name: str, parts: set[LoraTarget], d_in: int, d_out: int, T: int) -> Linear:
    return Linear(name, frozenset(parts), d_in // T, d_out, "row")


def require_adapters_priced(m: ModelConfig) -> None:
    """Refuse, in one line, adapters on the parts this module does not price (`require_uniform_blocks`):
    every mixer kind is priced; Gemma 4's varied layers have their own classes (estimators/training/gemma4.py,
    whose callers never reach here for Gemma 4); MiMo-V2-Flash's per-kind attention is not priced under adapters."""
    require_uniform_blocks(m, "fine-tuning (adapters)")

def attention_linears(m: ModelConfig, T: int = 1) -> list[Linear]:
    """The softmax-attention (or MLA) Linear modules of one layer on one tensor-parallel rank
    (its block's `linears`, estimators/attention.py)."""
    return [Linear(*x) for x in attention_block(m).linears(m, T)]


def sequence_linears(m: ModelConfig, kind: LayerAttention, T: int = 1) -> list[Linear]:
    """The sequence mixer's Linear modules of one layer of `kind` on one rank: softmax attention's
    (targets q, k, v, o), a `mixers` kind's own modules (`Mixer.linears`: target `mixer`; with
    `mixer_beside_attention`, Falcon-H1, the layer's attention beside them), none for a layer
    without a sequence mixer (Nemotron-H's MLP blocks)."""
    if kind in ATTENTION_KINDS:
        return attention_linears(m, T)
    if kind is LayerAttention.none:
        return []
    mixer = frozenset({LoraTarget.mixer})
    out = [Linear(x.name, mixer, x.d_in, x.d_out, x.split, bypassed=x.bypassed) for x in MIXERS[kind].linears(m, T)]
    return [Linear(*x) for x in beside_attention_linears(m, T)] + out  # Falcon-H1's attention (attention_blocks.py)


def channel_linears(m: ModelConfig, moe: bool, T: int = 1) -> list[Linear]:
    """The channel mixer's Linear modules of one layer (the dense MLP, or a MoE block's shared
    expert and its gate; the routed experts and the router: `adapter_linears`)."""
    D = m.d_model
    mlp: list[Linear] = []
    if moe:
        if m.shared_expert_d_ff:
            mlp += _mlp(m, m.shared_expert_d_ff, T, "shared_expert.")
        if m.shared_expert_gate:
            mlp.append(Linear("shared_expert_gate", frozenset(), D, 1, "rep", all_linear_only=True))
    else:
        mlp += _mlp(m, m.d_ff, T, "")
    if m.all_linear_experts:  # PEFT's converted all-linear names no dense MLP or shared expert
        mlp = [replace(x, all_linear=0) for x in mlp]
    return mlp


def block_linears(m: ModelConfig, moe: bool, T: int = 1) -> list[Linear]:
    """The adaptable Linear modules of one attention block (attention + its MLP), as one
    tensor-parallel rank holds them; a hybrid's layers: `sequence_linears` and `channel_linears`
    summed over `layer_counts`.

    Routed experts and the router are left out (see the module docstring).
    """
    require_adapters_priced(m)
    return attention_linears(m, T) + channel_linears(m, moe, T)


@dataclass(frozen=True)
class LayerCounts:
    """How many layers of [start, stop) have each sequence-mixer kind, a MoE and a dense MLP (a
    layer's adapters, quantized matrices and FLOPs are its sequence part plus its channel part,
    so sums over layers need only these counts: no loop over the layers)."""

    sequence: dict[LayerAttention, int]
    moe: int
    dense: int


def layer_counts(m: ModelConfig, start: int = 0, stop: int | None = None) -> LayerCounts:
    stop = m.n_layers if stop is None else stop
    n_moe = m.n_moe_layers(start, stop)
    seq = {k: m.n_attention_layers(k, start, stop) for k in dict.fromkeys(m.attention_pattern)}
    return LayerCounts(sequence={k: n for k, n in seq.items() if n}, moe=n_moe,
                       dense=(stop - start) - n_moe - m.n_channel_free_layers(start, stop))


def layer_linears(m: ModelConfig, counts: LayerCounts, T: int = 1, ep: int = 1, etp: int | None = None
                  ) -> list[tuple[list[Linear], int]]:
    """(Linear modules, layers) pairs whose sum is `counts`' layers: each sequence kind's modules,
    a MoE block's channel modules with its experts and router, a dense MLP's."""
    out = [(sequence_linears(m, k, T), n) for k, n in counts.sequence.items()]
    if counts.moe:
        out.append((channel_linears(m, True, T) + expert_linears(m, T, ep, etp), counts.moe))
    if counts.dense:
        out.append((channel_linears(m, False, T), counts.dense))
    return out


def _mlp(m: ModelConfig, F: int, T: int, prefix: str) -> list[Linear]:
    gate, up, down = LoraTarget.gate, LoraTarget.up, LoraTarget.down
    D = m.d_model
    if not m.gated_mlp:
        return [_col(f"{prefix}up", {up}, D, F, T), _row(f"{prefix}down", {down}, F, D, T)]
    if m.fused_gate_up:
        first = [_col(f"{prefix}gate_up_proj", {gate, up}, D, 2 * F, T)]
    else:
        first = [_col(f"{prefix}gate_proj", {gate}, D, F, T), _col(f"{prefix}up_proj", {up}, D, F, T)]
    return first + [_row(f"{prefix}down_proj", {down}, F, D, T)]


def embedding_linears(m: ModelConfig) -> tuple[list[Linear], list[Linear]]:
    """(first-stage, last-stage) Linear modules outside the blocks that `all-linear` adapts: OPT's
    project_in (d_embed -> D) and project_out (D -> d_embed); replicated under TP."""
    if m.d_embedding == m.d_model:
        return [], []
    return (
        [Linear("project_in", frozenset(), m.d_embedding, m.d_model, "rep", all_linear_only=True)],
        [Linear("project_out", frozenset(), m.d_model, m.d_embedding, "rep", all_linear_only=True)],
    )


PARAMETER_TARGETS = frozenset({LoraTarget.experts, LoraTarget.router})


def selected(lin: Linear, targets: tuple[LoraTarget, ...]) -> bool:
    if LoraTarget.all_linear in targets and lin.all_linear:
        return True
    return not lin.all_linear_only and bool(lin.parts & set(targets))


def lin_rank(lin: Linear, tr: Training) -> int:
    """The adapter rank on a selected module: r, or all_linear·r when `all-linear` chose it (PEFT's
    converted Mixtral-pattern experts: w1 and w3 of rank r each become one gate_up of rank 2r)."""
    if LoraTarget.all_linear in tr.lora_targets and lin.all_linear:
        return tr.lora_rank * lin.all_linear
    return tr.lora_rank


def adapter_linears(m: ModelConfig, moe: bool, T: int = 1, ep: int = 1, etp: int | None = None) -> list[Linear]:
    """Everything an adapter can go on in one attention block: `block_linears`, and in a MoE block
    the routed experts and the router (`expert_linears`)."""
    return block_linears(m, moe, T) + (expert_linears(m, T, ep, etp) if moe else [])


def expert_linears(m: ModelConfig, T: int = 1, ep: int = 1, etp: int | None = None) -> list[Linear]:
    """A MoE block's routed experts' stacked projections and its router, as PEFT's
    `target_parameters` adapts them in transformers 5 (an expert's fused gate_up, D -> 2·F_e, and its
    down, F_e -> D, each with its own A and B of rank r; the router D -> n_experts)."""
    etp = T if etp is None else etp
    D, F, n = m.d_model, m.moe_d_ff // etp, m.n_experts // ep
    ex = frozenset({LoraTarget.experts})
    n_in = 2 if m.gated_mlp else 1
    # Never by all-linear (3-D parameters and a custom router module), except under PEFT's
    # conversion of the Mixtral-pattern families (`all_linear_experts`).
    conv = 1 if m.all_linear_experts else 0
    out = [Linear("experts.gate_up_proj" if m.gated_mlp else "experts.up_proj", ex, D, n_in * F, "col",
                  count=n, routed=True, all_linear=n_in * conv),
           Linear("experts.down_proj", ex, F, D, "row", count=n, routed=True, all_linear=conv)]
    if m.router:
        out.append(Linear("router", frozenset({LoraTarget.router}), D, m.n_experts, "rep", all_linear=conv))
    return out


def adapter_params(lin: Linear, r: int, dora: bool) -> int:
    """LoRA's A (r x d_in) and B (d_out x r), and DoRA's magnitude (d_out), on one rank (for each of
    `count` identical modules)."""
    return lin.count * (r * (lin.d_in + lin.d_out) + (lin.d_out if dora else 0))


@dataclass(frozen=True)
class Adapted:
    """What the adapters of one block (or the embedding/head side) add, on one rank."""

    params: int  # trainable adapter parameters
    modules: int  # adapted Linear modules
    gate_up: bool  # a module reading the MLP input is adapted
    down: bool  # W_down (or the shared expert's) is adapted
    qkv: bool  # a module reading the attention input is adapted
    o: bool  # the attention output projection is adapted
    experts: bool = False  # the routed experts are adapted


def adapted(linears: list[Linear], tr: Training) -> Adapted:
    """The adapters on `linears` for the training's targets, rank and method."""
    dora = tr.finetune is Finetune.dora
    chosen = [lin for lin in linears if selected(lin, tr.lora_targets)]
    return Adapted(
        params=sum(adapter_params(lin, lin_rank(lin, tr), dora) for lin in chosen),
        modules=sum(lin.count for lin in chosen),
        gate_up=any(lin.parts & {LoraTarget.gate, LoraTarget.up} for lin in chosen),
        down=any(LoraTarget.down in lin.parts for lin in chosen),
        qkv=any(lin.parts & {LoraTarget.q, LoraTarget.k, LoraTarget.v} for lin in chosen),
        o=any(LoraTarget.o in lin.parts for lin in chosen),
        experts=any(lin.routed for lin in chosen),
    )


def check_targets(m: ModelConfig, tr: Training) -> None:
    """A target list that selects no module of this model is an error (PEFT raises too)."""
    if not tr.adapters:
        return
    require_adapters_priced(m)
    mods = [lin for linears, _ in layer_linears(m, layer_counts(m)) for lin in linears]
    names = ",".join(t.value for t in tr.lora_targets)
    if not any(selected(lin, tr.lora_targets) for lin in mods):
        raise ValueError(
            f"lora_targets ({names}) select no module of this model (a plain MLP has no gate; experts and "
            "router need a MoE model; mixer needs layers other than attention); choose from "
            "q,k,v,o,gate,up,down,experts,router,mixer or all-linear"
        )
    converted = LoraTarget.all_linear in tr.lora_targets and m.all_linear_experts and m.n_moe_layers()
    if tr.finetune is Finetune.dora and converted:
        raise ValueError(f"lora_targets ({names}): PEFT's all-linear on this model adapts the experts' and router's "
                         "parameters, where DoRA does not work (PEFT's ParamWrapper); use --finetune lora or list "
                         "module targets (q,k,v,o)")
    if tr.finetune is Finetune.dora and set(tr.lora_targets) & PARAMETER_TARGETS:
        raise ValueError(f"lora_targets ({names}): DoRA adapts modules, not the experts' or router's parameters "
                         "(PEFT's target_parameters); use --finetune lora or drop experts,router")


# ---------------------------------------------------------------------------- trainable params
def trainable_params(m: ModelConfig, tr: Training) -> Trainable:
    """What PEFT's `get_nb_trainable_parameters()` reports (every parameter for full training)."""
    from transformer_calc.estimators.params import count_params

    if not tr.adapters:
        return all_trainable(m)
    counts = count_params(m)
    require_adapters_priced(m)
    first, last = embedding_linears(m)
    side = adapted(first + last, tr)
    parts = [(adapted(linears, tr), n) for linears, n in layer_linears(m, layer_counts(m))]
    adapters = sum(n * a.params for a, n in parts) + side.params
    modules = sum(n * a.modules for a, n in parts) + side.modules
    embedding = counts.embedding if tr.train_embeddings else 0
    head = 0
    if tr.train_head:
        head = counts.lm_head + counts.lm_head_bias if not m.tied_embeddings else (0 if tr.train_embeddings else counts.embedding)
    return Trainable(adapters=adapters, embedding=embedding, head=head, adapted_modules=modules)


def block_adapter_params(m: ModelConfig, tr: Training, counts: LayerCounts, T: int = 1, ep: int = 1,
                         etp: int | None = None) -> int:
    """Trainable adapter parameters of the layers `counts` on one rank (no embedding-side modules)."""
    return sum(n * adapted(linears, tr).params for linears, n in layer_linears(m, counts, T, ep, etp))


# ---------------------------------------------------------------------------- bytes per parameter
def trainable_weight_bytes(tr: Training) -> int:
    """Bytes of one trainable parameter held for the update: fp32 in mixed precision (PEFT keeps
    adapters over a 16-bit base in fp32; an embedding or head being trained needs its fp32 copy
    for the update too), 2 in pure bf16, 4 in fp32."""
    return 2 if tr.precision is Precision.bf16 else ADAPTER_FP32_BYTES


def nf4_bytes(n: int) -> int:
    """Bytes of one n-element tensor in NF4 with double quantization (Dettmers et al. 2023):
    n/2 bytes of codes, one 8-bit absmax per 64 weights, one fp32 constant per 256 blocks
    (4 + 8/64 + 32/(64·256) = 4.127 bits per weight; partial blocks round up).

    >>> nf4_bytes(4096 * 4096)
    8654848
    """
    blocks = -(-n // NF4_BLOCK)
    groups = -(-blocks // NF4_BLOCKS_PER_GROUP)
    return -(-n * NF4_CODE_BITS // 8) + NF4_ABSMAX_BYTES * blocks + NF4_GROUP_CONSTANT_BYTES * groups


def block_matrices(m: ModelConfig, moe: bool, T: int = 1, ep: int = 1, etp: int | None = None) -> list[tuple[int, int]]:
    """(elements, count) of the weight matrices of one attention block that bitsandbytes quantizes
    (its Linear4bit replaces every nn.Linear but the output layer): attention, dense MLP, shared
    expert and its gate, and the routed experts (assumed quantized per expert matrix); the router
    stays 16-bit. One tensor-parallel rank's shards. A hybrid's layers: `layer_matrices`."""
    return [(lin.d_in * lin.d_out, 1) for lin in block_linears(m, moe, T)] + _expert_matrices(m, moe, ep, T if etp is None else etp)


def _expert_matrices(m: ModelConfig, moe: bool, ep: int, etp: int) -> list[tuple[int, int]]:
    if not moe:
        return []
    D, F = m.expert_d, m.moe_d_ff // etp  # a latent MoE's experts read and write ℓ
    n_mats = 3 if m.gated_mlp else 2
    return [(D * F, n_mats * (m.n_experts // ep))] + latent_matrices(m)  # LatentMoE's D -> ℓ, ℓ -> D, whole


def layer_matrices(m: ModelConfig, counts: LayerCounts, T: int = 1, ep: int = 1, etp: int | None = None
                   ) -> list[tuple[int, int]]:
    """(elements, count) of every matrix bitsandbytes quantizes in the layers `counts`, on one rank:
    each sequence kind's Linear modules (a mixer's in/out projections and gates: its conv1d, an
    nn.Conv1d, and its A_log, dt_bias, D and norms are not Linear and stay unquantized), each
    MLP's, and the routed experts'."""
    etp = T if etp is None else etp
    out = [(lin.d_in * lin.d_out, n) for k, n in counts.sequence.items() for lin in sequence_linears(m, k, T)]
    for moe, n in ((True, counts.moe), (False, counts.dense)):
        if n:
            out += [(lin.d_in * lin.d_out, n) for lin in channel_linears(m, moe, T)]
            out += [(e, c * n) for e, c in _expert_matrices(m, moe, ep, etp)]
    return out


def quantized(mats: list[tuple[int, int]]) -> tuple[int, int]:
    """(elements, NF4 bytes) of the listed matrices."""
    return sum(n * c for n, c in mats), sum(nf4_bytes(n) * c for n, c in mats)


def frozen_weight_bytes(m: ModelConfig, tr: Training, params: int, counts: LayerCounts, T: int, ep: int, etp: int | None) -> tuple[int, int]:
    """(bytes, of which NF4) of `params` frozen parameters held by one GPU, whose layers are
    `counts`. LoRA/DoRA: every parameter at p bytes. QLoRA: the blocks' Linear
    weights in NF4, the rest (embeddings, norms, biases, LM head, router) at p bytes, as
    bitsandbytes leaves them (fp32 with `fp32_unquantized`, as PEFT's prepare_model_for_kbit_training
    casts them)."""
    if tr.finetune is not Finetune.qlora:
        if tr.frozen_weights is not None:  # a checkpoint's stored bytes per parameter (FP8, GPTQ, ...)
            stored, n = tr.frozen_weights
            return -(-params * stored // n), 0
        return params * tr.p, 0
    elems, nf4 = quantized(layer_matrices(m, counts, T, ep, etp))
    # PEFT's prepare_model_for_kbit_training casts every parameter that is not Params4bit to fp32
    unquantized = FP32_BYTES if tr.fp32_unquantized else tr.p
    return (params - elems) * unquantized + nf4, nf4


def largest_quantized_matrix(m: ModelConfig, T: int = 1, ep: int = 1, etp: int | None = None) -> int:
    """Elements of the largest quantized matrix: bitsandbytes dequantizes one to 16 bits per matmul."""
    return max(n for n, _ in layer_matrices(m, layer_counts(m), T, ep, etp))


# ---------------------------------------------------------------------------- activations
@dataclass(frozen=True)
class ActivationDelta:
    """Bytes one block's stored activations change by under adapters (negative: no longer kept)."""

    attention: int
    mlp: int


def separate_adapter_inputs(tr: Training) -> bool:
    """Whether each adapted module keeps its own copy of its input.

    Mixed precision (PEFT's default over a 16-bit base: fp32 adapters, run under autocast): PEFT
    casts the input to the adapter's dtype (`_cast_input_dtype`), and autocast casts it back to 16
    bits for lora_A's matmul, which keeps that copy, one per adapted module (q, k and v each keep
    one of the same input). Pure bf16 or fp32 (adapters in the base's dtype): no cast, lora_A keeps
    the very tensor the base layer read, shared by every module that reads it.
    """
    from transformer_calc.model.config import Precision

    return tr.precision is Precision.mixed


def activation_delta(
    m: ModelConfig, B: int, S: int, S_rep: int, tr: Training, par: Parallelism, moe: bool, *,
    o_input_is_output: bool, down_input_needed: bool,
) -> ActivationDelta:
    """Stored-activation change of one block under adapters (p bytes per element).

    Frozen matrices need no saved input: a Linear's input is kept only for its weight gradient
    (x^T dy); the input gradient (dy W^T) needs W alone, and PyTorch's autograd saves a tensor only
    for the gradients it will compute; bitsandbytes' 4-bit matmul keeps only the quantized weight.
    So these are dropped, unless an adapter reads the very tensor (shared inputs, pure bf16/fp32):
    the attention input (the norm's output, read by q/k/v), W_O's input (unless it is the attention
    kernel's output that FlashAttention keeps: `o_input_is_output`), the MLP input (gate/up; the
    router and frozen routed experts read it too), W_down's input (unless the activation's backward
    needs it: `down_input_needed`), and the routed experts' permuted inputs. Each adapted module
    keeps its rank-r intermediate (lora_B's input, B·S·r) and, in mixed precision, its own 16-bit
    copy of its input (`separate_adapter_inputs`) and autocast's 16-bit copies of its A and B (kept
    for the input gradient: p·r·(d_in + d_out)). DoRA keeps two more d_out-wide tensors per module,
    the base output and the scaled LoRA output, whose product with the magnitude needs them (PEFT
    DoraLinearLayer; the weight norm is detached, Liu et al. 2024 sec. 4.3). Checked against
    PyTorch's saved tensors by tools/crosscheck/lora_activations.py.
    """
    p, T = tr.p, par.tensor
    D = m.d_model
    lin = adapter_linears(m, moe, T, par.expert, par.expert_tensor)
    chosen = [x for x in lin if selected(x, tr.lora_targets)]
    separate = separate_adapter_inputs(tr)
    ad = adapted(lin, tr) if not separate else Adapted(0, 0, False, False, False, False)  # nothing shared
    attn = mlp = 0
    if not ad.qkv:  # the input q/k/v keep for their weight gradients (none for MLA: attention_blocks.py)
        attn -= p * B * S_rep * attention_training(m).qkv_input_width(m)
    if not ad.o and not o_input_is_output:
        attn -= p * B * S * (m.n_heads // T) * m.v_dim
    shared_input = m.parallel_attn and m.norms_per_layer == 1
    if not ad.gate_up and not shared_input:
        mlp -= p * B * S_rep * D
    if not down_input_needed:
        if moe:  # the frozen routed experts' W_down inputs; the shared expert's unless adapted
            if not ad.experts:
                mlp -= m.experts_per_token * p * B * S * (m.moe_d_ff // par.expert_tensor_size)
            if m.shared_expert_d_ff and not ad.down:
                mlp -= p * B * S * (m.shared_expert_d_ff // T)
        elif not ad.down:
            mlp -= p * B * S * (m.d_ff // T)
    if moe and not ad.experts:
        mlp -= m.experts_per_token * p * B * S * D  # the routed copies the frozen experts read
    dora = 2 if tr.finetune is Finetune.dora else 0

    def kept(x: Linear) -> int:
        r = lin_rank(x, tr)
        tokens = m.experts_per_token * B * S if x.routed else B * S  # a routed expert's modules share k·B·S
        own = tokens * x.d_in + x.count * r * (x.d_in + x.d_out) if separate else 0  # input copy, A and B casts
        return p * (tokens * (r + dora * x.d_out) + own)

    attn += sum(kept(x) for x in chosen if x.parts & ATTENTION_TARGETS)
    mlp += sum(kept(x) for x in chosen if not x.parts & ATTENTION_TARGETS)
    return ActivationDelta(attention=attn, mlp=mlp)


def mixer_activation_delta(m: ModelConfig, kind: LayerAttention, B: int, S: int, S_rep: int, tr: Training,
                           par: Parallelism, *, fused: bool) -> int:
    """Stored-activation change of one layer whose sequence mixer is `kind` (a `mixers` kind) under
    adapters, as `activation_delta` prices attention's (p bytes per element).

    A frozen Linear keeps no input (autograd saves it only for the weight gradient), so the layer's
    input (the norm's output, p·B·S_rep·D, which the in-projections read) is dropped unless an
    adapted module reads that very tensor (shared inputs: pure bf16/fp32); with
    `mixer_beside_attention` (Falcon-H1) the attention part owns that input and in_proj reads a
    scaled copy of it (torch-eager: dropped with in_proj frozen); a frozen module whose input the mixer keeps for its weight gradient alone
    (`MixerLinear.reads`: out_proj, Jamba's dt_proj, Kimi's f_b_proj/g_b_proj; the fused Mamba-2
    kernel keeps no out_proj input at all) drops that input, B·S·d_in; what the mixer keeps for
    its own backward (the in-projections' outputs: conv input, gates, B/C) stays, but what only the
    gradients of its frozen conv weight, A_log, dt_bias, D and norm weights needed goes
    (`Mixer.frozen_parameter_bytes`: PEFT freezes every base parameter). Each adapted
    module adds what it adds in attention: its rank-r intermediate, DoRA's two d_out-wide tensors,
    and in mixed precision its own 16-bit input copy and the casts of A and B.
    """
    from transformer_calc.estimators.mixers.base import KEPT_VIEW, WEIGHT, WEIGHT_EAGER

    p, T = tr.p, par.tensor
    mods = [Linear(x.name, frozenset({LoraTarget.mixer}), x.d_in, x.d_out, x.split) for x in MIXERS[kind].linears(m, T)]
    reads = {x.name: x.reads for x in MIXERS[kind].linears(m, T)}
    bypassed = {x.name for x in MIXERS[kind].linears(m, T) if x.bypassed}  # adapters that never run (Jamba's dt_proj)
    chosen = {x.name for x in mods if selected(x, tr.lora_targets)} - bypassed
    separate = separate_adapter_inputs(tr)
    # the layer's input (with Falcon-H1's attention beside the mixer, in_proj's scaled copy: attention_blocks.py)
    delta = adapter_input_delta(m, reads, chosen, separate=separate, fused=fused, p=p, B=B, S=S, S_rep=S_rep)
    own = (WEIGHT,) if fused else (WEIGHT, WEIGHT_EAGER)
    for x in mods:
        if reads[x.name] in own and (x.name not in chosen or separate):
            delta -= p * B * S * x.d_in  # frozen (or reading its own copy): the weight's input goes
    # the frozen conv weight, A_log, dt_bias, D and norm weights: what only their gradients needed goes
    delta -= MIXERS[kind].frozen_parameter_bytes(m, B, S, p, T, fused)
    dora = 2 if tr.finetune is Finetune.dora else 0
    for x in mods:
        if x.name in chosen:
            r, tokens = lin_rank(x, tr), B * S
            copies = tokens * x.d_in + r * (x.d_in + x.d_out) if separate else 0
            if not separate and reads[x.name] == KEPT_VIEW:  # lora_A reshapes the transposed view: a copy
                copies = tokens * x.d_in
            delta += p * (tokens * (r + dora * x.d_out) + copies)
    return delta


# ---------------------------------------------------------------------------- step FLOPs


def adapter_flops_per_token(m: ModelConfig, tr: Training) -> int:
    """Forward FLOPs of every adapter, per token: 2·r·(d_in + d_out) per adapted module (T = 1)."""
    if not tr.adapters:
        return 0

    def per_token(x: Linear) -> int:  # a routed expert's adapters run on the k experts a token goes to
        return FLOPS_PER_MAC * lin_rank(x, tr) * (x.d_in + x.d_out) * (m.experts_per_token if x.routed else 1)

    blocks = sum(n * sum(per_token(x) for x in linears if selected(x, tr.lora_targets) and not x.bypassed)
                 for linears, n in layer_linears(m, layer_counts(m)))
    first, last = embedding_linears(m)
    side = sum(FLOPS_PER_MAC * tr.lora_rank * (x.d_in + x.d_out) for x in first + last if selected(x, tr.lora_targets))
    return blocks + side


def finetune_step_flops(m: ModelConfig, step: StepFlops, tr: Training, full_recompute: bool) -> tuple[int, int]:
    """(weight-gradient FLOPs not executed, adapter FLOPs executed) for one step under adapters.

    Frozen weights get no weight gradient: the backward of a frozen matmul is its input gradient
    alone (one forward's FLOPs, not two), so the step skips one forward's worth of every weight
    matmul (all but the attention core, which has no weights; the LM head's too unless trained).
    The adapters run forward, input and weight gradients (3 forwards; 4 with full recomputation).
    The embedding is a lookup (no FLOPs) trained or not.
    """
    if not tr.adapters:
        return 0, 0

    weight_matmuls = step.forward - step.attention_cores
    if head_trained(m, tr):
        weight_matmuls -= step.lm_head
    passes = 3 + (1 if full_recompute else 0)
    return weight_matmuls, passes * adapter_flops_per_token(m, tr) * step.tokens
