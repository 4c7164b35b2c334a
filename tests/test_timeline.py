"""Peak training memory (transformer_calc/estimators/training/timeline.py): every phase worked by hand on a tiny model,
framework conventions, and the invariants (peak <= sum; more recompute never stores more; a higher
ZeRO stage never holds more model states). Validation against PyTorch's MemTracker on real HF
models is tools/crosscheck/peak_memory.py (docs/validation.md)."""

from __future__ import annotations

import json

import pytest

from hypothesis import example, given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload
from transformer_calc.estimators.training.memory import layer_activations, training_memory
from transformer_calc.estimators.params import count_params
from transformer_calc.estimators.training.timeline import (
    CUDA_CONTEXT_BYTES,
    DEEPSPEED_Z3_BYTES_PER_PARAM,
    fit_capacity,
    max_micro_batch,
    peak_memory,
)

from conftest import model_configs

# L=2, D=8, A=2 (head_dim 4), d_ff=32, V=10, K=6: GPT-style, biases, tied; 1888 parameters.
TINY = ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "K": 6})
N = 1888


def phases(tl):
    return {ph.name: ph for ph in tl.phases}


def test_every_phase_by_hand_fp32():
    # fp32 AdamW (PyTorch's foreach step), one micro-batch, S = 4, B = 1: W = 4N, G = 4N, O = 8N.
    w, tr = Workload(seq_len=4, batch_size=1), Training(precision="fp32")
    tl = peak_memory(TINY, w, tr)
    ph = phases(tl)
    st = tl.stage
    assert (st.weights, st.gradients, st.optimizer) == (4 * N, 4 * N, 8 * N)
    fwd = ph["forward"]
    assert (fwd.gradients, fwd.activations, fwd.transient) == (0, st.stored, 0)  # grads come later
    # loss forward: the logits, B·S·V = 40 values of p = 4 bytes (fp32: no upcast copy)
    assert ph["loss forward"].transient == 4 * 40
    # loss backward: d(log-probs) and d(logits) in fp32
    assert ph["loss backward"].transient == 2 * 4 * 40
    # the blocks' backward: eager attention's score gradients, 2 x p x B·A·S² = 2·4·2·16
    assert ph["backward"].transient == 2 * 4 * 2 * 16 == 256
    # backward end: all gradients; optimizer step: + one fp32 temporary per parameter (foreach)
    assert ph["backward end"].total == 16 * N
    assert ph["optimizer step"].total == 16 * N + 4 * N
    assert tl.peak.name == "optimizer step" and tl.peak_bytes == 20 * N
    assert tl.peak_bytes <= tl.sum_bytes


def test_fused_optimizer_has_no_temporaries():
    w = Workload(seq_len=4)
    fused = phases(peak_memory(TINY, w, Training(precision="fp32", fused_optimizer=True)))
    assert fused["optimizer step"].transient == 0


def test_grad_accumulation_keeps_gradients_through_the_forward():
    w = Workload(seq_len=4)
    one = phases(peak_memory(TINY, w, Training(precision="fp32")))
    four = phases(peak_memory(TINY, w, Training(precision="fp32", micro_batches=4)))
    assert one["forward"].gradients == 0 and four["forward"].gradients == 4 * N
    megatron = phases(peak_memory(TINY, w, Training(precision="fp32", framework="megatron")))
    assert megatron["forward"].gradients == 4 * N  # the persistent main-grad buffer


def test_loss_kernels_bf16():
    # p = 2: eager keeps the logits (2 bytes) and their fp32 copy in the forward; fused keeps the
    # bf16 logits only (the fp32 softmax is stored); chunked holds one chunk of 1024 tokens.
    w = Workload(seq_len=4, batch_size=1)
    bsv = 40
    eager = phases(peak_memory(TINY, w, Training()))
    assert eager["loss forward"].transient == (2 + 4) * bsv and eager["loss backward"].transient == 8 * bsv
    fused = phases(peak_memory(TINY, w, Training(cross_entropy="fused")))
    assert fused["loss forward"].transient == 2 * bsv and fused["loss backward"].transient == 2 * bsv
    chunked = phases(peak_memory(TINY, w, Training(cross_entropy="chunked")))
    assert chunked["loss forward"].transient == 2 * 4 * min(4, 1024) * 10
    # chunked keeps no fp32 softmax over the vocabulary
    assert chunked["forward"].activations == eager["forward"].activations - 4 * bsv


