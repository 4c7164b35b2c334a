"""MoE time per block and micro-batch (estimators/training/moe_time.py; docs/formulas.md §6, "MoE
blocks"): all-to-all inside and across the NVLink domain, permutation, router, expert weights, the
fitted fixed cost, load imbalance and all-to-all overlap."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.cli import run
from transformer_calc.estimators.training import moe_time
from transformer_calc.estimators.training.train import Network, default_network, estimate_step
from transformer_calc.model.config import Parallelism, Training, Workload
from transformer_calc.sources.presets import gpu, preset_model

REPO = Path(__file__).resolve().parents[1]
NET = Network(node_size=8, intra_bytes_s=450e9, inter_bytes_s=50e9)  # DGX H100: 900 GB/s NVLink, 400 Gb/s NDR


# ---------------------------------------------------------------------------- by hand
def test_all_to_all_inside_one_domain():
    """EP 8 in one node: 7/8 of the bytes over NVLink + one NVLink latency (10 µs)."""
    assert moe_time.all_to_all_s(1e9, 8, 1, NET) == pytest.approx(1e9 * 7 / 8 / 450e9 + 10e-6, rel=1e-12)


def test_all_to_all_across_domains():
    """EP 16 over two nodes: 7/16 over NVLink and 8/16 over the NIC at once; the NIC's half sets the pace."""
    assert moe_time.all_to_all_s(1e9, 16, 1, NET) == pytest.approx(max(1e9 * 7 / 16 / 450e9, 1e9 * 8 / 16 / 50e9) + 20e-6)


def test_expert_tensor_ranks_spread_the_group():
    """etp 2 x EP 8 spans 16 GPUs: 4 EP ranks share a node of 8."""
    assert moe_time.all_to_all_s(1e9, 8, 2, NET) == pytest.approx(max(1e9 * 3 / 8 / 450e9, 1e9 * 4 / 8 / 50e9) + 20e-6)


def test_node_limited_routing_by_hand():
    """EP 64 over 8 nodes, k 8, M 4: a token crosses the NIC to min(4, 8)·7/8 = 3.5 remote nodes (not
    8·56/64 = 7 copies) and its 8 copies move 7/8 of the time inside a node over NVLink."""
    copy = 7168 * 2
    limited = moe_time.node_limited_all_to_all_s(4096, 8, copy, 64, 1, NET, 4)
    assert limited == pytest.approx(max(4096 * 8 * copy * 7 / 8 / 450e9, 4096 * copy * 3.5 / 50e9) + 20e-6, rel=1e-12)
    assert moe_time.node_limited_all_to_all_s(4096, 8, copy, 64, 1, NET, None) == moe_time.all_to_all_s(
        4096 * 8 * copy, 64, 1, NET)
    assert moe_time.node_limited_all_to_all_s(4096, 8, copy, 8, 1, NET, 4) == pytest.approx(
        4096 * 8 * copy * 7 / 8 / 450e9 + 10e-6)  # one node: nothing crosses the NIC


def test_fp8_dispatch_halves_half_the_all_to_alls():
    """FP8 dispatch (1 byte + a 4-byte scale per 128 channels) for the forward dispatch and its backward
    twin; the two combines stay 16-bit: 2·(fp8) + 2·(bf16) all-to-alls, node limit off."""
    h100 = gpu("h100")
    m = preset_model("qwen3-30b-a3b")
    kw = dict(tokens=4096, hbm_bytes_s=h100.memory_bw_bytes_s * 0.9)
    plain = moe_time.moe_block_time(m, Training(), Parallelism(expert=8, data=8), default_network(h100), **kw)
    fp8 = moe_time.moe_block_time(m, Training(), Parallelism(expert=8, data=8), default_network(h100),
                                  dispatch=moe_time.Dispatch(dtype="fp8"), **kw)
    one = 4096 * 8 * 2048 * 7 / 8 / 450e9
    assert fp8.all_to_all == pytest.approx(2 * (one * (1 + 4 / 128) + 10e-6) + 2 * (one * 2 + 10e-6), rel=1e-12)
    assert plain.all_to_all == pytest.approx(4 * (one * 2 + 10e-6), rel=1e-12)
    assert moe_time.moe_block_time(m, Training(), Parallelism(expert=8, data=8), default_network(h100),
                                   dispatch=moe_time.Dispatch(), **kw) == plain


