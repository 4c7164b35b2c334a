"""The package type-checks clean under mypy, with the settings in pyproject.toml ([tool.mypy]: the
pydantic plugin, check_untyped_defs, unused ignores reported)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO


def test_mypy_reports_no_errors(tmp_path):
    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "mypy_cache")],  # a fresh cache, nothing written in the repo
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert out.returncode == 0, "mypy found errors:\n" + "\n".join(errors or [out.stdout, out.stderr])
