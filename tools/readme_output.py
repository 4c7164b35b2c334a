"""The README's example outputs, cog-style: each ```console block's first line is a command
(`$ tcalc ...`, optionally `| head -n N`, `| tail -n N` or `| tail -n +N`); the rest of the block is what that
command prints at 80 columns. This regenerates them.

    python tools/readme_output.py          # rewrite the blocks in README.md
    python tools/readme_output.py --check  # exit 1 when one differs (tests/test_front_door.py)

Each command runs as a reader would run it (`python -m transformer_calc`, COLUMNS=80, no colour).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
WIDTH = 80
BLOCK = re.compile(r"```console\n\$ (?P<command>[^\n]*)\n(?P<output>.*?)```", re.S)
PIPE = re.compile(r"(?P<which>head|tail) -n (?P<n>\+?\d+)")


def split(command: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The argv after `tcalc`, and the head/tail cuts the command line pipes its output through."""
    first, *pipes = command.split(" | ")
    cuts = []
    for pipe in pipes:
        found = PIPE.fullmatch(pipe.strip())
        if not found:
            raise SystemExit(f"README console block pipes to something other than head/tail -n: {pipe!r}")
        cuts.append((found["which"], found["n"]))
    argv = shlex.split(first)
    if argv[:1] != ["tcalc"]:
        raise SystemExit(f"README console block does not start with `$ tcalc`: {command!r}")
    return argv[1:], cuts


def output(command: str) -> str:
    """What the command line prints at 80 columns (cut as its head/tail pipes cut it)."""
    argv, cuts = split(command)
    env = {**os.environ, "COLUMNS": str(WIDTH), "LINES": "200", "NO_COLOR": "1", "TERM": "dumb",
           "PYTHONPATH": str(REPO)}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run([sys.executable, "-m", "transformer_calc", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode not in (0, 1):
        raise SystemExit(f"`tcalc {' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-300:]}")
    lines = [line.rstrip() for line in done.stdout.rstrip("\n").splitlines()]
    for which, n in cuts:
        lines = (lines[:int(n)] if which == "head" else lines[int(n) - 1:] if n.startswith("+")
                 else lines[-int(n):])
    return "\n".join(lines) + "\n"


def commands(text: str) -> list[str]:
    return [m["command"] for m in BLOCK.finditer(text)]


def regenerate(text: str) -> str:
    return BLOCK.sub(lambda m: f"```console\n$ {m['command']}\n{output(m['command'])}```", text)


def main() -> int:
    text = README.read_text(encoding="utf-8")
    new = regenerate(text)
    if "--check" in sys.argv[1:]:
        if new != text:
            print("README.md's example outputs are stale: run python tools/readme_output.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
