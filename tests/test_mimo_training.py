"""MiMo-V2-Flash's training memory (estimators/training/kind_attention.py; docs/formulas.md §5.13 "Training
memory"): each attention kind on its own K/V heads, sinks and narrower values, by hand and against the bytes
eager PyTorch saves (tools/crosscheck/activations_mixers.py, docs/validation.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.params import count_params
from transformer_calc.estimators.training import kind_attention
from transformer_calc.estimators.training.memory import block_parts, training_memory
from transformer_calc.model.config import LayerAttention, ModelConfig, Parallelism, Training, Workload
from transformer_calc.sources.hf import from_hf_config

from test_mimo import SMALL

SLIDING, FULL = LayerAttention.sliding, LayerAttention.full


def _model(cfg: dict) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg))


def test_attention_by_kind_by_hand():
    """SMALL (D 64, A 4, n_kv 1 and 2 on sliding layers, h_d 24, h_v 16), S 16, B 1, p 2, FlashAttention:
    input 2·16·64 = 2,048; q, k, v 2·16·((4 + n_kv)·24 + n_kv·16): sliding 5,632, full 4,352; logsumexp
    4·16·4 = 256; W_O input 2·16·4·16 = 2,048."""
    m = _model(SMALL)
    w, tr = Workload(seq_len=16, batch_size=1), Training(precision="mixed", flash=True)
    assert kind_attention.attention_bytes(m, w, tr, Parallelism(), SLIDING) == 2048 + 5632 + 256 + 2048 == 9984
    assert kind_attention.attention_bytes(m, w, tr, Parallelism(), FULL) == 2048 + 4352 + 256 + 2048 == 8704
    parts = block_parts(m, w, tr, Parallelism())
    assert parts.sequence == {FULL: 8704, SLIDING: 9984}
    stage = training_memory(m, w, tr)[0]
    assert stage.attention == 2 * 8704 + 5 * 9984  # layers F S S S S F S
    assert stage.params == count_params(m).total


# measured by tools/crosscheck/activations_mixers.py (torch 2.13, transformers 5.23): bytes each
# MiMoV2FlashAttention saves beyond its input (and its kind's cos/sin), bf16 and fp32
_MIMO = {"model_type": "mimo_v2_flash", "vocab_size": 100, "num_attention_heads": 4, "intermediate_size": 40,
         "moe_intermediate_size": 8, "pad_token_id": 0}
MEASURED = [
    ({**_MIMO, "hidden_size": 32, "num_hidden_layers": 2, "num_key_value_heads": 1, "head_dim": 12, "v_head_dim": 8,
      "n_routed_experts": 2, "num_experts_per_tok": 1, "sliding_window": 8,
      "layer_types": ["sliding_attention", "full_attention"], "mlp_layer_types": ["dense", "dense"]}, 16, 2,
     {"bf16": {SLIDING: 15616, FULL: 15360}}),
    ({**_MIMO, "hidden_size": 48, "num_hidden_layers": 3, "num_key_value_heads": 2, "head_dim": 24, "v_head_dim": 20,
      "n_routed_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4,
      "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]}, 21, 3,
     {"fp32": {FULL: 111888, SLIDING: 112896}, "bf16": {FULL: 56952, SLIDING: 57456}}),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(MEASURED)))
def test_torch_eager_equals_the_measured_bytes(case):
    """Eager: q, repeat_kv(k), repeat_kv(v) at A heads p·A·(2·h_d + h_v), the row maxima's int64 indices 8·A,
    the softmax in the scores' dtype over S keys (+ the sink column on sliding layers), W_O's input p·A·h_v."""
    cfg, S, B, by_dtype = MEASURED[case]
    m = _model(cfg)
    w = Workload(seq_len=S, batch_size=B)
    for dtype, measured in by_dtype.items():
        tr = Training(precision=dtype, activations="torch-eager")
        for kind, got in measured.items():
            assert kind_attention.attention_bytes(m, w, tr, Parallelism(), kind) - tr.p * B * S * m.d_model == got


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([1, 2]), st.sampled_from([8, 16, 24]), st.integers(1, 40), st.integers(1, 3),
       st.sampled_from(["default", "torch-eager"]), st.booleans())
def test_stage_sums_each_kind(kv, hv, S, B, profile, flash):
    """A stage's attention is each kind's part times its layers; a wider K/V or value never keeps less."""
    m = _model({**SMALL, "num_key_value_heads": kv, "v_head_dim": hv})
    w, tr = Workload(seq_len=S, batch_size=B), Training(activations=profile, flash=flash)
    parts = {k: kind_attention.attention_bytes(m, w, tr, Parallelism(), k) for k in (SLIDING, FULL)}
    assert training_memory(m, w, tr)[0].attention == 2 * parts[FULL] + 5 * parts[SLIDING]
    assert parts[SLIDING] >= parts[FULL]  # twice the K/V heads (and the sink column)


@pytest.mark.parametrize("kw, match", [
    ({"activations": "seed"}, "activations seed"),
    ({"dropout": True}, "dropout is not priced"),
    ({"finetune": "lora"}, "MiMo-V2-Flash"),
])  # fmt: skip
def test_refusals_are_one_line(kw, match):
    with pytest.raises((TcalcError, ValueError), match=match):
        training_memory(_model(SMALL), Workload(seq_len=64, batch_size=1), Training(**kw))
