"""The one reader and writer of the generated sections of docs/validation.md (--write-docs of tools/validation and tools/crosscheck).

Each tool owns the text between its BEGIN and END markers; this replaces that block (markers
included) with the tool's new block and keeps everything around it as it is, or appends the block
when the markers are absent.
"""

from __future__ import annotations

from pathlib import Path


def read_section(path: Path, begin: str, end: str) -> str:
    """The block from `begin` to `end` in `path` (markers included, one newline after), or "" without it."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if begin in text and end in text:
        return text[text.index(begin):text.index(end) + len(end)] + "\n"
    return ""


def write_section(path: Path, begin: str, end: str, block: str) -> None:
    """Replace the block from `begin` to `end` in `path` by `block` (which holds both markers)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = block.rstrip("\n")
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        new = head + block + rest.split(end, 1)[1]
    else:
        new = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    path.write_text(new, encoding="utf-8")
