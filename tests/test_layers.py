"""The folders are the layers, and imports go one way (STYLE.md, issue 21):

    cli, api  ->  results/, render/  ->  estimators/  ->  sources/  ->  model/, devices/, errors

A module imports its own layer and those below, never above; no import cycle, at module level or
inside functions; no private name (`_x`) imported from another module; no module named as an API
function (the API's names are the package's)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from conftest import REPO

PKG = REPO / "transformer_calc"
# The layers, bottom up, by the first part of the module's dotted path inside the package.
LAYERS = [
    {"errors", "model", "devices"},  # configs, what a checkpoint stores, accelerators
    {"sources"},  # where a model comes from: files, presets, Hugging Face configs, checkpoints, the Hub
    {"estimators"},  # pure functions: counts, bytes, FLOPs, seconds
    {"results", "render", "requests"},  # settings resolved once; composition of the estimators into each command's result; its display
    {"cli", "api", "_entry", "__main__", "__init__", "web", "mcp_server"},  # the doors: web and mcp call the API
]
FORBIDDEN_BELOW_RESULTS = {"typer", "rich", "click", "torch", "transformers"}
# yaml: user files are parsed in one place (hostile input), the packaged preset data in another, and
# render writes --format yaml
YAML_READERS = {"sources.files", "sources.presets", "render.common"}


def modules() -> dict[str, object]:
    """dotted name inside the package (e.g. `estimators.training.memory`) -> path."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = modules()


def _layer(module: str) -> int:
    top = module.split(".")[0]
    return next(i for i, layer in enumerate(LAYERS) if top in layer)


def imported_modules(path):
    """Every transformer_calc module a file imports, in every form: `import a.b`, `from a.b import
    c` (c may itself be a submodule), `from transformer_calc import b`, relative imports, and
    `importlib.import_module("transformer_calc.b")`."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            for alias in node.names:
                yield f"{node.module}.{alias.name}"  # a submodule, when it is one (filtered below)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.args[0].value


def internal_imports(path) -> set[str]:
    """The package's modules a file imports (dotted inside the package)."""
    out = set()
    for name in imported_modules(path):
        if name.startswith("transformer_calc."):
            inner = name[len("transformer_calc."):]
            if inner in MODULES:
                out.add(inner)
    return out


def test_every_module_has_a_layer():
    tops = {m.split(".")[0] for m in MODULES}
    assert tops <= set().union(*LAYERS), f"give these a layer: {tops - set().union(*LAYERS)}"


def test_no_flat_estimator_modules():
    """The top level holds only the entry points, the API and errors; everything else is in a layer folder."""
    flat = {p.stem for p in PKG.glob("*.py")}
    assert flat == {"__init__", "__main__", "_entry", "api", "cli", "errors"}, flat


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_one_way(module):
    own = _layer(module)
    for name in imported_modules(MODULES[module]):
        top = name.split(".")[0]
        if own <= 2:
            assert top not in FORBIDDEN_BELOW_RESULTS, f"{module} imports {name}"
        if top == "yaml":
            assert module in YAML_READERS, f"{module} parses YAML itself: {name}"
    for inner in internal_imports(MODULES[module]):
        assert _layer(inner) <= own, f"{module} imports upward: {inner}"


def test_no_import_cycles():
    """Module-level and function-level imports alike: a cycle hidden in a function is still a cycle."""
    graph = {m: {x for x in internal_imports(p) if x != m and not m.startswith(x + ".")} for m, p in MODULES.items()}
    # a package's __init__ is imported with any of its submodules: leave package nodes out of the graph
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    graph = {m: deps - packages for m, deps in graph.items() if m not in packages}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_names_across_modules(module):
    tree = ast.parse(MODULES[module].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("transformer_calc"):
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            assert not private, f"{module} imports private names {private} from {node.module}"


def test_no_module_is_named_as_an_api_function():
    from transformer_calc import API

    clash = {m for m in MODULES if m.split(".")[0] in API}
    assert not clash, clash


def test_the_layer_check_sees_every_import_form(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import importlib\nfrom transformer_calc import cli\n"
                 "importlib.import_module('transformer_calc.results.memory')\n"
                 "from transformer_calc.estimators.training import memory\n")
    found = set(imported_modules(f))
    assert {"transformer_calc.cli", "transformer_calc.results.memory",
            "transformer_calc.estimators.training.memory"} <= found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) <= 2))
def test_estimators_never_print(module):
    tree = ast.parse(MODULES[module].read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"]
    assert not calls


def test_cli_import_is_lazy():
    """Importing the CLI loads neither rich, yaml, pydantic nor the preset data."""
    code = (
        "import sys, transformer_calc.cli;"
        "print(sorted(m for m in ('rich', 'yaml', 'pydantic', 'transformer_calc.sources.presets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
