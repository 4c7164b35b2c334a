"""Cross-check the activations of the sequence mixers (estimators/mixers/, torch-eager profile) against
what eager PyTorch saves for backward when it runs transformers' torch fallbacks.

For every hybrid model type (hf_cases_hybrid.HYBRID_TYPES) this builds small models
(`AutoModelForCausalLM.from_config(config, attn_implementation="eager")`, MoE experts eager) on the
CPU, in fp32 and in bf16 (`model.to(dtype)`), puts them in training mode and runs one forward with
labels inside `torch.autograd.graph.saved_tensors_hooks`. Without the fla / mamba_ssm /
causal-conv1d kernels transformers runs its torch fallbacks (torch_chunk_gated_delta_rule,
mamba2_chunk_scan, the Mamba slow_forward loop, chunk_kimi_delta_attention, lightning attention's
blockwise loop, the short conv's F.conv1d), which is what the torch-eager profile models.

Measured, per mixer layer: the bytes of every storage first saved while that mixer module runs
(forward pre-hook to forward hook), each storage once (views share one), parameter storages
excluded, and the storage of the mixer's input excluded (the block norm's output: the estimators
count it as the layer's input, as they do attention's). Predicted:
`MIXERS[kind].activation_bytes(m, B, S, p, T=1, fused=False)` with m from the config
(`transformer_calc.sources.hf.from_hf_config`). Every mixer layer of the model is compared.

Then whole models: every storage saved in a training forward against training_memory (reported),
and the peak of two training steps under FakeTensorMode inside MemTracker (peak_memory.py's
measurement) against peak_memory, on tiny hybrid models with dense MLPs.

Gemma 4 (`gemma4_text`; estimators/training/gemma4.py): every decoder layer's saved bytes (the storages it
is the first layer to save; RoPE's cos/sin and the combined per-layer inputs, which every layer reads, are
the head's) against `gemma4.class_activations` for its layer class, and the whole forward against
training_memory, on named tiny configs and random ones (hf_cases_gemma4.gen_text); two whole-step peaks.

Needs torch and transformers (not part of the core test suite). Exits 1 if any mixer or Gemma 4 layer, or
a Gemma 4 whole model, misses by more than 5 %, or a gated whole-step peak by more than 10 %.

    PYTHONPATH=. python tools/crosscheck/activations_mixers.py [--write-docs] [-v]

`--write-docs` replaces the mixer-activations section of docs/validation.md (between its markers).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from transformer_calc.errors import TcalcError  # noqa: E402
from transformer_calc.estimators.mixers import MIXERS, require_training_priced  # noqa: E402
from transformer_calc.estimators.training import gemma4  # noqa: E402
from transformer_calc.estimators.training.memory import training_memory  # noqa: E402
from transformer_calc.model.config import LayerAttention, ModelConfig, Training, Workload  # noqa: E402
from transformer_calc.sources.hf import WRAPPERS, from_hf_config  # noqa: E402

Cfg = dict[str, Any]
TOLERANCE = 0.05
BEGIN, END = "<!-- activations_mixers:begin -->", "<!-- activations_mixers:end -->"
REGENERATE = "PYTHONPATH=. python tools/crosscheck/activations_mixers.py --write-docs"
DTYPES = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}
# the mixer modules of each kind, by class name (transformers 5.23)
MIXER_CLASSES = {
    "Qwen3NextGatedDeltaNet": LayerAttention.deltanet, "Qwen3_5GatedDeltaNet": LayerAttention.deltanet,
    "Qwen3_5MoeGatedDeltaNet": LayerAttention.deltanet,
    "BambaMixer": LayerAttention.mamba2, "GraniteMoeHybridMambaLayer": LayerAttention.mamba2,
    "NemotronHMamba2Mixer": LayerAttention.mamba2, "FalconH1Mixer": LayerAttention.mamba2,
    "JambaMambaMixer": LayerAttention.mamba, "Lfm2ShortConv": LayerAttention.conv,
    "MiniMaxLightningAttention": LayerAttention.lightning, "KimiLinearDeltaAttention": LayerAttention.kda,
    "Zamba2MambaMixer": LayerAttention.mamba2, "OlmoHybridGatedDeltaNet": LayerAttention.olmo_gdn,
}  # fmt: skip

_GDN = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 12,
        "linear_conv_kernel_dim": 4}  # fmt: skip
_QWEN = {"vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
         "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"], **_GDN}  # fmt: skip
_MAMBA2 = {"vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 1,
           "intermediate_size": 40, "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_d_state": 8,
           "mamba_expand": 2, "mamba_d_conv": 4, "mamba_chunk_size": 16}  # fmt: skip
# (label, config, S, B): tiny configs of every hybrid type; S across chunk boundaries (64 for the delta
# rules, Q for Mamba-2, C for lightning) and not a multiple of them
CASES: list[tuple[str, Cfg, int, int]] = [
    ("qwen3_next", {"model_type": "qwen3_next", **_QWEN, "num_experts": 0, "intermediate_size": 32}, 100, 1),
    ("qwen3_next H_k = H_v, 3 chunks", {"model_type": "qwen3_next", **_QWEN, "linear_num_key_heads": 2,
                                        "linear_num_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
                                        "moe_intermediate_size": 16, "shared_expert_intermediate_size": 24}, 150, 2),
    ("qwen3_next one chunk", {"model_type": "qwen3_next", **_QWEN, "num_experts": 0, "intermediate_size": 32}, 40, 2),
    ("qwen3_5_text", {"model_type": "qwen3_5_text", **_QWEN, "intermediate_size": 32}, 70, 1),
    ("bamba", {"model_type": "bamba", **_MAMBA2, "num_hidden_layers": 2, "attn_layer_indices": [1]}, 40, 1),
    ("bamba P != Q, G = 1", {"model_type": "bamba", **_MAMBA2, "hidden_size": 12, "mamba_n_heads": 4, "mamba_d_head": 6,
                             "mamba_n_groups": 1, "mamba_d_state": 5, "mamba_d_conv": 3, "mamba_chunk_size": 7,
                             "num_hidden_layers": 1, "attn_layer_indices": []}, 20, 2),
    ("granitemoehybrid", {"model_type": "granitemoehybrid", **_MAMBA2, "num_hidden_layers": 2,
                          "layer_types": ["mamba", "attention"], "num_local_experts": 2, "num_experts_per_tok": 1,
                          "shared_intermediate_size": 24}, 40, 1),
    ("nemotron_h", {"model_type": "nemotron_h", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 40, "mamba_num_heads": 4,
                    "mamba_head_dim": 8, "ssm_state_size": 8, "n_groups": 2, "chunk_size": 16,
                    "hybrid_override_pattern": "M*-", "num_hidden_layers": 3}, 40, 2),
    ("falcon_h1", {"model_type": "falcon_h1", **_MAMBA2, "mamba_d_ssm": 64, "num_hidden_layers": 1, "head_dim": 16}, 40, 1),
    ("jamba", {"model_type": "jamba", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
               "num_key_value_heads": 1, "intermediate_size": 40, "num_experts": 1, "num_experts_per_tok": 1,
               "num_hidden_layers": 2, "attn_layer_period": 2, "attn_layer_offset": 1, "mamba_d_state": 8,
               "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 3}, 24, 2),
    ("lfm2", {"model_type": "lfm2", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
              "num_key_value_heads": 1, "intermediate_size": 40, "num_hidden_layers": 2,
              "layer_types": ["conv", "full_attention"], "conv_L_cache": 3}, 40, 2),
    ("minimax", {"model_type": "minimax", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2,
                 "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 40, "num_local_experts": 2,
                 "num_experts_per_tok": 1, "block_size": 16, "num_hidden_layers": 2,
                 "layer_types": ["linear_attention", "full_attention"]}, 40, 1),
    ("minimax S < C", {"model_type": "minimax", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4,
                       "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 40, "num_local_experts": 1,
                       "num_experts_per_tok": 1, "block_size": 32, "num_hidden_layers": 1,
                       "layer_types": ["linear_attention"]}, 20, 2),
    ("kimi_linear", {"model_type": "kimi_linear", "pad_token_id": None, "vocab_size": 100, "hidden_size": 32,
                     "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 40,
                     "moe_intermediate_size": 8, "num_local_experts": 2, "num_experts_per_tok": 1,
                     "first_k_dense_replace": 1, "kv_lora_rank": 8, "qk_rope_head_dim": 4, "qk_nope_head_dim": 8,
                     "v_head_dim": 8, "linear_num_heads": 2, "linear_head_dim": 8, "linear_conv_kernel_dim": 4,
                     "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"]}, 100, 1),
    ("olmo_hybrid", {"model_type": "olmo_hybrid", "pad_token_id": None, **_QWEN, "intermediate_size": 32}, 100, 1),
    ("olmo_hybrid H_k = H_v, one chunk", {"model_type": "olmo_hybrid", "pad_token_id": None, **_QWEN,
                                          "linear_num_value_heads": 2, "intermediate_size": 32}, 50, 2),
]


N_RANDOM = 3  # random configs per model type (hf_cases_hybrid.GENERATORS, their own seed here)
SEED = 2205


def one_head(m: ModelConfig) -> bool:
    """A mixer with one head (or one key head): some operands the measurement sees as copies with
    several heads are views with one (einsum's and matmul's batch folding), and tcalc over-counts (up to
    12 %, docs/validation.md). Real models have many heads; the random cases skip these."""
    return 1 in (m.ssm_heads, m.linear_key_heads, m.linear_value_heads)


def random_cases() -> list[tuple[str, Cfg, int, int]]:
    """N_RANDOM configs per hybrid type from the parameter cross-check's generators (odd shapes), with
    a random S in 1..150 and B in 1..3; configs without a mixer layer or with one-head mixers skipped."""
    from hf_cases_hybrid import GENERATORS

    rng = random.Random(SEED)
    out = []
    for t, gen in GENERATORS.items():
        found = 0
        for _ in range(20 * N_RANDOM):  # bounded: draws until N_RANDOM usable configs
            cfg = gen(rng)
            S, B = rng.randint(1, 150), rng.randint(1, 3)
            m = ModelConfig.model_validate(from_hf_config(cfg))
            if not m.is_hybrid or one_head(m) or m.n_layers == m.n_attention_layers(LayerAttention.none):
                continue
            if not any(m.n_attention_layers(k) for k in m.mixer_kinds):
                continue
            try:  # Zamba2's shared blocks, LatentMoE: training refuses them (not priced yet), nothing to compare
                require_training_priced(m, "training memory")
            except TcalcError:
                continue
            out.append((f"{t} (random {found + 1})", cfg, S, B))
            found += 1
            if found == N_RANDOM:
                break
    return out


def build(cfg: Cfg, dtype: torch.dtype) -> torch.nn.Module:
    config = CONFIG_MAPPING[cfg["model_type"]].from_dict(dict(cfg))
    if config.model_type in WRAPPERS:
        config = config.get_text_config()
    moe = any(getattr(config, k, 0) for k in ("num_experts", "num_local_experts", "n_routed_experts", "enable_moe_block"))
    kw = {"experts_implementation": "eager"} if moe else {}
    return AutoModelForCausalLM.from_config(config, attn_implementation="eager", **kw).train().to(dtype)


def saved_per_mixer(model: torch.nn.Module, ids: torch.Tensor, autocast: bool = False
                    ) -> tuple[dict[str, list[Any]], int]:
    """Per mixer layer [kind, bytes of the storages first saved inside it (its input excluded), whether its
    input was saved there], and the whole forward's saved bytes (bf16 autocast when asked: the `mixed`
    precision of lora_activations_mixers.py)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: set[int] = set()
    alive: list[torch.Tensor] = []  # keep every packed tensor alive: no address is reused
    current: list[Any] = [None, None]  # module name, its input's storage
    per: dict[str, list[Any]] = {}
    whole = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        alive.append(t)
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in params and key not in seen:
            seen.add(key)
            whole[0] += storage.nbytes()
            if current[0] is not None:
                if key == current[1]:
                    per[current[0]][2] = True
                else:
                    per[current[0]][1] += storage.nbytes()
        return t

    hooks = []
    for name, module in model.named_modules():
        kind = MIXER_CLASSES.get(type(module).__name__)
        if kind is None:
            continue
        per[name] = [kind, 0, False]

        def pre(_m: Any, args: Any, kwargs: Any, name: str = name) -> None:
            h = args[0] if args else kwargs["hidden_states"]
            current[0], current[1] = name, h.untyped_storage().data_ptr()

        def post(_m: Any, _a: Any, _o: Any) -> None:
            current[0] = None

        hooks += [module.register_forward_pre_hook(pre, with_kwargs=True), module.register_forward_hook(post)]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(input_ids=ids, labels=ids, use_cache=False)
        else:
            out = model(input_ids=ids, labels=ids, use_cache=False)
    for h in hooks:
        h.remove()
    alive.clear()  # release the packed tensors
    del out
    return per, whole[0]