def test_qwen3_30b_block_by_hand():
    """Qwen3-30B-A3B (D 2048, k 8, n_e 128, F_e 768, SwiGLU) on H100, EP 8, 4096 tokens, bf16:
    all-to-all 4 x (4096·8·2048·2 B · 7/8 / 450 GB/s + 10 µs); permutation 4·9·4096·2048·2 B and
    router 24·4096·128 B at 0.9 x 3.35 TB/s; 16 local experts of 3·2048·768 weights at 2·2 + 8 B;
    fixed 16 x 0.4 ms."""
    h100 = gpu("h100")
    hbm = h100.memory_bw_bytes_s * 0.9
    blk = moe_time.moe_block_time(preset_model("qwen3-30b-a3b"), Training(), Parallelism(expert=8, data=8),
                                  default_network(h100), tokens=4096, hbm_bytes_s=hbm)
    assert blk.all_to_all == pytest.approx(4 * (4096 * 8 * 2048 * 2 * 7 / 8 / 450e9 + 10e-6), rel=1e-12)
    assert blk.permutation == pytest.approx((4 * 9 * 4096 * 2048 * 2 + 24 * 4096 * 128) / hbm, rel=1e-12)
    assert blk.expert_weights == pytest.approx(16 * 3 * 2048 * 768 * (2 * 2 + 8) / hbm, rel=1e-12)
    assert blk.fixed == pytest.approx(16 * 0.4e-3)


def test_full_recompute_adds_two_all_to_alls():
    m = preset_model("qwen3-30b-a3b")
    a = moe_time.moe_block_time(m, Training(), Parallelism(expert=8, data=8), NET, tokens=4096, hbm_bytes_s=3e12)
    b = moe_time.moe_block_time(m, Training(recompute="full"), Parallelism(expert=8, data=8), NET, tokens=4096,
                                hbm_bytes_s=3e12)
    assert b.all_to_all == pytest.approx(a.all_to_all * 6 / 4)


# ---------------------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None)
@given(size=st.floats(1e3, 1e11), ep=st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]), etp=st.sampled_from([1, 2, 4]),
       faster=st.floats(1, 10))
def test_more_bandwidth_never_slows_an_all_to_all(size, ep, etp, faster):
    base = moe_time.all_to_all_s(size, ep, etp, NET)
    quick = Network(node_size=8, intra_bytes_s=450e9 * faster, inter_bytes_s=50e9 * faster)
    assert moe_time.all_to_all_s(size, ep, etp, quick) <= base * (1 + 1e-12)
    nvl72 = Network(node_size=72, intra_bytes_s=450e9, inter_bytes_s=50e9)
    assert moe_time.all_to_all_s(size, ep, etp, nvl72) <= base * (1 + 1e-12)  # a larger domain never hurts
    assert (base == 0) == (ep == 1)


@settings(max_examples=40, deadline=None)
@given(f=st.floats(1, 3), tokens=st.integers(1, 65536))
def test_imbalance_scales_the_busiest_ranks_traffic(f, tokens):
    m = preset_model("qwen3-30b-a3b")
    par = Parallelism(expert=8, data=8)
    one = moe_time.moe_block_time(m, Training(), par, NET, tokens=tokens, hbm_bytes_s=3e12)
    more = moe_time.moe_block_time(m, Training(), par, NET, tokens=tokens, hbm_bytes_s=3e12, load_imbalance=f)
    assert more.all_to_all >= one.all_to_all * (1 - 1e-12) and more.permutation >= one.permutation * (1 - 1e-12)
    assert more.expert_weights == one.expert_weights and more.fixed == one.fixed


def _step(recompute: str = "none", **kw):
    m = preset_model("qwen3-30b-a3b")
    tr = Training(precision="mixed", framework="megatron", flash=True, recompute=recompute)
    par = Parallelism(data=16, expert=16, expert_tensor=1, zero=1)  # tcalc train's default ZeRO-1
    return estimate_step(m, Workload(seq_len=4096, batch_size=2), tr, par, gpu("h100"), global_batch=256, **kw)


