"""No dead code in the package (issue 21): every module-level function, class and constant, every
method, and every import is used somewhere: by the package, its tests, tools, benchmarks or the
doctested docs. A name nothing refers to is deleted, not kept "just in case"."""

from __future__ import annotations

import ast
import re

from conftest import REPO

PKG = REPO / "transformer_calc"
SOURCES = [p for d in ("transformer_calc", "tests", "tools", "bench") for p in (REPO / d).rglob("*.py")]
SOURCES += [REPO / "hatch_build.py"]


def _references() -> set[str]:
    """Every name read anywhere: loads, attributes, imported names, strings that are one name
    (getattr, import_module), and the code lines of the docs (doctests, examples); prose and
    docstrings do not count."""
    names: set[str] = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names.add(node.value)
    for path in REPO.glob("**/*.md"):
        for line in path.read_text().splitlines():
            if line.lstrip().startswith((">>>", "...", "from ", "import ")):
                names.update(re.findall(r"[A-Za-z_]\w*", line))
    return names


def _definitions(tree: ast.Module):
    """(name, line) of the module's functions, classes, constants and class methods; functions
    registered by a decorator (typer commands, pydantic validators) are used by it."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.decorator_list:
            yield node.name, node.lineno
        elif isinstance(node, ast.Assign):
            yield from ((t.id, node.lineno) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node.lineno
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and not sub.name.startswith("__") and not any(
                    "validator" in ast.unparse(d) for d in sub.decorator_list
                ):
                    yield f"{node.name}.{sub.name}", sub.lineno


def test_every_definition_is_used():
    used = _references()
    dead = [
        f"{path.name}:{line} {name}"
        for path in sorted(PKG.glob("*.py"))
        for name, line in _definitions(ast.parse(path.read_text()))
        if not name.startswith("__") and name.split(".")[-1] not in used
    ]
    assert dead == []


def test_every_import_is_used():
    """An import the module never reads (re-exports say so with `# noqa: F401`)."""
    unused = []
    for path in sorted(PKG.glob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        lines = text.splitlines()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and "noqa: F401" not in lines[node.lineno - 1]:
                for alias in node.names:
                    name = (alias.asname or alias.name).split(".")[0]
                    if name not in read and name not in strings and name != "annotations":
                        unused.append(f"{path.name}:{node.lineno} {name}")
    assert unused == []
