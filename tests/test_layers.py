"""Imports go one way: cli -> report/render/presets -> estimators -> config (STYLE.md)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from conftest import REPO

PKG = REPO / "transformer_calc"
ESTIMATORS = ["config", "errors", "params", "hardware", "hf", "hf_2024", "memory", "flops", "inference", "expected", "quant", "serving", "speculative"]
FORBIDDEN_IN_ESTIMATORS = {"typer", "rich", "yaml", "click", "torch", "transformers"}
UPPER_LAYERS = {"cli", "report", "render", "presets"}


def imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("module", ESTIMATORS)
def test_estimators_import_no_ui_or_io_libraries(module):
    for name in imported_modules(PKG / f"{module}.py"):
        top = name.split(".")[0]
        assert top not in FORBIDDEN_IN_ESTIMATORS, f"{module} imports {name}"
        if top == "transformer_calc":
            assert name.split(".")[-1] not in UPPER_LAYERS, f"{module} imports upward: {name}"


@pytest.mark.parametrize("module", ESTIMATORS)
def test_estimators_never_print(module):
    tree = ast.parse((PKG / f"{module}.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"]
    assert not calls


def test_cli_import_is_lazy():
    """Importing the CLI loads neither rich, yaml, pydantic nor the preset data."""
    code = (
        "import sys, transformer_calc.cli;"
        "print(sorted(m for m in ('rich', 'yaml', 'pydantic', 'transformer_calc.presets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
