"""docs/architecture.md names every module of the package (issue 35): a module nobody can find on the
map is one a contributor duplicates."""

from __future__ import annotations

from conftest import REPO


def test_every_module_is_named_in_the_architecture_page():
    text = (REPO / "docs" / "architecture.md").read_text()
    missing = [str(p.relative_to(REPO / "transformer_calc")) for p in sorted((REPO / "transformer_calc").rglob("*.py"))
               if p.name != "__init__.py" and p.stem not in text]
    assert missing == [], f"name these in docs/architecture.md: {missing}"
