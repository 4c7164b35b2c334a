"""Gemma 4's training memory (estimators/training/gemma4.py; docs/formulas.md §5.14 "Training memory"): the
worked example by hand, the torch-eager profile against bytes measured on transformers 5.23
(tools/crosscheck/activations_mixers.py, docs/validation.md), invariants, the CLI on -f json, and the
one-line refusals of what is not priced (T > 1, adapters, dropout, ...)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

import transformer_calc as tc
from transformer_calc.cli import run
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.params import count_params
from transformer_calc.estimators.training import gemma4
from transformer_calc.estimators.training.memory import head_activations, layer_activations, training_memory
from transformer_calc.model.config import LayerAttention, ModelConfig, Parallelism, Training, Workload
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import preset_model

from test_gemma4 import TINY

SLIDING, FULL = LayerAttention.sliding, LayerAttention.full


def _model(cfg: dict) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg))


def test_worked_example_default_profile():
    """docs/formulas.md §5.14: TINY (D 32, A 4; sliding h_d 8 with 2 K/V heads, full h_d 16 with one, k = v;
    d_ff 48, doubled on the two kv-shared layers; P 4), S 16, B 1, p 2, FlashAttention. N = 16 tokens.
    Sliding layer: attention p·N·D 1,024 + q, k, v and their norms' outputs 2·p·N·(A + 2·kv)·h_d 4,096 +
    logsumexp 4·N·A 256 + W_O input (the flash output) 1,024 = 6,400; MLP input 1,024 + 4·p·N·F 6,144 +
    per-layer input gate 1,024 + 3·p·N·P 384 = 8,576; five norms 5·p·N·D 5,120."""
    m = _model(TINY)
    w, tr = Workload(seq_len=16, batch_size=1), Training(precision="mixed", flash=True)
    acts = {(c.kind, c.kv_shared): gemma4.class_activations(m, w, tr, c) for c in gemma4.layer_classes(m)}
    assert acts[SLIDING, False] == gemma4.ClassActivations(attention=6400, mlp=8576, norm=5120)
    # full: q, k, v of h_d 16 with one K/V head: 2·2·16·(4 + 2)·16 = 6,144; W_O input 2,048
    assert acts[FULL, False] == gemma4.ClassActivations(attention=1024 + 6144 + 256 + 2048, mlp=8576, norm=5120)
    # kv-shared: no k, v (2·p·N·A·h_d only); the MLP of 2·d_ff = 96: 4·2·16·96 = 12,288
    assert acts[FULL, True].attention == 1024 + 4096 + 256 + 2048 == 7424
    assert acts[SLIDING, True] == gemma4.ClassActivations(attention=4352, mlp=1024 + 12288 + 1024 + 384, norm=5120)
    # the per-layer input path on the first stage: projection input p·N·D, its norm's input and the
    # combined inputs p·N·L·P each
    assert gemma4.head_first(m, w, tr) == 1024 + 2 * (2 * 16 * 4 * 4) == 2048
    stage = training_memory(m, w, tr)[0]
    assert stage.attention == 6400 + 9472 + 4352 + 7424
    assert stage.mlp == 2 * 8576 + 2 * 14720 and stage.norm == 4 * 5120


# measured by tools/crosscheck/activations_mixers.py (torch 2.13, transformers 5.23, CPU; docs/validation.md):
# bytes each Gemma4TextDecoderLayer saves, bf16 and fp32
_G4 = {"model_type": "gemma4_text", "vocab_size": 100, "hidden_size": 32, "num_attention_heads": 4,
       "num_key_value_heads": 2, "intermediate_size": 40, "head_dim": 8, "global_head_dim": 16,
       "hidden_size_per_layer_input": 4, "vocab_size_per_layer_input": 100, "sliding_window": 8}
MEASURED = [
    ({**_G4, "num_hidden_layers": 3, "layer_types": ["sliding_attention", "full_attention", "full_attention"],
      "num_kv_shared_layers": 1}, 16, 1, {"bf16": [48834, 60162, 53442], "fp32": [58756, 74116, 67460]}),
    ({**_G4, "num_hidden_layers": 4, "num_key_value_heads": 4, "layer_types": ["sliding_attention", "full_attention"] * 2,
      "num_kv_shared_layers": 2, "use_double_wide_mlp": True, "attention_k_eq_v": True, "num_global_key_value_heads": 1},
     20, 2, {"bf16": [133826, 144770, 128674, 149186], "fp32": [158404, 176964, 166084, 196804]}),
    ({**_G4, "num_hidden_layers": 2, "intermediate_size": 24, "hidden_size_per_layer_input": 0, "attention_k_eq_v": True,
      "num_global_key_value_heads": 1, "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2,
      "moe_intermediate_size": 12}, 24, 2, {"bf16": [214466, 238338], "fp32": [253636, 286660]}),
]  # fmt: skip
# the whole forward (every saved storage) of the same three models, bf16
MEASURED_WHOLE_BF16 = [179366, 598528, 490954]


@pytest.mark.parametrize("case", range(len(MEASURED)))
def test_torch_eager_equals_the_measured_bytes(case):
    cfg, S, B, by_dtype = MEASURED[case]
    m = _model(cfg)
    w = Workload(seq_len=S, batch_size=B)
    for dtype, measured in by_dtype.items():
        tr = Training(precision=dtype, activations="torch-eager")
        predicted = [gemma4.class_activations(m, w, tr, gemma4.LayerClass(
            m.attention_pattern[i % len(m.attention_pattern)], i >= m.first_kv_shared_layer)).total
            for i in range(m.n_layers)]
        assert predicted == measured
    whole = training_memory(m, w, Training(precision="bf16", activations="torch-eager"))[0].activations
    assert abs(whole / MEASURED_WHOLE_BF16[case] - 1) < 1e-4  # the embeddings' scalar scales (a few bytes) left


@pytest.mark.parametrize("preset", ["gemma-4-31b", "gemma-4-26b-a4b"])
def test_stage_parameters_sum_to_the_exact_count(preset):
    m = preset_model(preset)
    lm = count_params(m).total  # the language model (the towers are not trained here: results say so)
    assert training_memory(m, Workload(seq_len=1024, batch_size=1))[0].params == lm
    for P in (2, 3, 5):
        stages = training_memory(m, Workload(seq_len=1024, batch_size=1), Training(micro_batches=8),
                                 Parallelism(pipeline=P))
        tied_copy = m.vocab_size * m.d_model  # the last stage's copy of the tied table
        assert sum(s.params for s in stages) == lm + tied_copy


_S = st.integers(1, 4)


@st.composite
def gemma4_configs(draw: st.DrawFn) -> dict:
    L = draw(st.integers(2, 9))
    kv = draw(st.sampled_from([1, 2]))
    types = [draw(st.sampled_from(["sliding_attention", "full_attention"])) for _ in range(L)]
    types[-1] = "full_attention"
    cfg = {"model_type": "gemma4_text", "vocab_size": 64, "hidden_size": 8 * draw(_S), "num_hidden_layers": L,
           "num_attention_heads": kv * draw(st.integers(1, 3)), "num_key_value_heads": kv,
           "intermediate_size": draw(st.integers(3, 40)), "head_dim": 4 * draw(_S), "global_head_dim": 4 * draw(_S),
           "hidden_size_per_layer_input": draw(st.sampled_from([0, 3])), "vocab_size_per_layer_input": 64,
           "layer_types": types, "attention_k_eq_v": draw(st.booleans())}
    shared = draw(st.integers(0, L - 1))
    if shared and set(types[: L - shared]) == set(types):
        cfg |= {"num_kv_shared_layers": shared, "use_double_wide_mlp": draw(st.booleans())}
    if draw(st.booleans()):
        cfg |= {"enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 5}
    return cfg


@settings(max_examples=40, deadline=None)
@given(gemma4_configs(), st.integers(1, 9), st.sampled_from(["default", "torch-eager"]))
def test_classes_sum_over_any_split(cfg, cut, profile):
    """Parameters: the layer classes and the embedding-side parts are the exact count. Activations: the
    closed-form sums over [0, k) and [k, L) add up to [0, L), and are a loop over the layers."""
    m = _model(cfg)
    full = count_params(m)
    side = full.embedding + full.final_norm + full.lm_head + full.lm_head_bias
    assert gemma4.blocks_params(m, 0, m.n_layers) + gemma4.embedding_side_params(m) + side == full.total
    k = min(cut, m.n_layers)
    w, tr = Workload(seq_len=7, batch_size=2), Training(activations=profile)
    parts = gemma4.parts(m, w, tr)
    whole, a, b = parts.chunk(m, 0, m.n_layers), parts.chunk(m, 0, k), parts.chunk(m, k, m.n_layers)
    assert whole.total == a.total + b.total
    by_class = dict(parts.by_class)
    loop = sum(by_class[gemma4.LayerClass(m.attention_pattern[i % len(m.attention_pattern)],
                                          i >= m.first_kv_shared_layer)].total for i in range(m.n_layers))
    assert loop == whole.total


@settings(max_examples=25, deadline=None)
@given(gemma4_configs(), st.integers(1, 64), st.integers(1, 4))
def test_affine_in_the_batch(cfg, S, B):
    """Every stored tensor is per token (or per token and key for eager attention's S x S): linear in B;
    weight copies and the layer scalar are per layer (constant)."""
    m = _model(cfg)
    tr = Training(activations="torch-eager", precision="bf16")

    def acts(b: int) -> int:
        return training_memory(m, Workload(seq_len=S, batch_size=b), tr)[0].stored

    assert acts(B + 2) - acts(B + 1) == acts(B + 1) - acts(B) > 0


def test_full_recompute_keeps_the_block_inputs():
    m = preset_model("gemma-4-31b")
    w = Workload(seq_len=4096, batch_size=1)
    st_ = training_memory(m, w, Training(recompute="full"))[0]
    assert (st_.attention, st_.mlp, st_.norm) == (0, 0, 60 * 2 * 4096 * 5376)
    largest = gemma4.parts(m, w, Training()).largest
    assert st_.recompute_working == largest
    assert layer_activations(m, w, Training()).total <= largest


def test_memory_json_prices_gemma4(capsys):
    code = run(["memory", "--preset", "gemma-4-31b", "--S", "4096", "--B", "1", "--flash", "--zero", "3", "-f", "json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    api = tc.memory("gemma-4-31b", S=4096, B=1, flash=True, zero=3)
    assert out == api.model_dump(mode="json")
    stage = out["memory"]["stages"][0]
    assert stage["params"] == 30_697_345_280  # the language model: expected_params 31,273,086,512 less the towers
    assert out["memory"]["stages"][0]["activations_bytes"] > 0


def test_train_and_plan_price_gemma4():
    r = tc.train("gemma-4-26b-a4b", gpus=8, gpu="h100", S=4096, global_batch=64, zero=3, recompute="full")
    assert r.step_time_s > 0
    plans = tc.plan("gemma-4-31b", gpus=16, gpu="h100", S=4096, global_batch=64)
    assert plans.model_dump(mode="json")


@pytest.mark.parametrize("kw, match", [
    ({"T": 2}, "training .* at T 2 is not priced for .*Gemma 4.*use T 1"),
    ({"finetune": "lora", "lora_targets": "experts"}, "lora_targets .experts. select no module"),
    ({"finetune": "lora", "optimizer": "adamw-8bit"}, "optimizer adamw-8bit"),
    ({"dropout": True}, "dropout is not priced for .*Gemma 4.*Gemma 4 trains without it; use --dropout off"),
    ({"activations": "seed"}, "activations seed"),
    ({"context": 2}, "context parallelism"),
    ({"recompute": "op", "flash": True}, "recompute op"),
])  # fmt: skip
def test_refusals_are_one_line(kw, match):
    with pytest.raises((TcalcError, ValueError), match=match):
        tc.memory("gemma-4-31b", S=4096, B=1, **kw)


def test_eager_head_counts_each_kinds_rotary_and_the_per_layer_inputs():
    """torch-eager, first stage: cos and sin of each attention kind's h_d (sliding 8, full 16), and the
    per-layer input path: ids 8·N (memory.torch_eager_head), the two scalar scales, the projection's input
    p·N·D below fp32, the P-wide norm over N·L rows (fp32 input and normalized, two statistics) and its
    weight's fp32 copy, the combined inputs p·N·L·P."""
    m = _model(TINY)
    N, S, p, L, P, D = 16, 16, 2, 4, 4, 32
    w, tr = Workload(seq_len=S, batch_size=1), Training(precision="bf16", activations="torch-eager")
    first, _ = head_activations(m, w, tr)
    rotary = 2 * p * S * (8 + 16)
    ple = 2 * p + p * N * D + (2 * 4 * N * L * P + 8 * N * L) + 4 * P + p * N * L * P
    assert first == 8 * N + rotary + ple


# ---------------------------------------------------------------------------- fine-tuning (adapters)
_MOE4 = {**_G4, "num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2,
         "num_kv_shared_layers": 2, "use_double_wide_mlp": True, "attention_k_eq_v": True,
         "num_global_key_value_heads": 1, "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2,
         "moe_intermediate_size": 12}  # fmt: skip


def test_trainable_parameters_equal_peft():
    """PEFT 0.21.2's get_nb_trainable_parameters on this model (r = 4; tools/crosscheck/peft_params.py
    compares random shapes too). all-linear: per layer q, k, v, o, gate, up, down, the per-layer gate and
    projection, router.proj (an nn.Linear), and per_layer_model_projection once: sliding 2,192, full 2,256
    (no v_proj: k = v), kv-shared sliding 2,288 and full 2,544 (no k/v, double MLP) + 192 = 9,472."""
    m = _model(_MOE4)
    trainable_params = gemma4.trainable_params

    def count(targets: str) -> int:
        return trainable_params(m, Training(finetune="lora", lora_rank=4, lora_targets=targets)).total

    assert count("all-linear") == 2192 + 2256 + 2288 + 2544 + 192 == 9472
    assert count("q,v") == 1472  # q 256 / 384 on sliding / full, v on the first sliding layer only (192)
    assert count("experts") == 4 * 4 * (4 * (32 + 24) + 4 * (12 + 32)) == 6400


# measured by tools/crosscheck/lora_activations.py (PEFT 0.21.2, r = 8, eager, bf16 base; docs/validation.md)
LORA_MEASURED = [
    ("all-linear", "mixed", 521660), ("all-linear", "bf16", 467644), ("q,v", "mixed", 400188),
    ("o", "bf16", 395964), ("gate,up,down", "mixed", 443068),
]  # fmt: skip


@pytest.mark.parametrize("targets, precision, measured", LORA_MEASURED)
def test_lora_activations_equal_the_measured_bytes(targets, precision, measured):
    cfg = {**_G4, "num_hidden_layers": 4, "num_key_value_heads": 4, "num_kv_shared_layers": 2,
           "layer_types": ["sliding_attention", "full_attention"] * 2, "use_double_wide_mlp": True,
           "attention_k_eq_v": True, "num_global_key_value_heads": 1}
    m = _model(cfg)
    tr = Training(precision=precision, activations="torch-eager", finetune="lora", lora_rank=8, lora_targets=targets)
    got = training_memory(m, Workload(seq_len=20, batch_size=2), tr)[0].activations
    assert abs(got - measured) <= 4  # the embedding's scalar scale


def test_qlora_quantizes_every_class_matrix():
    """QLoRA: the layers' Linear weights (and per_layer_model_projection) in NF4, the rest 16-bit; the
    weights on the GPU are the NF4 bytes plus the unquantized rest at p."""
    from transformer_calc.estimators.training.finetune import nf4_bytes

    m = _model(TINY)
    tr = Training(finetune="qlora", lora_targets="q,v")
    st_ = training_memory(m, Workload(seq_len=16, batch_size=1), tr)[0]
    elems, nf4 = gemma4.quantized_elements(m, 0, m.n_layers)
    side = 32 * 16  # per_layer_model_projection D x L·P
    assert st_.quantized_weights == nf4 + nf4_bytes(side)
    frozen = count_params(m).total
    assert st_.weights - st_.adapter_weights == (frozen - elems - side) * 2 + nf4 + nf4_bytes(side)


def test_memory_json_prices_gemma4_qlora(capsys):
    code = run(["memory", "--preset", "gemma-4-26b-a4b", "--S", "2048", "--finetune", "qlora", "--lora-targets",
                "all-linear", "-f", "json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out == tc.memory("gemma-4-26b-a4b", S=2048, finetune="qlora", lora_targets="all-linear").model_dump(mode="json")
    assert 0 < out["params"]["trainable"] < out["params"]["total"] // 50
    r = tc.train("gemma-4-31b", gpus=8, gpu="h100", S=4096, global_batch=32, finetune="lora", zero=3)
    assert not r.fits and r.step_time_s is None and "--recompute full (peak 19.5 GiB)" in r.needs  # 102.8 GiB
    r = tc.train("gemma-4-31b", gpus=8, gpu="h100", S=4096, global_batch=32, finetune="lora", zero=3, recompute="full")
    assert r.fits and r.step_time_s > 0
