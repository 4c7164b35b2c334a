"""`--recompute op`: torchtitan's per-op selective activation checkpointing (issue 24, round 3).

The policy is torchtitan/parallelisms/parallelize_llama.py (`_save_list`, `_custom_policy`): save
every odd-numbered aten.mm output of a block's forward, SDPA's outputs and reduce-scatters;
recompute the rest. Golden numbers worked by hand from Llama 3 8B's shapes (its config.json:
D 4096, 32 query heads and 8 KV heads of 128, F 14336, 32 layers, no biases).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.estimators.flops import count_flops, op_recompute_flops
from transformer_calc.estimators.training.memory import layer_activations
from transformer_calc.estimators.training.train import estimate_step
from transformer_calc.model.config import Parallelism, Recompute, Training, Workload
from transformer_calc.sources.presets import gpu as gpu_by_name
from transformer_calc.sources.presets import preset_model

LLAMA3_8B = preset_model("llama-3-8b")


def test_op_recompute_flops_llama3_8b_by_hand():
    """Recomputed matmuls of a Llama block are the 2nd, 4th and 6th: wk (D x 8·128), wo (D x D),
    w3 (D x F); 2 FLOPs per weight per token."""
    w = Workload(seq_len=8192, batch_size=1)
    per_block = 2 * 8192 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336)
    assert op_recompute_flops(LLAMA3_8B, w) == per_block == 1_305_670_057_984
    step = count_flops(LLAMA3_8B, w, causal=True)
    assert step.recompute_flops(Recompute.op) == 32 * per_block
    assert step.hardware(Recompute.op) == step.total + 32 * per_block


def test_op_layer_activations_llama3_8b_by_hand():
    """Kept per block (B 1, S 8192, bf16, T 1): block input D, wq output (32·128), wv output
    (8·128), SDPA output (32·128) + fp32 logsumexp per query and head, w1 output F, w2 output D."""
    w = Workload(seq_len=8192, batch_size=1)
    acts = layer_activations(LLAMA3_8B, w, Training(framework="torchtitan", recompute="op", flash=True))
    assert acts.norm == 2 * 8192 * 4096
    assert acts.attention == 2 * 8192 * (32 + 8) * 128 + 2 * 8192 * 32 * 128 + 4 * 32 * 8192
    assert acts.mlp == 2 * 8192 * 14336 + 2 * 8192 * 4096
    assert acts.total == 521_142_272


@settings(max_examples=25, deadline=None)
@given(b=st.sampled_from([1, 2, 4]), s=st.sampled_from([1024, 4096, 8192]), t=st.sampled_from([1, 2, 4, 8]))
def test_op_sits_between_none_and_full(b, s, t):
    """Per-op AC keeps less than no recompute and more than full; it repeats some but not all of a
    forward's matmuls."""
    w = Workload(seq_len=s, batch_size=b)
    par = Parallelism(tensor=t, sequence_parallel=t > 1)
    kept = {rc: layer_activations(LLAMA3_8B, w, Training(recompute=rc, flash=True), par).total
            for rc in ("none", "op", "full")}
    assert kept["full"] < kept["op"] < kept["none"]
    step = count_flops(LLAMA3_8B, w, causal=True)
    assert 0 < step.recompute_flops(Recompute.op) < step.recompute_flops(Recompute.full)


def test_op_step_time_between_none_and_full():
    w = Workload(seq_len=8192, batch_size=2)
    par = Parallelism(data=8, zero=3)
    times = {rc: estimate_step(LLAMA3_8B, w, Training(framework="torchtitan", recompute=rc, flash=True), par,
                               gpu_by_name("h100"), global_batch=16).step_time_s for rc in ("none", "op", "full")}
    assert times["none"] < times["op"] < times["full"]


@pytest.mark.parametrize("model, why", [("qwen3-30b-a3b", "MoE"), ("gpt2", "biases")])
def test_op_refused_where_not_priced(capsys, model, why):
    from transformer_calc.cli import run

    code = run(["train", model, "--gpus", "8", "--global-batch", "8", "--recompute", "op", "--format", "json"])
    _, err = capsys.readouterr()
    assert code == 2 and "--recompute op" in err and why in err and "Traceback" not in err


def test_cli_op(capsys):
    from transformer_calc.cli import run

    base = ["train", "llama-3-8b", "--gpus", "8", "--S", "8192", "--global-batch", "16", "--micro-batch", "2",
            "--zero", "3", "--framework", "torchtitan", "--format", "json"]
    out = {}
    for rc in ("none", "op", "full"):
        assert run([*base, "--recompute", rc]) == 0
        out[rc] = json.loads(capsys.readouterr()[0])
    assert out["op"]["training"]["recompute"] == "op"
    assert out["full"]["memory"]["peak_bytes"] < out["op"]["memory"]["peak_bytes"] < out["none"]["memory"]["peak_bytes"]
    assert out["none"]["hardware_flops"] < out["op"]["hardware_flops"] < out["full"]["hardware_flops"]
