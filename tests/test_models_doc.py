"""docs/models.md is what tools/models_doc.py writes from the code (issue 35): every model_type against
every estimate, priced or refused with the command's own line."""

from __future__ import annotations

import importlib.util

from conftest import REPO


def _models_doc():
    spec = importlib.util.spec_from_file_location("models_doc", REPO / "tools" / "models_doc.py")
    models_doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models_doc)
    return models_doc


def test_the_support_matrix_is_current():
    models_doc = _models_doc()
    assert models_doc.render() == models_doc.current(), "docs/models.md is stale: run python tools/models_doc.py"


def test_every_model_type_and_estimate_has_a_cell():
    rows = [line for line in _models_doc().current().splitlines() if line.startswith("| `")]
    assert len(rows) == len(_models_doc().model_types())  # every model_type of tests/data/hf
    assert all(line.count("|") == len(_models_doc().ESTIMATES) + 2 for line in rows)  # model_type + one per estimate