def test_megatron_fused_swiglu_keeps_three_widths():
    m = ModelConfig.model_validate({"L": 2, "D": 8, "A": 2, "V": 10, "d_ff": 16, "mlp": "swiglu", "bias": False})
    w = Workload(seq_len=4, batch_size=1)
    eager = layer_activations(m, w, Training())
    fused = layer_activations(m, w, Training(framework="megatron"))
    assert eager.mlp - fused.mlp == 2 * 1 * 4 * 16  # one F-wide tensor of p = 2 bytes per token


def test_zero3_gathered_parameters():
    m = ModelConfig.model_validate({"L": 4, "D": 64, "A": 4, "V": 1000, "K": 64, "tied_embeddings": False})
    w, par = Workload(seq_len=16), Parallelism(data=8, zero=3)
    p = count_params(m)
    ds = phases(peak_memory(m, w, Training(framework="deepspeed"), par))
    largest = max(p.layer.total, p.embedding + p.position, p.lm_head)
    assert ds["forward"].gathered == DEEPSPEED_Z3_BYTES_PER_PARAM * largest  # DeepSpeed's estimate
    fsdp = phases(peak_memory(m, w, Training(), par))
    root = p.embedding + p.position + p.final_norm + p.lm_head
    assert fsdp["forward"].gathered == (max(root, p.layer.total) + p.layer.total) * 2  # p = 2
    assert fsdp["optimizer step"].gathered == 0


def test_ddp_buckets_copy_the_gradients():
    w = Workload(seq_len=4)
    one = phases(peak_memory(TINY, w, Training(precision="fp32"), Parallelism(data=1)))
    ddp = phases(peak_memory(TINY, w, Training(precision="fp32"), Parallelism(data=2)))
    assert one["backward end"].buckets == 0 and ddp["backward end"].buckets == 4 * N


def test_fit_uses_the_peak_and_the_cuda_context():
    w = Workload(seq_len=4)
    tr = Training(precision="fp32")
    peak = peak_memory(TINY, w, tr).peak_bytes
    assert fit_capacity(10**9) == 10**9 - CUDA_CONTEXT_BYTES
    assert max_micro_batch(TINY, w, tr, Parallelism(), peak - 1) == 0
    assert max_micro_batch(TINY, w, tr, Parallelism(), peak) >= 1