def measure(model: torch.nn.Module, ids: torch.Tensor) -> tuple[list[tuple[str, LayerAttention, int]], int]:
    """(module name, kind, bytes) of every mixer layer (the storages first saved inside it, its input
    excluded), and the whole forward's saved bytes."""
    per, whole = saved_per_mixer(model, ids)
    return [(name, kind, got) for name, (kind, got, _) in per.items()], whole

def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per mixer layer, per whole model) rows."""
    rows, models = [], []
    for label, cfg, S, B in CASES + random_cases():
        m = ModelConfig.model_validate(from_hf_config(cfg))
        ids = torch.randint(0, m.vocab_size, (B, S), generator=torch.Generator().manual_seed(0))
        dropout = any(isinstance(v, float) and v > 0 for k, v in cfg.items() if "dropout" in k)
        for dname, (dtype, p) in DTYPES.items():
            layers, whole = measure(build(cfg, dtype), ids)
            assert len(layers) == sum(m.n_attention_layers(k) for k in m.mixer_kinds), f"{label}: mixer layers"
            for name, kind, got in layers:
                want = MIXERS[kind].activation_bytes(m, B, S, p, 1, fused=False)
                rows.append({"case": label, "type": cfg["model_type"], "kind": MIXERS[kind].name, "layer": name,
                             "dtype": dname, "S": S, "B": B, "measured": got, "predicted": want,
                             "error": want / got - 1})  # fmt: skip
            if not dropout:  # CPU dropout keeps p-byte masks (activations.py measures it apart)
                tr = Training(precision=dname, activations="torch-eager")
                want = training_memory(m, Workload(seq_len=S, batch_size=B), tr)[0].activations
                models.append({"case": label, "type": cfg["model_type"], "dtype": dname, "S": S, "B": B,
                               "measured": whole, "predicted": want, "error": want / whole - 1})
    return rows, models


# Gemma 4 (gemma4_text): (label, config, S, B). transformers 5.23 cannot train a kv-shared model without
# per-layer inputs (_maybe_slice_kv_shared_inputs slices per_layer_inputs, None then): those have P > 0
_G4 = {"model_type": "gemma4_text", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4,
       "num_key_value_heads": 2, "intermediate_size": 40, "head_dim": 8, "global_head_dim": 16,
       "hidden_size_per_layer_input": 4, "vocab_size_per_layer_input": 100, "sliding_window": 8}
GEMMA4_CASES: list[tuple[str, Cfg, int, int]] = [
    ("gemma4 sliding/full, kv-shared", {**_G4, "num_hidden_layers": 3,
                                        "layer_types": ["sliding_attention", "full_attention", "full_attention"],
                                        "num_kv_shared_layers": 1}, 16, 1),
    ("gemma4 k=v, MHA sliding, double MLP", {**_G4, "num_hidden_layers": 4, "num_key_value_heads": 4,
                                             "layer_types": ["sliding_attention", "full_attention"] * 2,
                                             "num_kv_shared_layers": 2, "use_double_wide_mlp": True,
                                             "attention_k_eq_v": True, "num_global_key_value_heads": 1}, 20, 2),
    ("gemma4 MoE (26B-A4B's block)", {**_G4, "num_hidden_layers": 2, "intermediate_size": 24,
                                      "hidden_size_per_layer_input": 0, "attention_k_eq_v": True,
                                      "num_global_key_value_heads": 1, "enable_moe_block": True, "num_experts": 4,
                                      "top_k_experts": 2, "moe_intermediate_size": 12}, 24, 2),
    ("gemma4 all full, no PLE", {**_G4, "num_hidden_layers": 2, "layer_types": ["full_attention"] * 2,
                                 "hidden_size_per_layer_input": 0}, 12, 3),
]  # fmt: skip
N_RANDOM_GEMMA4 = 4


def random_gemma4_cases() -> list[tuple[str, Cfg, int, int]]:
    """N_RANDOM_GEMMA4 configs from the parameter cross-check's gemma4_text generator (odd shapes; S in
    1..64, B in 2..3), kv-shared ones given per-layer inputs (see GEMMA4_CASES). B = 1 is left to the named
    cases: with B = 1 and one K/V head, matmul takes repeat_kv's broadcast K and V as views of one head
    where tcalc counts A-head copies (+1.2 % to +1.8 % in such a layer, measured); real models have more."""
    from hf_cases_gemma4 import gen_text

    rng = random.Random(SEED + 4)
    out = []
    for i in range(N_RANDOM_GEMMA4):
        cfg = gen_text(rng)
        cfg["global_head_dim"] = min(cfg["global_head_dim"], 32)
        if cfg.get("num_kv_shared_layers") and not cfg["hidden_size_per_layer_input"]:
            cfg["hidden_size_per_layer_input"] = 4
        cfg["vocab_size_per_layer_input"] = cfg["vocab_size"]
        out.append((f"gemma4 (random {i + 1})", cfg, rng.randint(1, 64), rng.randint(2, 3)))
    return out


def measure_gemma4(model: torch.nn.Module, ids: torch.Tensor) -> tuple[list[int], int]:
    """Bytes each Gemma4TextDecoderLayer saves (the storages it is the first layer to save, its input
    included; RoPE's cos/sin and the combined per-layer inputs excluded), and the whole forward's."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: set[int] = set()
    in_layers: set[int] = set()
    shared_inputs: set[int] = set()  # cos/sin and the per-layer inputs: every layer reads them (the head's)
    alive: list[torch.Tensor] = []
    current: list[int | None] = [None]
    inner = model.model
    layers = [0] * len(inner.layers)
    whole = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        alive.append(t)
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in params:
            return t
        if key not in seen:
            seen.add(key)
            whole[0] += storage.nbytes()
        i = current[0]
        if i is not None and key not in in_layers and key not in shared_inputs:
            in_layers.add(key)
            layers[i] += storage.nbytes()
        return t

    def record(_m: Any, _a: Any, out: Any) -> None:
        for t in out:
            shared_inputs.add(t.untyped_storage().data_ptr())

    hooks = [inner.rotary_emb.register_forward_hook(record)]
    if inner.hidden_size_per_layer_input:
        project = inner.project_per_layer_inputs

        def projected(*a: Any, **k: Any) -> torch.Tensor:
            out = project(*a, **k)
            shared_inputs.add(out.untyped_storage().data_ptr())
            return out

        inner.project_per_layer_inputs = projected
    for i, layer in enumerate(inner.layers):
        def pre(_m: Any, _a: Any, i: int = i) -> None:
            current[0] = i

        def post(_m: Any, _a: Any, _o: Any) -> None:
            current[0] = None

        hooks += [layer.register_forward_pre_hook(pre), layer.register_forward_hook(post)]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids, use_cache=False)
    for h in hooks:
        h.remove()
    alive.clear()
    del out
    return layers, whole[0]


