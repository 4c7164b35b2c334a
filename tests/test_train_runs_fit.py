"""Every published training run of tools/validation/train_runs.yaml ran, so tcalc's peak memory
(`timeline.peak_memory` of the row's layout, micro-batches and Megatron-core memory settings) must
fit the GPU by `timeline.fit_capacity`, the one fit test of `tcalc train`, `memory` and `plan`.
Rows the YAML holds open (`memory_open`, with the reason) are the known exceptions: they must
still be misfits, so that a fix forces the exception out. No GPU; the 137 rows take about a second."""

from __future__ import annotations

import pytest

from tools.validation import train_runs
from transformer_calc.estimators.training.memory import FrameworkMemory, training_memory
from transformer_calc.estimators.training.timeline import peak_memory
from transformer_calc.model.config import Parallelism, Training, Workload
from transformer_calc.sources.presets import preset_model

ROWS = train_runs.load_rows()


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_every_run_that_ran_fits(row):
    f = train_runs.fit(train_runs.evaluate(row))
    gib = f"{f.peak_bytes / 2**30:.1f} GiB of {f.usable_bytes / 2**30:.1f}"
    if row.get("memory_open"):
        assert not f.fits, f"{row['id']} fits now ({gib}): drop its memory_open"
    else:
        assert f.fits, f"{row['id']} ran, but tcalc's peak is {gib}"


def test_open_rows_are_few_and_explained():
    held = [r for r in ROWS if r.get("memory_open")]
    assert len(held) <= 2  # the NeMo 24.07 FP8 rows (their launcher config was not found)
    assert all(len(str(r["memory_open"])) > 40 for r in held)


def test_framework_memory_lowers_only_what_it_names():
    """fp8_param_gather drops the GEMM weights' 16-bit copy (p bytes each); activation offloading keeps
    L - N + 1 of L blocks' activations; both leave the rest of the stage alone."""
    m = preset_model("llama-3-8b")
    w = Workload(seq_len=4096, batch_size=1)
    tr = Training.model_validate({"precision": "mixed", "fp8_recipe": "tensorwise", "flash": True, "framework": "megatron"})
    par = Parallelism(data=8, zero=1)
    base = training_memory(m, w, tr, par)[0]
    gather = training_memory(m, w, tr, par, framework_memory=FrameworkMemory(fp8_param_gather=True))[0]
    assert gather.stored == base.stored and gather.gradients == base.gradients
    assert 0 < base.weights - gather.weights < base.params * tr.p
    N = 16
    off = training_memory(m, w, tr, par, framework_memory=FrameworkMemory(offloaded_layers=N))[0]
    blocks = base.attention + base.mlp + base.norm
    assert off.attention + off.mlp + off.norm == blocks * (m.n_layers - N + 1) // m.n_layers
    assert off.weights == base.weights and off.other == base.other
    assert peak_memory(m, w, tr, par, framework_memory=FrameworkMemory(offloaded_layers=N)).peak_bytes < \
        peak_memory(m, w, tr, par).peak_bytes


def test_framework_memory_refuses_what_megatron_refuses():
    m = preset_model("llama-3-8b")
    w = Workload(seq_len=4096, batch_size=1)
    tr = Training.model_validate({"flash": True, "framework": "megatron"})
    with pytest.raises(ValueError, match="pipeline"):
        training_memory(m, w, tr, Parallelism(pipeline=2), framework_memory=FrameworkMemory(offloaded_layers=4))
    with pytest.raises(ValueError, match="fp8_recipe"):
        training_memory(m, w, tr, Parallelism(), framework_memory=FrameworkMemory(fp8_param_gather=True))
    with pytest.raises(ValueError, match="MLA"):
        training_memory(m, w, tr, Parallelism(), framework_memory=FrameworkMemory(recompute_modules=("mla_up_proj",)))
    with pytest.raises(ValueError, match="not priced"):
        training_memory(m, w, tr, Parallelism(), framework_memory=FrameworkMemory(recompute_modules=("moe_act",)))
