"""LatentMoE (Nemotron 3 Super; modeling_nemotron_h.py NemotronHMoE with moe_latent_size): the routed
experts read and write ℓ features between a D x ℓ and an ℓ x D projection (docs/formulas.md §5.7).
Totals as transformers 5.23 builds them (tools/crosscheck/hf_params.py, fixtures
tests/data/hf/nemotron_h_latent-moe*.json), forward FLOPs as FlopCounterMode counts them
(tools/crosscheck/flops_mixers.py)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.flops import layer_flops
from transformer_calc.estimators.inference.roofline import matmul_params
from transformer_calc.estimators.mixers import require_attention_only
from transformer_calc.estimators.params import count_params, layer_params, shard_params
from transformer_calc.model.config import ModelConfig, Workload, build_model
from transformer_calc.sources.hf import from_hf_config

FIXTURE = json.loads((REPO / "tests" / "data" / "hf" / "nemotron_h_latent-moe.json").read_text())


def _model(**over: object) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config({**FIXTURE["config"], **over}))


def test_infinity_in_time_step_limit_parses():
    assert FIXTURE["config"]["time_step_limit"][1] == float("inf")  # written as Infinity, as Nemotron 3 Super's file


def test_params_by_hand():
    """D = 64, ℓ = 24, 4 experts of 32 (up, down: relu², no gate), shared 48."""
    m = _model()
    assert m.moe_latent_dim == 24
    p = layer_params(m)
    assert p.mlp_weights == 4 * 2 * 24 * 32 + 2 * 64 * 24  # experts in ℓ, plus the two latent projections
    assert count_params(m).total == FIXTURE["expected_params"] == 155504  # transformers 5.23
    without = _model(moe_latent_size=None)
    assert count_params(m).active - count_params(without).active == (
        2 * (2 * 24 * 32 - 2 * 64 * 32) + 2 * 64 * 24) * m.n_moe_layers()  # top-2 experts in ℓ, projections


def test_flops_by_hand():
    m = _model()
    f = layer_flops(m, Workload(seq_len=10, batch_size=1), moe=True)
    assert f.mlp == 2 * 10 * 24 * 32 * 2 * 2 + 2 * 10 * 2 * 64 * 24  # top-2 experts in ℓ + D <-> ℓ


def test_tensor_parallel_replicates_the_projections():
    """The D <-> ℓ projections are whole on every rank (vLLM ReplicatedLinear, Megatron-core duplicated):
    what T = 2 saves on the non-routed part is what it saves without them."""
    m, plain = _model(), _model(moe_latent_size=None)

    def saved(x: ModelConfig) -> int:
        one, two = shard_params(x, 1), shard_params(x, 2)
        return (one.layer - one.routed_experts) - (two.layer - two.routed_experts)

    assert saved(m) == saved(plain)
    assert shard_params(m, 1).routed_experts == 2 * shard_params(m, 2).routed_experts == 4 * 2 * 24 * 32
    assert matmul_params(m, 1) - matmul_params(m, 2) == matmul_params(plain, 1) - matmul_params(plain, 2) - (
        m.n_moe_layers() * 2 * 2 * (64 - 24) * 16)  # top-2 experts' halves read ℓ, not D


def test_checks():
    with pytest.raises(TcalcError, match="moe_latent_dim"):
        build_model({"n_layers": 2, "d_model": 64, "n_heads": 4, "vocab_size": 100, "moe_latent_dim": 8})
    with pytest.raises(TcalcError, match="latent MoE"):
        require_attention_only(build_model({"n_layers": 2, "d_model": 64, "n_heads": 4, "vocab_size": 100,
                                            "n_experts": 4, "experts_per_token": 2, "moe_latent_dim": 8}),
                               "training memory")


def test_training_prices_the_experts_in_the_latent_width():
    """Training memory and step time (no longer refused): the routed experts' inputs, their
    all-to-all and permutation move ℓ = 24 features per token copy, not D = 64; fc2_latent_proj keeps
    its ℓ-wide input; the two projections (D x ℓ, ℓ x D) are whole GEMM weights on every rank."""
    from transformer_calc.estimators.training.activations import layer_activations
    from transformer_calc.estimators.training.finetune import layer_counts, layer_matrices
    from transformer_calc.estimators.training.moe_time import moe_block_time
    from transformer_calc.estimators.training.step import default_network
    from transformer_calc.estimators.training.train import estimate_step
    from transformer_calc.model.config import Parallelism, Training
    from transformer_calc.sources.presets import gpu

    m, plain = _model(), _model(moe_latent_size=None)
    w, tr = Workload(seq_len=16, batch_size=2), Training()
    B, S, k = 2, 16, 2
    latent, dense = layer_activations(m, w, tr, Parallelism()), layer_activations(plain, w, tr, Parallelism())
    assert latent.mlp - dense.mlp == 2 * B * S * (k * (24 - 64) + 24)  # routed copies in ℓ, + fc2_latent's input
    mats = layer_matrices(m, layer_counts(m))  # what the FP8 weight copies and casts count
    assert (24 * 32, 2 * 4 * 2) in mats and (64 * 24, 2 * 2) in mats  # 2 MoE layers: experts in ℓ; the projections
    par = Parallelism(data=2, expert=2)
    net = default_network(gpu("h100"))
    one = moe_block_time(m, tr, par, net, tokens=B * S, hbm_bytes_s=3e12)
    two = moe_block_time(plain, tr, par, net, tokens=B * S, hbm_bytes_s=3e12)
    assert one.all_to_all - net.intra_latency_s * 4 == pytest.approx((two.all_to_all - net.intra_latency_s * 4) * 24 / 64)
    est = estimate_step(m, w, tr, par, gpu("h100"), global_batch=4)
    assert est.step_time_s > 0 and est.moe_all_to_all_s > 0