def test_issue_example_peak_is_below_the_sum(capsys):
    from transformer_calc.cli import run

    code = run(["memory", "--preset", "llama-3-8b", "--S", "8192", "--B", "2", "--recompute", "full",
                "--dp", "64", "--zero", "3", "--flash", "--framework", "pytorch", "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    mem = json.loads(out)["memory"]
    assert mem["peak_phase"] == "loss backward"
    assert mem["peak_bytes"] < mem["sum_bytes"]
    assert mem["peak_bytes"] == max(ph["total_bytes"] for ph in mem["phases"])
    assert mem["peak"]["gathered_bytes"] > 0  # ZeRO-3's gathered units are counted
    assert mem["nvidia_smi_bytes"] == mem["peak_bytes"] + mem["cuda_context_bytes"] + mem["allocator_reserve_bytes"]


@settings(max_examples=80)
@given(model_configs(), st.integers(1, 512), st.integers(1, 4), st.sampled_from(["pytorch", "megatron", "deepspeed"]),
       st.sampled_from([1, 2, 4]), st.integers(0, 3), st.booleans())
def test_invariants(m, S, B, framework, dp, zero, flash):
    w = Workload(seq_len=S, batch_size=B)
    par = Parallelism(data=dp, zero=zero)
    tr = Training(framework=framework, flash=flash)
    tl = peak_memory(m, w, tr, par)
    assert tl.peak_bytes <= tl.sum_bytes
    assert all(ph.total >= 0 for ph in tl.phases)
    # more recompute never stores more activations (two layers or more: with one, recomputing it
    # adds the checkpointed input)
    if m.n_layers >= 2:
        acts = [max(ph.activations for ph in peak_memory(m, w, tr.model_copy(update={"recompute": r}), par).phases)
                for r in ("none", "selective", "full")]
        assert acts[0] >= acts[1] >= acts[2]
    # a higher ZeRO stage never holds more model states
    states = [training_memory(m, w, tr, par.model_copy(update={"zero": z}))[0].model_states for z in range(4)]
    assert states == sorted(states, reverse=True)


# ---------------------------------------------------------------------------- the fit finder
@st.composite
def fit_cases(draw):
    """A model, a workload, training settings (every loss kernel, chunked included), a layout and
    a capacity from "not even B = 1" to thousands of sequences."""
    m = draw(model_configs(max_layers=6))
    S = draw(st.sampled_from([1, 7, 64, 300, 1023, 1024, 1500, 4096]))
    tr = Training(
        cross_entropy=draw(st.sampled_from(["eager", "fused", "chunked"])),
        framework=draw(st.sampled_from(["pytorch", "megatron", "deepspeed"])),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        flash=draw(st.booleans()),
        activations=draw(st.sampled_from(["default", "seed"])),
    )
    dp = draw(st.sampled_from([1, 2, 4]))
    par = Parallelism(pipeline=draw(st.integers(1, min(3, m.n_layers))), data=dp,
                      zero=draw(st.integers(0, 3)) if dp > 1 else 0)
    one = peak_memory(m, Workload(seq_len=S, batch_size=1), tr, par).peak_bytes
    capacity = draw(st.integers(one // 2, one * 3000))
    return m, Workload(seq_len=S), tr, par, capacity


# below one chunk of the chunked loss at B = 1 and 2 (B·S = 64, 128 < 1024): lines through them overshoot
_CHUNKED = (ModelConfig.model_validate({"L": 2, "D": 64, "A": 4, "V": 5000, "K": 64}), Workload(seq_len=64),
            Training(cross_entropy="chunked"), Parallelism(), 93_322_240)


@settings(max_examples=150, deadline=None)
@given(fit_cases())
@example(_CHUNKED)
def test_max_micro_batch_is_tight(case):
    """The largest B whose timeline peak fits: B fits (or B = 0) and B + 1 does not."""
    m, w, tr, par, capacity = case
    B = max_micro_batch(m, w, tr, par, capacity)

    def peak(b):
        return peak_memory(m, w.model_copy(update={"batch_size": b}), tr, par).peak_bytes

    assert B == 0 or peak(B) <= capacity
    assert peak(B + 1) > capacity


def test_max_micro_batch_with_chunked_cross_entropy():
    """Below one chunk per micro-batch (B·S < CHUNK_TOKENS) the chunked loss's transient grows
    with B, then stops: the lines through B = 1 and 2 overshoot. gpt2 at S = 64 on 20 GB: 372 by
    the lines, whose neighbour 373 fits too."""
    from transformer_calc.sources.presets import preset_model

    m, w, tr, cap = preset_model("gpt2"), Workload(seq_len=64), Training(cross_entropy="chunked"), 20 * 10**9
    B = max_micro_batch(m, w, tr, Parallelism(), cap)
    assert peak_memory(m, w.model_copy(update={"batch_size": B}), tr).peak_bytes <= cap
    assert peak_memory(m, w.model_copy(update={"batch_size": B + 1}), tr).peak_bytes > cap


def test_memory_command_fit_is_the_largest_b_it_reports_as_fitting(capsys):
    """`tcalc memory --gpu` says the largest micro-batch that fits; `--B` of it fits, one more does not."""
    from transformer_calc.cli import run

    base = ["memory", "--preset", "gpt2", "--S", "256", "--cross-entropy", "chunked", "--gpu", "a100-80gb", "-f", "json"]

    def out(*extra):
        assert run([*base, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    B = out()["fit"]["max_micro_batch"]
    assert B > 1 and out("--B", str(B))["fits"] is True and out("--B", str(B + 1))["fits"] is False


def test_min_parallelism_is_minimal():
    """The smallest T whose timeline peak fits; every smaller T the layout allows does not."""
    from transformer_calc.sources.presets import preset_model
    from transformer_calc.estimators.training.timeline import min_parallelism

    m, w, tr = preset_model("llama-2-13b"), Workload(seq_len=4096), Training(recompute="full")
    cap = 80 * 10**9
    T, P = min_parallelism(m, w, tr, Parallelism(), cap)
    assert P == 1 and peak_memory(m, w, tr, Parallelism(tensor=T)).peak_bytes <= cap
    smaller = [x for x in (1, 2, 4, 5, 8, 10, 20, 40) if x < T and 40 % x == 0 and 13824 % x == 0]
    assert smaller
    for x in smaller:
        assert peak_memory(m, w, tr, Parallelism(tensor=x)).peak_bytes > cap


@pytest.mark.parametrize("preset, training, layout, S, gib", [
    ("gpt3", {}, {}, 2048, 80),
    ("gpt3", {"recompute": "full", "flash": True}, {"data": 8, "zero": 1}, 2048, 80),
    ("llama-2-13b", {"recompute": "full"}, {}, 4096, 40),
    ("llama-3-70b", {"flash": True, "framework": "megatron"}, {"sequence_parallel": True}, 8192, 80),
    ("mixtral-8x7b", {"flash": True}, {"data": 8, "expert": 8, "zero": 3}, 4096, 80),
    ("llama-3.1-8b", {"finetune": "qlora", "flash": True}, {}, 2048, 16),
    ("qwen3-30b-a3b", {"offload": "optimizer", "flash": True}, {"data": 4, "zero": 3}, 2048, 24),
    ("deepseek-v3", {"flash": True, "recompute": "selective"}, {"expert": 8, "data": 8}, 4096, 80),
    ("gpt3", {"framework": "megatron", "flash": True}, {"zero": 1}, 2048, 80),
    ("llama-2-7b", {"recompute": "selective", "framework": "deepspeed"}, {"data": 4, "zero": 2}, 4096, 24),
    ("qwen3-30b-a3b", {"flash": True, "framework": "megatron"}, {"expert": 4, "data": 4, "zero": 1}, 4096, 40),
    ("llama-3.1-8b", {"finetune": "lora", "flash": True}, {"data": 2}, 4096, 12),
    ("deepseek-v3", {"flash": True, "fp8_recipe": "blockwise", "framework": "megatron"},
     {"expert": 8, "data": 16, "zero": 1, "context": 2}, 8192, 141),
    ("gpt3", {"flash": True, "optimizer": "sgd"}, {"first_stage_layers": 4, "pipeline": 8}, 2048, 80),
    ("llama-3-70b", {"flash": True, "offload": "optimizer"}, {"data": 8, "zero": 3}, 8192, 48),
])
def test_min_parallelism_equals_the_search_over_every_timeline(preset, training, layout, S, gib):
    """min_parallelism passes over the layouts whose weights, optimizer states and gradients or stored
    activations alone exceed the capacity (the "backward end" and "forward" phases hold them); its
    answer is the plain search's, which prices every candidate's timeline in order."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.training.memory import valid_tensor_parallel
    from transformer_calc.estimators.training.timeline import min_parallelism
    from transformer_calc.sources.presets import preset_model

    m, w, tr, par = preset_model(preset), Workload(seq_len=S), Training(**training), Parallelism(**layout)
    cap = gib * 2**30

    def plain(vary_pipeline):
        Ps = range(1, min(m.n_layers, 64) + 1) if vary_pipeline else [par.pipeline]
        for _, T, P in sorted((T * P, T, P) for T in valid_tensor_parallel(m) for P in Ps):
            try:
                if peak_memory(m, w, tr, par.model_copy(update={"tensor": T, "pipeline": P}),
                               all_stages=False).peak_bytes <= cap:
                    return T, P
            except TcalcError:
                raise
            except ValueError:
                continue
        return None

    for vary in (False, True):
        assert min_parallelism(m, w, tr, par, cap, vary_pipeline=vary) == plain(vary), vary


def test_one_fit_finder():
    """memory.py's sum-of-states fit finders are gone: a fit is the timeline's peak, everywhere."""
    import importlib

    memory = importlib.import_module("transformer_calc.estimators.training.memory")
    assert not hasattr(memory, "max_micro_batch") and not hasattr(memory, "min_parallelism")
