"""Write docs/schemas/<command>.json: the JSON Schema of every command's result, as `tcalc schema
COMMAND` prints it (keys sorted, indent 2, a trailing newline).

    python tools/schemas.py            # after changing a result type (results/); commit the files

tests/test_schema.py fails while a file differs from the schema the code generates.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "schemas"


def main() -> int:
    from transformer_calc.render.common import schema_json
    from transformer_calc.results import RESULT_TYPES, result_schema

    OUT.mkdir(parents=True, exist_ok=True)
    for command in RESULT_TYPES:
        path = OUT / f"{command}.json"
        text = schema_json(result_schema(command))
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    stale = sorted(p for p in OUT.glob("*.json") if p.stem not in RESULT_TYPES)
    for path in stale:  # a command that no longer has a result
        path.unlink()
        print(f"removed {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
