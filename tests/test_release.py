"""A release is consistent: the version, the changelog, the README's pre-commit ``rev`` and the git tag agree."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import ferry

ROOT = Path(__file__).resolve().parent.parent


def test_the_version_is_the_same_in_pyproject_and_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == ferry.__version__


def test_the_changelog_has_a_dated_section_for_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(ferry.__version__)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog, re.MULTILINE)


def test_the_readme_pre_commit_snippet_names_this_release_tag() -> None:
    revs = re.findall(r"^\s+rev:\s*(\S+)", (ROOT / "README.md").read_text(), re.MULTILINE)
    assert [f"v{ferry.__version__}"] == revs


def test_the_release_tag_exists_where_the_clone_has_tags() -> None:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tags = subprocess.run([git, "tag", "--list"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.split()
    if not tags:
        pytest.skip("this clone has no tags (cloned without them)")
    assert f"v{ferry.__version__}" in tags
