"""Every `tcalc ...` line in the README's and docs/cli.md's bash blocks runs (exit 0, or 1 for a
check that fails on purpose): the documentation cannot drift from the flags and metric names."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import REPO
from transformer_calc.cli import run


def _examples() -> list[tuple[str, str]]:
    found = []
    for name in ("README.md", "docs/guide.md", "docs/cli.md"):
        text = (REPO / name).read_text()
        # bash blocks, and the first line of a console block (`$ tcalc ...`, its output below it)
        blocks = [*re.findall(r"```bash\n(.*?)```", text, re.S), *re.findall(r"```console\n\$ ([^\n]*)\n", text)]
        for block in blocks:
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split("  #")[0].split(" | ")[0].split(" > ")[0].strip()
                # files the reader would need, and Hub repo ids / GGUF files / checkpoint folders (those
                # are run against a fake Hub and generated files in test_hub.py and test_checkpoint.py)
                files = ("configs/", "path/to", "my-model", "job.yaml", "<", "--plot", ".gguf", "~/", "Qwen/",
                         "meta-llama/", "org/name")
                if line.startswith("tcalc ") and not any(f in line for f in files):
                    found.append((name, line))
    return found


EXAMPLES = _examples()


def test_the_docs_have_examples():
    assert len(EXAMPLES) >= 40


@pytest.mark.parametrize("where, line", EXAMPLES, ids=[f"{w}:{i}" for i, (w, _) in enumerate(EXAMPLES)])
def test_documented_command_runs(where, line, capsys):
    code = run(shlex.split(line)[1:])
    err = capsys.readouterr().err
    assert code in (0, 1), f"{where}: `{line}` exited {code}: {err.strip()[-300:]}"
