"""The one refusal point (issue 35): estimators/support_table.py's table says what each block does not price,
`refusal` is the one line every refusal of a block is, and docs/models.md's support matrix refuses only by
those lines."""

from __future__ import annotations

import functools
import importlib.util
import json
import re

import pytest
from conftest import REPO

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.support_table import BLOCKS, ESTIMATES, FIXES, LAYOUTS, Unpriced, refusal, refuse
from transformer_calc.model.config import ModelConfig, build_model
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import model_presets, preset_model


def _models_doc():
    spec = importlib.util.spec_from_file_location("models_doc", REPO / "tools" / "models_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hf_model(path) -> ModelConfig:
    return build_model(from_hf_config(json.loads(path.read_text())["config"]))


@functools.cache
def _models() -> tuple[ModelConfig, ...]:
    """Every preset and every cross-checked Hugging Face config (tests/data/hf) that builds."""
    out = [preset_model(name) for name in model_presets()]
    for path in sorted((REPO / "tests" / "data" / "hf").glob("*.json")):
        try:
            out.append(_hf_model(path))
        except ValueError:
            continue
    return tuple(out)


def _with_block(key: str) -> ModelConfig:
    block = next(b for b in BLOCKS if b.key == key)
    found = [m for m in _models() if block.present(m)]
    if not found and key == "varied_layers":  # Gemma 4's varied layers beside MiMo's per-kind attention
        gemma4 = next(m for m in _models() if next(b for b in BLOCKS if b.key == "gemma4").present(m))
        found = [ModelConfig.model_validate({**gemma4.model_dump(), "sliding_sinks": True})]
    assert found, f"no preset or tests/data/hf config has the block {key}: add one"
    return found[0]


def test_every_setting_has_a_fix_and_every_block_a_key():
    assert set(Unpriced) == ESTIMATES | set(FIXES)
    assert len({b.key for b in BLOCKS}) == len(BLOCKS)
    assert all(b.unpriced and b.priced_by for b in BLOCKS)


@pytest.mark.parametrize("key", [b.key for b in BLOCKS])
def test_every_block_refuses_what_it_does_not_price_in_one_line(key):
    """For each estimate or setting the block does not price: one line naming what was asked, the block,
    the model and the fix (the setting's, or what prices the model), raised by `refuse`."""
    block = next(b for b in BLOCKS if b.key == key)
    m = _with_block(key)
    for item, why in block.unpriced.items():
        err = refusal(m, f"the {item.value} asked", item)
        line = str(err)
        assert "\n" not in line and line.startswith(f"the {item.value} asked is not priced for ")
        assert block.label(m) in line and f"(model {m.name or 'given'})" in line and why in line
        fix = FIXES.get(item) or f"{block.priced_by} price this model"
        assert line.endswith(f"; {fix}") or item in ESTIMATES, line  # an estimate: the first block's priced_by
        assert type(err) is (ValueError if item in LAYOUTS else TcalcError)
        with pytest.raises(ValueError) as raised:
            refuse(m, f"the {item.value} asked", item)
        assert str(raised.value) == line


def test_a_model_without_the_blocks_is_never_refused():
    m = preset_model("llama-3.1-8b")
    for item in Unpriced:
        refuse(m, "anything", item)  # no error


def _matrix_refusals() -> list[tuple[str, str]]:
    """(model_type, refusal line) of every refused cell of docs/models.md's support matrix."""
    text = _models_doc().current()
    reasons = dict(re.findall(r"^(\d+)\. (.*)$", text, flags=re.M))
    cells = []
    for model_type, row in re.findall(r"^\| `([^`]+)` \|(.*)$", text, flags=re.M):
        cells += [(model_type, reasons[n]) for n in re.findall(r"refused \[(\d+)\]", row)]
    return cells


def test_the_matrix_refuses_by_the_tables_lines():
    """Each refusal of the matrix (but a tiny config's widths that T does not divide) is one line of the table,
    reproduced exactly from the model type's config, so the matrix's refusals are the table's."""
    models_doc = _models_doc()
    types = models_doc.model_types()
    cells = _matrix_refusals()
    assert cells, "docs/models.md lists no refusal"
    for model_type, line in cells:
        if models_doc.shape_error(line):
            continue
        what = line.split(" is not priced for ")[0]
        lines = {str(refusal(_hf_model(path), what, item)) for path in types[model_type] for item in Unpriced}
        assert line in lines, f"{model_type}: {line!r} is not a line of estimators/support_table.py"


def test_training_refusals_go_through_the_table():
    """The training settings a block does not price are the table's lines, at the estimators' own checks."""
    from transformer_calc.estimators.training.memory import FrameworkMemory, training_memory
    from transformer_calc.model.config import Parallelism, Training, Workload

    m, w = preset_model("granite-4.0-h-small"), Workload(seq_len=1024, batch_size=1)
    tr = Training.model_validate({"flash": True, "framework": "megatron"})
    offload = FrameworkMemory(offloaded_layers=2)
    with pytest.raises(ValueError) as raised:
        training_memory(m, w, tr, Parallelism(), framework_memory=offload)
    assert str(raised.value) == str(refusal(m, "activation offloading (2 layers)", Unpriced.offload))
    with pytest.raises(ValueError) as raised:
        training_memory(m, w, tr, Parallelism(context=2))
    assert str(raised.value) == str(refusal(m, "context parallelism (cp 2)", Unpriced.context))
    assert "Mamba-2 layers" in str(raised.value) and str(raised.value).endswith("; use cp 1")
    plain = preset_model("llama-3-8b")
    assert training_memory(plain, w, tr, Parallelism(), framework_memory=offload)  # uniform blocks: priced
