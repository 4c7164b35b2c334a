"""The front door (issue 38): a README read in two minutes whose example outputs are real and
current, install lines that work from a checkout, a generated model table, and terminal output
that fits 80 columns."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys

import pytest

from conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
sys.path.insert(0, str(REPO / "tools"))

import model_types_doc  # noqa: E402
import readme_output  # noqa: E402

WIDTH = 80


def test_the_readme_is_short():
    assert len(README) <= 8000, f"README.md is {len(README):,} characters; the budget is 8,000"


def test_the_ci_blocks_are_kept():
    """.ci/run reads the install and test commands from these markers."""
    for marker in ("<!-- ci:install -->", "<!-- ci:test -->"):
        after = README.split(marker, 1)[1].lstrip("\n")
        assert after.startswith("```bash\n"), marker


def test_install_lines_name_no_package_index():
    """The package is installed from the checkout: `pip install 'transformer-calc[web]'` names a
    package no index serves."""
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"pip install\s+'?transformer-calc", text), path.name


def test_the_readme_outputs_are_current():
    """Each console block's output is what its command prints at 80 columns (regenerate with
    `python tools/readme_output.py`)."""
    commands = readme_output.commands(README)
    assert len(commands) >= 3
    for command in commands:
        block = README.split(f"$ {command}\n", 1)[1].split("```", 1)[0]
        assert block == readme_output.output(command), f"stale README output of `{command}`: run tools/readme_output.py"


def _json(command: str) -> dict:
    from transformer_calc.cli import run

    argv, _ = readme_output.split(command)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert run([*argv, "-f", "json"]) == 0, command
    return json.loads(out.getvalue())


def test_the_readme_questions_are_answered():
    """What the three questions claim in words, asserted on each command's JSON."""
    fit, train, serve = readme_output.commands(README)[:3]
    d = _json(fit)
    assert d["fits"] and d["gpu"]["memory_bytes"] <= 24 * 2**30  # "fit on a 24 GB card?" yes
    d = _json(train)
    assert d["fits"] and d["step_time_s"] > 0 and d["layout"]["gpus"] == 8
    d = _json(serve)
    assert d["best"] is not None and d["best"]["ttft_s"] <= 1 and d["best"]["tpot_s"] <= 0.05


def _lines_at_80(argv: list[str]) -> list[str]:
    env = {"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "transformer_calc", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-300:]
    return done.stdout.splitlines()


def test_the_readme_examples_fit_80_columns():
    """At COLUMNS=80 no line of a README example's whole output is over 80 characters, and no
    table header is cut (a column narrower than its header word shows an ellipsis)."""
    for command in readme_output.commands(README):
        argv, _ = readme_output.split(command)
        lines = _lines_at_80(argv)
        long = [line for line in lines if len(line.rstrip()) > WIDTH]
        assert long == [], f"`{command}`: lines over {WIDTH} columns: {long[:3]}"
        headers = [line for line in lines if line.startswith("┃")]
        assert all("…" not in h for h in headers), f"`{command}`: a header is cut: {headers}"
        ends = {line[-1] for line in lines if line[:1] in "┏┃┡│├└"}
        assert ends <= set("┓┃┩│┤┘"), f"`{command}`: a table is cropped at the right edge"


def test_the_model_table_is_current():
    """docs/models.md's generated section lists exactly the code's supported model types."""
    assert model_types_doc.current() == model_types_doc.block(), "docs/models.md is stale: run python tools/model_types_doc.py"
    from transformer_calc.sources.hf import SUPPORTED_MODEL_TYPES

    text = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    assert all(f"| `{t}` |" in text for t in SUPPORTED_MODEL_TYPES)


def test_the_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (REPO / target).exists(), target


def test_the_readme_counts_are_the_codes():
    """The first paragraph's "95 presets" and "75 Hugging Face model types" are counted, not typed."""
    import transformer_calc.api as tc
    from transformer_calc.sources.hf import SUPPORTED_MODEL_TYPES

    assert f"{len(tc.presets().root)} presets" in README
    assert f"{len(SUPPORTED_MODEL_TYPES)} Hugging Face model\ntypes" in README or \
        f"{len(SUPPORTED_MODEL_TYPES)} Hugging Face model types" in README


def test_help_shows_the_common_options_first_and_cuts_no_name():
    """`--help` at 80 columns: the first options panel holds the command's common options
    (`Request.common`), the advanced panels come after, and no option name ends in "…"."""
    from transformer_calc.cli import request_class

    for command in ("memory", "train", "serve", "inference"):
        lines = _lines_at_80([command, "--help"])
        assert not any("…" in line for line in lines), command
        start = next(i for i, line in enumerate(lines) if line.startswith("╭─ Options"))
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
        flags = set(re.findall(r"│ (--[a-z0-9-]+|--[A-Z]\b)", "\n".join(lines[start:end])))
        cls = request_class(command)
        common = {cls.options()[n].spellings()[0] for n in cls.common_options() if not cls.options()[n].positional}
        assert flags == common | {"--help"}, (command, flags ^ (common | {"--help"}))


def test_the_readme_python_runs():
    """The README's Python block runs as written (it is the API's first example)."""
    for block in re.findall(r"```python\n(.*?)```", README, re.S):
        exec(compile(block, "README.md", "exec"), {})


def _guide_table_examples() -> list[str]:
    text = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    block = text[text.index("## Examples"):text.index("## The model you have")]
    lines = [line.split("  #")[0].strip() for line in block.replace("\\\n", " ").splitlines() if line.startswith("tcalc ")]
    skip = ("configs/", "--plot", " > ", "-f ", "--format ", "path/to", "my-model")
    return [line for line in lines if not any(s in line for s in skip)]


@pytest.mark.parametrize("line", _guide_table_examples())
def test_the_guides_tables_fit_80_columns(line, monkeypatch, capsys):
    """Every table example of docs/guide.md at COLUMNS=80: no line over 80 characters, no header
    cut to "…", no table cropped at the right edge (the serve verdicts wrapped a word a line)."""
    import shlex

    from transformer_calc.cli import run

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert run(shlex.split(line)[1:]) in (0, 1)
    lines = capsys.readouterr().out.splitlines()
    assert lines, line
    assert [x for x in lines if len(x.rstrip()) > WIDTH] == [], line
    assert not any(x.startswith("┃") and "…" in x for x in lines), line
    assert all(x.rstrip()[-1] in "┓┃┩│┤┘" for x in lines if x[:1] in "┏┃┡│├└"), line
