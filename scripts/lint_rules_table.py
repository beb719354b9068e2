"""Print the table of ferry lint's rules (code, name, what it finds) from ``ferry.lint.RULES``, as Markdown.

``python scripts/lint_rules_table.py --write`` puts it into README.md between the ``<!-- rules:start -->`` and
``<!-- rules:end -->`` markers instead.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ferry.lint import RULES

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def table() -> str:
    rows = ["| code | name | what it finds |", "|---|---|---|"]
    for rule in RULES:
        default = "" if rule.default else " (off unless selected)"
        message = rule.message.replace("|", r"\|")
        rows.append(f"| {rule.code} | `{rule.name}` | {message}{default} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(table(), end="")
        return 0
    text = README.read_text()
    if START not in text or END not in text:
        print(f"{README}: no {START} ... {END} markers; add them where the table goes.", file=sys.stderr)
        return 2
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    README.write_text(pattern.sub(lambda _: f"{START}\n{table()}{END}", text, count=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