def run_gemma4() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per Gemma 4 layer, per whole model) rows."""
    rows, models = [], []
    for label, cfg, S, B in GEMMA4_CASES + random_gemma4_cases():
        m = ModelConfig.model_validate(from_hf_config(cfg))
        ids = torch.randint(0, m.vocab_size, (B, S), generator=torch.Generator().manual_seed(0))
        w = Workload(seq_len=S, batch_size=B)
        for dname, (dtype, _p) in DTYPES.items():
            tr = Training(precision=dname, activations="torch-eager")
            layers, whole = measure_gemma4(build(cfg, dtype), ids)
            for i, got in enumerate(layers):
                c = gemma4.LayerClass(m.attention_pattern[i % len(m.attention_pattern)], i >= m.first_kv_shared_layer)
                want = gemma4.class_activations(m, w, tr, c).total
                rows.append({"case": label, "dtype": dname, "S": S, "B": B,
                             "layer": f"{i} {c.kind.value}{' kv-shared' if c.kv_shared else ''}",
                             "measured": got, "predicted": want, "error": want / got - 1})  # fmt: skip
            want = training_memory(m, w, tr)[0].activations
            models.append({"case": label, "dtype": dname, "S": S, "B": B, "measured": whole, "predicted": want,
                           "error": want / whole - 1})
    return rows, models


# MiMo-V2-Flash (estimators/training/kind_attention.py): sliding layers with 2·n_kv K/V heads and sinks,
# values narrower than head_dim; (label, config, S, B)
_MIMO = {"model_type": "mimo_v2_flash", "vocab_size": 100, "num_attention_heads": 4, "intermediate_size": 40,
         "moe_intermediate_size": 8, "pad_token_id": 0}
MIMO_CASES: list[tuple[str, Cfg, int, int]] = [
    ("mimo_v2_flash dense, one K/V head", {**_MIMO, "hidden_size": 32, "num_hidden_layers": 2, "num_key_value_heads": 1,
                                           "head_dim": 12, "v_head_dim": 8, "n_routed_experts": 2,
                                           "num_experts_per_tok": 1, "sliding_window": 8,
                                           "layer_types": ["sliding_attention", "full_attention"],
                                           "mlp_layer_types": ["dense", "dense"]}, 16, 2),
    ("mimo_v2_flash MoE", {**_MIMO, "hidden_size": 48, "num_hidden_layers": 3, "num_key_value_heads": 2,
                           "head_dim": 24, "v_head_dim": 20, "n_routed_experts": 4, "num_experts_per_tok": 2,
                           "sliding_window": 4, "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]},
     21, 3),
]  # fmt: skip


def run_mimo() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per attention layer, per whole model) rows for MiMo-V2-Flash: the storages each MiMoV2FlashAttention
    saves (its input excluded; the cos/sin of its kind, which the first layer of each kind saves first,
    taken out: 2·p·S·rotary dims, the head's) against kind_attention.attention_bytes less the input."""
    from transformer_calc.estimators.training import kind_attention
    from transformer_calc.model.config import Parallelism

    rows, models = [], []
    MIXER_CLASSES["MiMoV2FlashAttention"] = LayerAttention.full  # measured as a mixer module (kind set below)
    try:
        for label, cfg, S, B in MIMO_CASES:
            m = ModelConfig.model_validate(from_hf_config(cfg))
            ids = torch.randint(0, m.vocab_size, (B, S), generator=torch.Generator().manual_seed(0))
            w = Workload(seq_len=S, batch_size=B)
            for dname, (dtype, p) in DTYPES.items():
                model = build(cfg, dtype)
                rotary = 2 * model.model.rotary_emb.full_attention_inv_freq.numel()
                layers, whole = measure(model, ids)
                tr = Training(precision=dname, activations="torch-eager")
                seen: set[LayerAttention] = set()
                for name, _, got in layers:
                    kind = m.attention_pattern[int(name.split(".")[2]) % len(m.attention_pattern)]
                    rope = 0 if kind in seen else 2 * p * S * rotary
                    seen.add(kind)
                    want = kind_attention.attention_bytes(m, w, tr, Parallelism(), kind) - p * B * S * m.d_model
                    rows.append({"case": label, "dtype": dname, "S": S, "B": B, "layer": f"{name} ({kind.value})",
                                 "measured": got - rope, "predicted": want, "error": want / (got - rope) - 1})
                want = training_memory(m, w, tr)[0].activations
                models.append({"case": label, "dtype": dname, "S": S, "B": B, "measured": whole, "predicted": want,
                               "error": want / whole - 1})
    finally:
        del MIXER_CLASSES["MiMoV2FlashAttention"]
    return rows, models


