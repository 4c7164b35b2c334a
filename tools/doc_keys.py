"""Generate docs/cli.md's key listings from the typed result models (issue 21).

Each command's section of docs/cli.md ends with a block between `<!-- keys:COMMAND -->` and
`<!-- /keys:COMMAND -->`: every JSON key the command can write, nested as the JSON nests them
(`section {key, key}`, `list[] {...}`, `?` for a key written only in some runs), read from the
command's result model (`transformer_calc.results.RESULT_TYPES`, through its JSON Schema). The prose
listings above each block explain the keys; this block is the complete, generated inventory, and
tests/test_json_contract.py fails when docs/cli.md differs from what this writes.

    python tools/doc_keys.py            # rewrite the blocks in docs/cli.md
    python tools/doc_keys.py --check    # exit 1 if a block is stale
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from transformer_calc.results import RESULT_TYPES, result_schema  # noqa: E402

DOC = REPO / "docs" / "cli.md"
WIDTH = 100
MAX_DEPTH = 6  # deeper than any result; a guard against a recursive schema


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].split("/")[-1]]
    return node


def _variants(node: dict[str, Any], defs: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The non-null alternatives of a node and whether null is one of them."""
    node = _resolve(node, defs)
    alts = node.get("anyOf") or node.get("oneOf")
    if not alts:
        return [node], node.get("type") == "null"
    out = [_resolve(a, defs) for a in alts]
    return [a for a in out if a.get("type") != "null"], any(a.get("type") == "null" for a in out)


def describe(node: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> str:
    """The keys under a schema node: ` {a, b {c}}` for objects, `[] {...}` for lists of objects."""
    if depth > MAX_DEPTH:
        return " {...}"
    alts, _ = _variants(node, defs)
    keys: dict[str, tuple[dict[str, Any], bool]] = {}
    suffix = ""
    for alt in alts:
        if alt.get("type") == "array" and isinstance(alt.get("items"), dict):
            inner = describe(alt["items"], defs, depth + 1)
            return "[]" + inner
        for name, sub in (alt.get("properties") or {}).items():
            optional = name not in (alt.get("required") or []) or _variants(sub, defs)[1]
            keys.setdefault(name, (sub, optional))
        if alt.get("additionalProperties") not in (None, False) and not alt.get("properties"):
            suffix = " {KEY: ...}"
    if not keys:
        return suffix
    parts = [f"{name}{'?' if optional else ''}{describe(sub, defs, depth + 1)}" for name, (sub, optional) in keys.items()]
    return " {" + ", ".join(parts) + "}"


def listing(command: str) -> str:
    """The generated key block of one command (without its markers)."""
    schema = result_schema(command)
    defs = schema.get("$defs", {})
    root = _resolve(schema, defs)
    alts, _ = _variants(root, defs)
    entries: list[str] = []  # one key's wrapped lines each; a key two alternatives share is listed once
    for alt in alts:
        if alt.get("type") == "array":
            entries.append("\n".join(textwrap.wrap("[]" + describe(alt["items"], defs), WIDTH, subsequent_indent="    ",
                                                   break_on_hyphens=False)))
            continue
        for name, sub in (alt.get("properties") or {}).items():
            optional = name not in (alt.get("required") or []) or _variants(sub, defs)[1]
            text = f"{name}{'?' if optional else ''}{describe(sub, defs)}"
            entries.append("\n".join(textwrap.wrap(text, WIDTH, subsequent_indent="    ", break_on_hyphens=False) or [text]))
    return "```\n" + "\n".join(dict.fromkeys(entries)) + "\n```"


def block(command: str) -> str:
    return (f"<!-- keys:{command} -->\nEvery key (generated from the result model by `tools/doc_keys.py`; `?`: "
            f"not in every run):\n\n{listing(command)}\n<!-- /keys:{command} -->")


def render(text: str) -> str:
    """docs/cli.md with every command's key block written (appended at the end of its section when absent)."""
    for command in RESULT_TYPES:
        new = block(command)
        pattern = re.compile(rf"<!-- keys:{command} -->.*?<!-- /keys:{command} -->", re.S)
        if pattern.search(text):
            text = pattern.sub(lambda _: new, text)
            continue
        start = text.index(f"## `tcalc {command}`")
        end = text.find("\n## ", start + 1)
        end = len(text) if end < 0 else end
        text = text[:end].rstrip("\n") + "\n\n" + new + "\n" + text[end:]
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md's blocks are stale")
    args = ap.parse_args()
    text = DOC.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print("docs/cli.md's key listings are stale: run python tools/doc_keys.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    print(f"wrote the key listings of {len(RESULT_TYPES)} commands into {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