def test_imbalance_and_overlap_in_the_step():
    base = _step()
    assert base.moe_overhead_s > 0 and base.moe_all_to_all_s > 0
    assert _step(moe_load_imbalance=1.5).step_time_s > base.step_time_s
    hidden = _step(moe_a2a_overlap=True)
    assert hidden.moe_all_to_all_s < base.moe_all_to_all_s and hidden.step_time_s < base.step_time_s
    assert base.assumptions["moe_load_imbalance"] == 1.0 and hidden.assumptions["moe_a2a_overlap"] is True
    assert sum(base.breakdown.values()) == pytest.approx(base.step_time_s)


def test_a_dense_model_has_no_moe_terms():
    e = estimate_step(preset_model("llama-3-8b"), Workload(seq_len=4096, batch_size=1), Training(), Parallelism(data=8),
                      gpu("h100"), global_batch=64)
    assert e.moe_overhead_s == e.moe_all_to_all_s == 0 and "moe_load_imbalance" not in e.assumptions


def test_imbalance_below_one_is_refused():
    with pytest.raises(ValueError, match="moe_load_imbalance"):
        _step(moe_load_imbalance=0.9)


def _cli(capsys, args):
    code = run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_imbalance_and_overlap(capsys):
    args = ["train", "qwen3-30b-a3b", "--gpus", "16", "--gpu", "h100", "--ep", "16", "--etp", "1", "--S", "4096",
            "--global-batch", "256", "--micro-batch", "2", "--recompute", "full", "-f", "json"]
    base = json.loads(_cli(capsys, args)[1])
    skew = json.loads(_cli(capsys, args + ["--moe-load-imbalance", "1.5", "--moe-a2a-overlap"])[1])
    # --recompute full: with none (or selective), micro-batch 2 peaks at 88.8 GiB of 78.7 (no step time, issue 34)
    sel = {"recompute": "full"}
    assert base["fits"] and base["step_time_s"] == pytest.approx(_step(**sel).step_time_s, rel=1e-12)
    assert skew["step_time_s"] == pytest.approx(_step(moe_load_imbalance=1.5, moe_a2a_overlap=True, **sel).step_time_s,
                                                rel=1e-12)
    assert skew["assumptions"]["moe_load_imbalance"] == 1.5 and base["breakdown"]["moe_overhead_s"] > 0
    code, out, err = _cli(capsys, args + ["--moe-load-imbalance", "0.5"])
    assert code == 2 and not out and "moe_load_imbalance (0.5)" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- the fit and its validation
def _results():
    sys.path.insert(0, str(REPO))
    from tools.validation import train_runs

    return [train_runs.evaluate(r) for r in train_runs.load_rows()]


def test_every_published_layout_is_expressed_and_the_fit_holds():
    """All 137 rows price (0 refused: evaluate raises on a layout tcalc refuses); MOE_EXPERT_OVERHEAD_S
    was fitted on the 25.11 MoE rows (median |error| 10.8 %), the 26.02 MoE rows validate it, and
    dgxc-benchmarking's Grok-1 tables (another publisher, H100, 512-2048 GPUs) land within +7 to +15 %."""
    res = _results()
    assert len(res) == 137
    grok = [r.error for r in res if r.row["id"].startswith("dgxcmoe-grok1")]
    assert len(grok) == 6 and all(0.05 < e < 0.15 for e in grok), grok
    fit = [r.error for r in res if r.row["id"].startswith("mbridge2511-") and r.model.is_moe]
    check = [r.error for r in res if r.row["id"].startswith("mbridge-") and r.model.is_moe]
    assert len(fit) == 17 and len(check) == 19
    assert statistics.median(abs(e) for e in fit) < 0.12
    assert statistics.median(abs(e) for e in check) < 0.15
    every = [abs(r.error) for r in res]
    assert statistics.median(every) <= 0.12
    # The issue's >= 80 % within ±25 % holds on every row (111 of 137 since round 3: torchtitan's
    # per-op AC priced as `--recompute op`, its Grand Teton H100s at their published 2.4 TB/s HBM2e),
    # and without torchtitan's December 2024 H100 benchmark, whose GPUs ran at a 500 W power limit
    # whose clocks tcalc does not model (docs/validation.md).
    kept = [abs(r.error) for r in res if not r.row["id"].startswith("torchtitan-h100-")]
    assert sum(e <= 0.25 for e in kept) / len(kept) >= 0.80
    assert sum(e <= 0.25 for e in every) / len(every) >= 0.80
    assert sum(e <= 0.25 for e in every) >= 111