# Whole tiny hybrid models (dense MLPs: transformers' eager MoE experts keep per-expert copies the
# torch-eager profile does not model) for the peak-memory check: two training steps under
# FakeTensorMode inside MemTracker, as tools/crosscheck/peak_memory.py runs them
_PEAK_GDN = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
             "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4}
_PEAK_BASE = {"vocab_size": 1000, "hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 256}
_PEAK_M2 = {"mamba_n_heads": 8, "mamba_d_head": 32, "mamba_n_groups": 2, "mamba_d_state": 16, "mamba_chunk_size": 64}
PEAK_CASES: list[tuple[str, Cfg, int, int]] = [
    ("qwen3_5_text", {"model_type": "qwen3_5_text", **_PEAK_BASE, "head_dim": 32, "num_hidden_layers": 4, **_PEAK_GDN}, 256, 2),
    ("bamba", {"model_type": "bamba", **_PEAK_BASE, **_PEAK_M2, "mamba_expand": 2, "mamba_d_conv": 4,
               "num_hidden_layers": 4, "attn_layer_indices": [3]}, 256, 2),
    ("falcon_h1", {"model_type": "falcon_h1", **_PEAK_BASE, **_PEAK_M2, "head_dim": 32, "mamba_d_ssm": 256,
                   "num_hidden_layers": 4}, 256, 2),
    ("nemotron_h", {"model_type": "nemotron_h", **_PEAK_BASE, "head_dim": 32, "mamba_num_heads": 8, "mamba_head_dim": 32,
                    "ssm_state_size": 16, "n_groups": 2, "chunk_size": 64, "hybrid_override_pattern": "M-M*-",
                    "num_hidden_layers": 5}, 256, 2),
    ("lfm2", {"model_type": "lfm2", **_PEAK_BASE, "num_hidden_layers": 4,
              "layer_types": ["conv", "conv", "full_attention", "conv"]}, 256, 2),
    ("jamba", {"model_type": "jamba", **_PEAK_BASE, "num_experts": 1, "num_experts_per_tok": 1, "num_hidden_layers": 4,
               "attn_layer_period": 4, "attn_layer_offset": 3, "mamba_d_state": 16}, 128, 2),
    ("minimax", {"model_type": "minimax", **_PEAK_BASE, "head_dim": 32, "num_local_experts": 1, "num_experts_per_tok": 1,
                 "block_size": 64, "num_hidden_layers": 4,
                 "layer_types": ["linear_attention", "linear_attention", "full_attention", "linear_attention"]}, 256, 2),
    ("kimi_linear", {"model_type": "kimi_linear", "pad_token_id": None, **_PEAK_BASE, "num_key_value_heads": 4,
                                 "moe_intermediate_size": 64, "num_local_experts": 2, "num_experts_per_tok": 1,
                                 "first_k_dense_replace": 4, "kv_lora_rank": 32, "qk_rope_head_dim": 16,
                                 "qk_nope_head_dim": 32, "v_head_dim": 32, "linear_num_heads": 4, "linear_head_dim": 32,
                                 "num_hidden_layers": 4,
                                 "layer_types": ["linear_attention", "linear_attention", "full_attention",
                                                 "linear_attention"]}, 256, 2),
    ("olmo_hybrid", {"model_type": "olmo_hybrid", "pad_token_id": None, **_PEAK_BASE, "num_hidden_layers": 4,
                     **_PEAK_GDN}, 256, 2),
    ("gemma4_text (kv-shared, k=v, PLE)", {"model_type": "gemma4_text", **_PEAK_BASE, "head_dim": 32,
                                            "global_head_dim": 64, "hidden_size_per_layer_input": 16,
                                            "vocab_size_per_layer_input": 1000, "num_hidden_layers": 6,
                                            "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
                                            "num_kv_shared_layers": 2, "use_double_wide_mlp": True,
                                            "attention_k_eq_v": True, "num_global_key_value_heads": 1,
                                            "sliding_window": 64}, 256, 2),
    ("gemma4_text (MoE)", {"model_type": "gemma4_text", **_PEAK_BASE, "head_dim": 32, "global_head_dim": 64,
                           "hidden_size_per_layer_input": 0, "num_hidden_layers": 4,
                           "layer_types": ["sliding_attention", "full_attention"] * 2, "attention_k_eq_v": True,
                           "num_global_key_value_heads": 1, "sliding_window": 64, "enable_moe_block": True,
                           "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 64}, 256, 2),
]  # fmt: skip
PEAK_DTYPES = ("bf16",)  # fp32 too with --all-dtypes (it doubles the check's time; CI runs bf16)
PEAK_TOLERANCE = 0.10  # whole-step peaks: the mixers' backward transients are not modeled (docs/validation.md)


def run_peaks() -> list[dict[str, Any]]:
    """MemTracker's peak of a training step (peak_memory.tracked_peak) vs tcalc's peak_memory (torch-eager)."""
    import peak_memory as pm

    out = []
    for label, cfg, S, B in PEAK_CASES:
        for dtype in PEAK_DTYPES:
            for ckpt in (False, True):
                measured, _split = pm.tracked_peak(cfg, S, B, dtype, "eager", "foreach", ckpt)
                pred, phase = pm.predicted(cfg, S, B, dtype, "eager", "foreach", ckpt)
                out.append({"case": label, "dtype": dtype, "ckpt": ckpt, "S": S, "B": B, "measured": measured,
                            "predicted": pred, "phase": phase, "error": pred / measured - 1,
                            "gated": "not gated" not in label})  # fmt: skip
    return out


def write_docs(rows: list[dict[str, Any]], models: list[dict[str, Any]], peaks: list[dict[str, Any]]) -> None:
    from tools.docsection import write_section

    by_type: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        by_type.setdefault((r["type"], r["kind"]), []).append(r["error"])
    named = {c[0] for c in CASES}
    lines = [
        BEGIN,
        "<!-- Generated by tools/crosscheck/activations_mixers.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## Activations of the sequence mixers (torch-eager) and whole hybrid models",
        "",
        f"Generated by `tools/crosscheck/activations_mixers.py` (torch {torch.__version__}, transformers "
        f"{transformers.__version__}, CPU); CI runs it.",
        "",
        "**Per mixer layer (gated at ±5 %):** the bytes autograd saves while the mixer module runs (its",
        "input excluded: the estimators count it as the layer's input), measured with `saved_tensors_hooks`",
        "in fp32 and bf16 (`model.to(dtype)`), against `MIXERS[kind].activation_bytes(m, B, S, p, 1,",
        "fused=False)` (docs/formulas.md §2.10): the named tiny configs below and "
        f"{N_RANDOM} random odd configs per type",
        "(`hf_cases_hybrid.GENERATORS`, S in 1..150, B in 1..3). Random configs whose mixer has one head are",
        "skipped: with one head some einsum and matmul operands are views of other tensors instead of",
        "copies, and tcalc over-counts them (up to 12 % in the layer, measured). Known fp32-only gaps (within",
        "the tolerance): Qwen3-Next with H_k = H_v in fp32 keeps its gate as a view of the whole qkvz",
        "projection (-3.9 %), Jamba's loop in fp32 (+1.5 to +2.8 %). The fused-kernel convention (the",
        "default profile) is read from the kernels' save_for_backward and is not measured here (fla,",
        "mamba_ssm and causal-conv1d need a CUDA GPU).",
        "",
        "| model type | mixer | layers compared | largest \\|error\\| |",
        "| --- | --- | --- | --- |",
    ]
    for (t, kind), errs in by_type.items():
        lines.append(f"| {t} | {kind} | {len(errs)} | {100 * max(abs(e) for e in errs):.2f} % |")
    lines += ["", "| case | dtype | S | B | layer | measured (B) | predicted (B) | error |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        if r["case"] in named:
            lines.append(f"| {r['case']} | {r['dtype']} | {r['S']} | {r['B']} | {r['layer']} | {r['measured']:,} | "
                         f"{r['predicted']:,} | {100 * r['error']:+.2f} % |")
    lines += [
        "",
        "**Whole models (reported, not gated):** every storage autograd saves in one training forward with",
        "labels (embeddings, every layer, the loss) against `training_memory(m, Workload(S, B),",
        "Training(precision, activations=\"torch-eager\"))[0].activations`, for the cases above without",
        "dropout. The mixers are exact; what is left is outside them and not hybrid-specific: transformers",
        "5's eager MoE experts keep per-expert copies (gathered inputs, routing weights, weighted outputs)",
        "the profile's MoE terms do not count, Qwen3-Next's zero-centered RMSNorms (`1 + weight`) keep the",
        "normalized input in fp32 and its q/k norms their fp32 input, Nemotron-H's ReLU² MLP.",
        "",
        "| case | dtype | S | B | measured (B) | predicted (B) | error |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in models:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['S']} | {r['B']} | {r['measured']:,} | {r['predicted']:,} | "
                     f"{100 * r['error']:+.2f} % |")
    gated = [r for r in peaks if r["gated"]]
    worst = max((abs(r["error"]) for r in gated), default=0.0)
    lines += [
        "",
        f"**Peak memory of a training step (gated at ±{PEAK_TOLERANCE:.0%}):** "
        "`tools/crosscheck/peak_memory.py`'s measurement",
        "(MemTracker's peak over the second of two steps under FakeTensorMode: forward with labels, backward,",
        "AdamW foreach, eager attention; with and without `gradient_checkpointing_enable`) on whole tiny",
        "hybrid models with dense MLPs, against `peak_memory(...)` (torch-eager, `--recompute full` for",
        f"checkpointing). Largest |error|: {100 * worst:.1f} %. The backward phases take the largest of",
        "attention's transients and the mixers' `backward_transient_bytes` (derived, docs/formulas.md §2.10):",
        "Jamba's Python scan loop allocates four fp32 (B, d_inner, S, N) buffers in backward (two accumulated",
        "gradients, two select_backward buffers); Kimi Delta Attention's broadcast decay product three fp32",
        "(B, H, S_p, C, d) buffers. Without them tcalc was 9-39 % (Jamba) and 14-35 % (Kimi Linear) below.",
        "",
        "| case | dtype | checkpointing | measured peak (B) | tcalc peak (B) | error | tcalc's peak phase | gated |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in peaks:
        lines.append(f"| {r['case']} | {r['dtype']} | {'yes' if r['ckpt'] else 'no'} | {r['measured']:,} | "
                     f"{r['predicted']:,} | {100 * r['error']:+.2f} % | {r['phase']} | {'yes' if r['gated'] else 'no'} |")
    lines.append(END)
    path = REPO / "docs" / "validation.md"
    write_section(path, BEGIN, END, "\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(REPO)}")


G4_BEGIN, G4_END = "<!-- activations_gemma4:begin -->", "<!-- activations_gemma4:end -->"


def write_gemma4_docs(rows: list[dict[str, Any]], models: list[dict[str, Any]], peaks: list[dict[str, Any]]) -> None:
    from tools.docsection import write_section

    worst = max(abs(r["error"]) for r in rows)
    lines = [
        G4_BEGIN,
        "<!-- Generated by tools/crosscheck/activations_mixers.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## Gemma 4 training memory (torch-eager): every layer class against saved tensors",
        "",
        f"Generated by `tools/crosscheck/activations_mixers.py` (torch {torch.__version__}, transformers "
        f"{transformers.__version__}, CPU); CI runs it.",
        "",
        "**Per decoder layer (gated at ±5 %):** the storages each `Gemma4TextDecoderLayer` is the first layer",
        "to save (its input included; RoPE's cos/sin and the combined per-layer inputs, read by every layer,",
        "are counted with the embedding), measured with `saved_tensors_hooks` in fp32 and bf16 on eager",
        "attention and eager experts, against `gemma4.class_activations` of the layer's class (sliding or full,",
        "kv-shared or not; docs/formulas.md §5.14): the named configs and "
        f"{N_RANDOM_GEMMA4} random ones (`hf_cases_gemma4.gen_text`).",
        f"{len(rows)} layers, largest |error| {100 * worst:.3f} %.",
        "",
        "| case | dtype | S | B | layer | measured (B) | predicted (B) | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['S']} | {r['B']} | {r['layer']} | {r['measured']:,} | "
                     f"{r['predicted']:,} | {100 * r['error']:+.3f} % |")
    lines += [
        "",
        "**Whole models (gated at ±5 %):** every storage saved in one training forward with labels against",
        "`training_memory(...)[0].activations` (torch-eager). What is left is a few bytes of scalar buffers",
        "(the embeddings' scales).",
        "",
        "| case | dtype | S | B | measured (B) | predicted (B) | error |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in models:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['S']} | {r['B']} | {r['measured']:,} | {r['predicted']:,} | "
                     f"{100 * r['error']:+.3f} % |")
    lines += [
        "",
        f"**Peak of a training step (gated at ±{PEAK_TOLERANCE:.0%}, with the hybrid peaks above):** MemTracker's",
        "peak of the second of two AdamW (foreach) steps under FakeTensorMode, bf16, eager attention (the MoE",
        "case runs transformers' default `grouped_mm` experts), against `peak_memory` (torch-eager). Without",
        "checkpointing the loss backward is the peak. With `gradient_checkpointing_enable` the backward of the",
        "first block is: Gemma 4's fp32 norm tensors make the recomputed block's start, all of it alive, the",
        "higher point (timeline.py); what tcalc still misses there is not located.",
        "",
        "| case | checkpointing | measured peak (B) | tcalc peak (B) | error | tcalc's peak phase |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in peaks:
        lines.append(f"| {r['case']} | {'yes' if r['ckpt'] else 'no'} | {r['measured']:,} | {r['predicted']:,} | "
                     f"{100 * r['error']:+.2f} % | {r['phase']} |")
    lines.append(G4_END)
    path = REPO / "docs" / "validation.md"
    write_section(path, G4_BEGIN, G4_END, "\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(REPO)} (Gemma 4)")


MIMO_BEGIN, MIMO_END = "<!-- activations_mimo:begin -->", "<!-- activations_mimo:end -->"


def write_mimo_docs(rows: list[dict[str, Any]], models: list[dict[str, Any]]) -> None:
    from tools.docsection import write_section

    lines = [
        MIMO_BEGIN,
        "<!-- Generated by tools/crosscheck/activations_mixers.py; do not edit by hand. Regenerate with:",
        f"     {REGENERATE} -->",
        "",
        "## MiMo-V2-Flash training memory (torch-eager): attention per kind against saved tensors",
        "",
        f"Generated by `tools/crosscheck/activations_mixers.py` (torch {torch.__version__}, transformers "
        f"{transformers.__version__}, CPU); CI runs it.",
        "",
        "**Per attention layer (gated at ±5 %):** the storages each `MiMoV2FlashAttention` saves (its input",
        "excluded; the cos/sin of its kind, which the first layer of each kind saves, taken out: the head's),",
        "fp32 and bf16, against `kind_attention.attention_bytes` (docs/formulas.md §5.13) less the input: sliding",
        "layers with 2·n_kv K/V heads and a sink column, values narrower than head_dim, the row maxima's int64",
        "indices, the softmax in the scores' dtype.",
        "",
        "| case | dtype | S | B | layer | measured (B) | predicted (B) | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['S']} | {r['B']} | {r['layer']} | {r['measured']:,} | "
                     f"{r['predicted']:,} | {100 * r['error']:+.3f} % |")
    lines += [
        "",
        "**Whole models (reported, not gated):** every saved storage of a training forward against",
        "`training_memory(...)[0].activations`. The dense model is within 0.3 % (RoPE rotates a third of",
        "head_dim: tcalc's head counts cos/sin at head_dim); the MoE model misses transformers' eager experts'",
        "per-expert copies, as for every MoE under the torch-eager profile (the section above).",
        "",
        "| case | dtype | S | B | measured (B) | predicted (B) | error |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in models:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['S']} | {r['B']} | {r['measured']:,} | {r['predicted']:,} | "
                     f"{100 * r['error']:+.2f} % |")
    lines.append(MIMO_END)
    path = REPO / "docs" / "validation.md"
    write_section(path, MIMO_BEGIN, MIMO_END, "\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(REPO)} (MiMo-V2-Flash)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-docs", action="store_true", help="rewrite the section of docs/validation.md")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every layer")
    ap.add_argument("--all-dtypes", action="store_true", help="whole-step peaks in fp32 as well as bf16")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    start = time.perf_counter()
    if args.all_dtypes:
        global PEAK_DTYPES
        PEAK_DTYPES = tuple(DTYPES)
    rows, models = run()
    g4_rows, g4_models = run_gemma4()
    mimo_rows, mimo_models = run_mimo()
    peaks = run_peaks()
    if args.verbose:
        for r in models:
            print(f"model {r['case']:<32} {r['dtype']} S={r['S']:<4} B={r['B']} measured {r['measured']:>12,} "
                  f"predicted {r['predicted']:>12,} {100 * r['error']:+.2f} %")
    for r in peaks:
        miss = r["gated"] and abs(r["error"]) > PEAK_TOLERANCE
        if args.verbose or miss:
            print(f"{'MISS ' if miss else ''}peak {r['case']:<28} {r['dtype']} ckpt={r['ckpt']!s:<5} measured "
                  f"{r['measured']:>12,} predicted {r['predicted']:>12,} {100 * r['error']:+.2f} % {r['phase']}")
    peak_failures = [r for r in peaks if r["gated"] and abs(r["error"]) > PEAK_TOLERANCE]
    failures = [r for r in rows if abs(r["error"]) > TOLERANCE]
    for r in rows:
        if args.verbose or r in failures:
            print(f"{'MISS ' if r in failures else ''}{r['case']:<32} {r['dtype']} {r['layer']:<28} measured {r['measured']:>10,} "
                  f"predicted {r['predicted']:>10,} {100 * r['error']:+.2f} %")
    worst = max(abs(r["error"]) for r in rows)
    print(f"{len(rows)} mixer layers, largest |error| {100 * worst:.2f} %, {time.perf_counter() - start:.1f} s "
          f"(transformers {transformers.__version__}, torch {torch.__version__})")
    g4_failures = [r for r in g4_rows + g4_models if abs(r["error"]) > TOLERANCE]
    for r in g4_rows + g4_models:
        if args.verbose or r in g4_failures:
            print(f"{'MISS ' if r in g4_failures else ''}{r['case']:<36} {r['dtype']} {r.get('layer', 'whole model'):<20} "
                  f"measured {r['measured']:>10,} predicted {r['predicted']:>10,} {100 * r['error']:+.3f} %")
    print(f"{len(g4_rows)} Gemma 4 layers, largest |error| {100 * max(abs(r['error']) for r in g4_rows):.3f} %; "
          f"{len(g4_models)} whole models, {100 * max(abs(r['error']) for r in g4_models):.3f} %")
    mimo_failures = [r for r in mimo_rows if abs(r["error"]) > TOLERANCE]
    for r in mimo_rows + mimo_models:
        if args.verbose or r in mimo_failures:
            print(f"{'MISS ' if r in mimo_failures else ''}{r['case']:<36} {r['dtype']} {r.get('layer', 'whole model'):<32} "
                  f"measured {r['measured']:>10,} predicted {r['predicted']:>10,} {100 * r['error']:+.3f} %")
    print(f"{len(mimo_rows)} MiMo-V2-Flash attention layers, largest |error| "
          f"{100 * max(abs(r['error']) for r in mimo_rows):.3f} %")
    gated = [abs(r["error"]) for r in peaks if r["gated"]]
    print(f"{len(peaks)} whole-step peaks, gated largest |error| {100 * max(gated):.2f} %")
    if args.write_docs:
        write_docs(rows, models, peaks)
        write_gemma4_docs(g4_rows, g4_models, [r for r in peaks if r["case"].startswith("gemma4")])
        write_mimo_docs(mimo_rows, mimo_models)
    return 1 if failures or peak_failures or g4_failures or mimo_failures else 0


if __name__ == "__main__":
    sys.exit(main())
