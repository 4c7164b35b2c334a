"""The worked examples in docs/formulas.md are doctests: the docs cannot drift from the code."""

from __future__ import annotations

import doctest

from conftest import REPO


def test_formulas_worked_examples():
    result = doctest.testfile(
        str(REPO / "docs" / "formulas.md"), module_relative=False, optionflags=doctest.ELLIPSIS
    )
    assert result.attempted > 10
    assert result.failed == 0


def test_api_examples():
    result = doctest.testfile(str(REPO / "docs" / "api.md"), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0
