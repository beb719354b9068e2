"""The README's quickstart is real code: it runs as written (on the CPU here)."""

import re

import pytest

import ferry
from _support import REPO


def test_readme_quickstart_runs(tmp_path, monkeypatch):
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md has no python block"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert (tmp_path / "model.safetensors").is_file()
    assert sorted(p.name for p in (tmp_path / "runs" / "a").glob("step-*")) == [
        "step-000000100",
        "step-000000200",
        "step-000000300",
    ]
    # run it again, as a notebook cell re-run: the new Checkpointer takes over from the open one, and resumes at 300
    with pytest.warns(ferry.CheckpointWarning, match="another Checkpointer of this process was still open"):
        exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert namespace["start"] == 300


def test_readme_names_the_two_commands_and_the_cpu_wheel():
    text = (REPO / "README.md").read_text()
    assert 'pip install ".[demo]" && ferry demo' in text
    assert 'pip install -e ".[test]" && python -m pytest' in text
    assert "download.pytorch.org/whl/cpu" in text
