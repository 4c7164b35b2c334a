"""Optimizer state bytes tensor by tensor: Adafactor, Muon, 8-bit and paged 8-bit AdamW."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings

from transformer_calc.cli import run
from transformer_calc.model.config import Training, Workload
from transformer_calc.estimators.training.memory import training_memory
from transformer_calc.estimators.training.optimizers import Tensors, groups, model_groups, stage_tensors
from transformer_calc.estimators.params import count_params
from transformer_calc.sources.presets import preset_model

from conftest import model_configs

LLAMA8 = preset_model("llama-3.1-8b")
W = Workload(seq_len=128)


def test_adafactor_factors_a_matrix_into_row_and_column():
    """Shazeer & Stern 2018: an R x C matrix keeps R + C second-moment statistics; a vector keeps n."""
    (g,) = groups(Training(optimizer="adafactor"), [Tensors("hidden", 4096, 14336)])
    assert g.state_bytes == 4 * (4096 + 14336)
    (v,) = groups(Training(optimizer="adafactor"), [Tensors("vector", 4096, 0, 3)])
    assert v.state_bytes == 4 * 3 * 4096


def test_adafactor_llama_by_hand():
    # per layer q 4096x4096, k and v 1024x4096, o 4096x4096, gate/up 14336x4096, down 4096x14336;
    # embedding and head 128256x4096; 65 RMSNorm vectors of 4096
    per_layer = 8192 + 5120 + 5120 + 8192 + 3 * 18432
    expected = 4 * (32 * per_layer + 2 * (128256 + 4096) + 65 * 4096)
    assert sum(g.state_bytes for g in model_groups(LLAMA8, Training(optimizer="adafactor"))) == expected == 12_609_536


def test_muon_momentum_for_hidden_matrices_adamw_for_the_rest():
    gs = {g.group: g for g in model_groups(LLAMA8, Training(optimizer="muon"))}
    counts = count_params(LLAMA8)
    hidden = counts.layers - 32 * counts.layer.norms
    assert gs["muon (hidden matrices)"].params == hidden
    assert gs["muon (hidden matrices)"].state_bytes == 4 * hidden  # one fp32 momentum
    rest = counts.total - hidden  # embedding, head, norms
    assert gs["adamw (embedding, head, gains, biases)"].state_bytes == 8 * rest


def test_bitsandbytes_8bit_blockwise_and_small_tensors():
    tr = Training(optimizer="adamw-8bit")
    (g,) = groups(tr, [Tensors("hidden", 4096, 4096)])
    n = 4096 * 4096
    assert g.state_bytes == 2 * n + 2 * 4 * (n // 256)  # two uint8 moments + an fp32 absmax per 256, each
    (small,) = groups(tr, [Tensors("vector", 2048, 0)])
    assert small.state_bytes == 8 * 2048  # under min_8bit_size = 4096: fp32 moments


def test_paged_is_the_same_bytes_and_said(capsys):
    a = training_memory(LLAMA8, W, Training(optimizer="adamw-8bit"))[0]
    b = training_memory(LLAMA8, W, Training(optimizer="paged-adamw-8bit"))[0]
    assert a.optimizer == b.optimizer
    assert run(["memory", "--preset", "gpt2", "--S", "128", "--optimizer", "paged-adamw-8bit", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["optimizer_groups"]["paged"] is True


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "lion", "sgd-momentum"])
def test_plain_optimizers_unchanged(optimizer):
    from transformer_calc.estimators.training.memory import optimizer_bytes_per_param

    tr = Training(optimizer=optimizer)
    st = training_memory(LLAMA8, W, tr)[0]
    assert st.optimizer == st.params * optimizer_bytes_per_param(tr)


@settings(max_examples=40, deadline=None)
@given(m=model_configs())
def test_tensor_inventory_sums_to_the_parameter_count(m):
    n_moe = m.n_moe_layers()
    tensors = stage_tensors(m, 1, 1, None, n_moe, m.n_layers - n_moe, True, True, 1)
    assert sum(t.numel for t in tensors) == count_params(m).total


def test_zero_shards_shaped_optimizers():
    from transformer_calc.model.config import Parallelism

    one = training_memory(LLAMA8, W, Training(optimizer="adafactor"))[0]
    eight = training_memory(LLAMA8, W, Training(optimizer="adafactor"), Parallelism(data=8, zero=1))[0]
    assert eight.optimizer == pytest.approx(one.optimizer / 8, rel=1e-6)


def test_optimizer_with_adapters_counts_adapter_matrices():
    tr = Training(finetune="lora", lora_rank=16, optimizer="adafactor")
    gs = model_groups(LLAMA8, tr)
    assert sum(g.params for g in gs) == 41_943_040
    # each adapter is two matrices: A (16 x d_in) and B (d_out x 16), factored: (16 + d_in) + (d_out + 16)
    per_layer = sum(16 + d_in + d_out + 16 for d_in, d_out in [(4096, 4096), (4096, 1024), (4096, 1024), (4096, 4096),
                                                               (4096, 14336), (4096, 14336), (14336, 4096)])
    assert sum(g.state_bytes for g in gs) == 4 * 32 * per_layer


@pytest.mark.parametrize("source", ["glm_moe_dsa_dsa-freq", "glm_moe_dsa_full", "falcon-h1-34b", "gemma-4-26b-a4b",
                                    "nemotron-3-super-120b-a12b", "deepseek-v3.2"])
@pytest.mark.parametrize("optimizer", ["adamw", "lion"])
def test_plain_optimizer_groups_hold_every_trainable_parameter(source, optimizer):
    """A per-parameter optimizer's one group is the trainable parameters, whatever the layers: a DSA model
    whose indexer sits on some layers only (glm_moe_dsa's index pattern) holds count_params' total, not
    one indexer per layer (the tensor inventory's per-layer shard, which counted 205,992 for dsa-freq)."""
    from conftest import REPO
    from transformer_calc.model.config import ModelConfig
    from transformer_calc.sources.hf import from_hf_config

    path = REPO / "tests" / "data" / "hf" / f"{source}.json"
    if path.exists():
        m = ModelConfig.model_validate(from_hf_config(json.loads(path.read_text())["config"]))
    else:
        m = preset_model(source)
    gs = model_groups(m, Training(optimizer=optimizer))
    assert [g.group for g in gs] == [optimizer]
    assert gs[0].params == count_params(m).total
    if source == "glm_moe_dsa_dsa-freq":
        assert gs[0].params == 202_088 == json.loads(path.read_text())["expected_params"]
