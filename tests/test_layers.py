"""Imports go one way: cli -> report/render/presets -> estimators -> config (STYLE.md)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from conftest import REPO

PKG = REPO / "transformer_calc"
# The layers, bottom up; a module may import its own layer and those below, never above.
LAYERS = [
    {"errors", "config", "inputs", "checkpoint", "safetensors_file", "gguf_file"},  # configs, user files, checkpoint headers
    {"params", "hardware", "hf", "hf_2024", "memory", "flops", "inference", "timeline", "train", "sweep",
     "finetune", "optimizers", "fp8", "expected", "quant", "serving", "speculative"},
    {"report", "render", "presets", "api", "sources", "hub"},  # glue: resolution, rendering, data files, the Python API
    {"cli", "_entry", "__main__", "__init__"},
]
ESTIMATORS = sorted(LAYERS[0] | LAYERS[1])
FORBIDDEN_IN_ESTIMATORS = {"typer", "rich", "click", "torch", "transformers"}
YAML_READERS = {"inputs"}  # the one module that parses user YAML (issue 13: no other loader)


def _layer(module):
    return next(i for i, layer in enumerate(LAYERS) if module in layer)


def imported_modules(path):
    """Every transformer_calc module a file imports, in every form: `import a.b`, `from a.b import
    c`, `from transformer_calc import b` (a submodule, or the API's name), and
    `importlib.import_module("transformer_calc.b")`."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            if node.module == "transformer_calc":
                yield from (f"transformer_calc.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.args[0].value


def test_every_module_has_a_layer():
    modules = {p.stem for p in PKG.glob("*.py")}
    assert modules <= set().union(*LAYERS), f"give these modules a layer: {modules - set().union(*LAYERS)}"


@pytest.mark.parametrize("module", sorted(p.stem for p in PKG.glob("*.py")))
def test_imports_go_one_way(module):
    own = _layer(module)
    for name in imported_modules(PKG / f"{module}.py"):
        parts = name.split(".")
        top = parts[0]
        if own <= 1:
            assert top not in FORBIDDEN_IN_ESTIMATORS, f"{module} imports {name}"
            assert top != "yaml" or module in YAML_READERS, f"{module} parses YAML itself: {name}"
        if top == "transformer_calc" and len(parts) > 1 and not parts[1].startswith("__"):
            assert _layer(parts[1]) <= own, f"{module} imports upward: {name}"


def test_api_names_are_never_imported_as_modules():
    """`from transformer_calc import memory` is the API function, not the module: code must name
    estimator modules by their dotted path."""
    from transformer_calc import API

    for path in [*PKG.glob("*.py"), *(REPO / "tests").glob("*.py"), *(REPO / "tools").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "transformer_calc" and path.name != "__init__.py":
                bad = [a.name for a in node.names if a.name in API]
                assert not bad, f"{path.name}: from transformer_calc import {bad} gives the API function"
            if isinstance(node, ast.Import):
                bad = [a.name for a in node.names if a.asname and a.name.split(".")[-1] in API
                       and a.name.startswith("transformer_calc.")]
                assert not bad, f"{path.name}: import {bad} as ... gives the API function"


def test_the_layer_check_sees_every_import_form(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import importlib\nfrom transformer_calc import cli\nimportlib.import_module('transformer_calc.report')\n")
    assert {"transformer_calc.cli", "transformer_calc.report"} <= set(imported_modules(f))


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
