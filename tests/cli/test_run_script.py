import sys

import ferry
from ferry.cli import COMMANDS, main

SCRIPT = """\
import sys
import torch
print("argv", sys.argv[1:])
x = torch.ones(2)
x.to("meta")
code = int(sys.argv[1]) if sys.argv[1:] else 0
sys.exit(code)
"""

MISMATCH = """\
import torch
def loss(outputs, labels):
    return (outputs - labels).sum()
loss(torch.ones(2, device="meta"), torch.ones(2))
"""


def test_run_is_registered():
    assert "run" in COMMANDS


def test_run_passes_argv_and_returns_the_scripts_exit_code(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert 3 == main(["run", str(script), "3", "--flag"])
    assert "argv ['3', '--flag']" in capsys.readouterr().out
    assert 0 == main(["run", str(script)])


def test_run_sanitize_warns_at_the_scripts_line(tmp_path, capsys, recwarn):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert 0 == main(["run", "--sanitize", str(script)])
    assert [(str(script), 5)] == [(w.filename, w.lineno) for w in recwarn.list if w.category is ferry.SanitizerWarning]


def test_run_sanitize_raises_and_prints_the_users_traceback(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text(MISMATCH)
    assert 1 == main(["run", "--sanitize", str(script)])
    err = capsys.readouterr().err
    assert "ferry.errors.DeviceMismatchError" in err
    assert "labels = labels.to(outputs.device)" in err
    assert f'File "{script}", line 4' in err.splitlines()[1]
    assert "runpy" not in err


def test_run_sanitize_hides_torchs_frames_below_the_users_line(tmp_path, capsys):
    script = tmp_path / "module_call.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(4, 2).to('meta')\ny = model(torch.randn(3, 4))\n")
    assert 1 == main(["run", "--sanitize", str(script)])
    err = capsys.readouterr().err
    frames = [line for line in err.splitlines() if line.strip().startswith('File "')]
    assert [f'  File "{script}", line 3, in <module>'] == frames  # nn.Module's call machinery is not shown
    assert "frame(s) inside torch hidden" in err
    assert "ferry.errors.DeviceMismatchError" in err


def test_run_strict_hides_torchs_frames_between_the_users_lines(tmp_path, capsys):
    """A warning raised under --strict from a forward: the model call and the forward's line, no `Module` frames."""
    script = tmp_path / "pos.py"
    script.write_text(
        "import torch\n"
        "class Pos(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        pos = torch.arange(x.shape[1])\n"
        "        return self.fc(x) + pos\n"
        "model = Pos().to('cuda')\n"
        "y = model(torch.randn(3, 4, device='cuda'))\n"
    )
    assert 1 == main(["run", "--sanitize", "--strict", "--pretend", "cuda", str(script)])
    err = capsys.readouterr().err
    frames = [line for line in err.splitlines() if line.strip().startswith('File "')]
    assert [f'  File "{script}", line 10, in <module>', f'  File "{script}", line 8, in forward'] == frames
    assert "frame(s) inside torch hidden" in err
    assert "ferry.errors.SanitizerWarning" in err


def test_run_without_sanitize_gives_torchs_error(tmp_path, capsys):
    script = tmp_path / "bad.py"
    script.write_text(MISMATCH)
    assert 1 == main(["run", str(script)])
    assert "DeviceMismatchError" not in capsys.readouterr().err


def test_run_usage_errors(tmp_path, capsys):
    assert 2 == main(["run", str(tmp_path / "missing.py")])
    assert 2 == main(["run", "--on-error", "ignore", str(tmp_path / "missing.py")])


def test_run_a_folder_with_a_main_as_python_does(tmp_path, capsys):
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "helper.py").write_text("ANSWER = 7\n")
    (folder / "__main__.py").write_text("import sys\nfrom helper import ANSWER\nprint(ANSWER, sys.argv[1:])\n")
    assert 0 == main(["run", "--sanitize", str(folder), "--flag"])
    assert "7 ['--flag']" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert 2 == main(["run", str(empty)])
    assert "is a folder with no __main__.py" in capsys.readouterr().err
    assert 2 == main(["run"])
    assert "no script given" in capsys.readouterr().err


def test_python_m_ferry_run(tmp_path):
    import subprocess

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "ferry", "run", "--sanitize", str(script), "4"], capture_output=True, text=True
    )
    assert 4 == done.returncode
    assert "SanitizerWarning" in done.stderr


GPU_MIXUP = """\
import torch
model = torch.nn.Linear(4, 2).cuda()
inputs = torch.randn(3, 4).cuda()
out = model(inputs)
print(out.device)
total = out + torch.ones(3, 2)
"""

GPU_CORRECT = """\
import sys
import torch
assert torch.cuda.is_available() and torch.cuda.device_count() == int(sys.argv[1])
device = torch.device("cuda:1" if torch.cuda.device_count() > 1 else "cuda")
model = torch.nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(3, 4).to(device)
loss = model(x).pow(2).mean()
loss.backward()
opt.step()
print("ok", loss.device, next(model.parameters()).device)
"""


def test_run_pretend_sanitize_reports_the_mismatch_at_the_scripts_line(tmp_path, capsys):
    script = tmp_path / "gpu_train.py"
    script.write_text(GPU_MIXUP)
    assert 1 == main(["run", "--sanitize", "--pretend", "cuda", str(script)])
    captured = capsys.readouterr()
    assert "cuda:0" in captured.out  # .cuda() worked on this CPU-only machine
    err = captured.err
    assert "ferry.errors.DeviceMismatchError" in err
    assert f'File "{script}", line 6' in err
    assert "out + torch.ones(3, 2)" in err
    assert "cpu and cuda:0" in err
    assert "runpy" not in err
    assert "pretend.py" not in err  # ferry's own frames are left out


def test_run_pretend_without_sanitize_gives_the_error_a_gpu_gives(tmp_path, capsys):
    script = tmp_path / "gpu_train.py"
    script.write_text(GPU_MIXUP)
    assert 1 == main(["run", "--pretend", "cuda", str(script)])
    err = capsys.readouterr().err
    assert "DeviceMismatchError" not in err
    assert "Expected all tensors to be on the same device" in err
    assert f'File "{script}", line 6' in err


def test_run_pretend_correct_script_exits_0(tmp_path, capsys):
    script = tmp_path / "gpu_train.py"
    script.write_text(GPU_CORRECT)
    assert 0 == main(["run", "--sanitize", "--pretend", "cuda", str(script), "1"])
    assert "ok cuda:0 cuda:0" in capsys.readouterr().out
    assert 0 == main(["run", "--sanitize", "--pretend", "cuda", "--device-count", "2", str(script), "2"])
    assert "ok cuda:1 cuda:1" in capsys.readouterr().out
    assert 0 == main(["run", "--pretend", "cuda", str(script), "1"])


def test_run_pretend_restores_torch_cuda(tmp_path):
    import torch

    script = tmp_path / "gpu_train.py"
    script.write_text(GPU_CORRECT)
    before = torch.cuda.is_available()
    assert 0 == main(["run", "--sanitize", "--pretend", "cuda", str(script), "1"])
    assert before == torch.cuda.is_available()


def test_run_pretend_usage_errors(tmp_path, capsys):
    script = tmp_path / "gpu_train.py"
    script.write_text(GPU_CORRECT)
    assert 2 == main(["run", "--pretend", "mps", str(script)])
    assert 2 == main(["run", "--device-count", "2", str(script)])
    assert "--device-count needs --pretend cuda" in capsys.readouterr().err
    assert 2 == main(["run", "--pretend", "cuda", "--device-count", "0", str(script)])
    assert "at least one GPU" in capsys.readouterr().err


def test_a_pretend_gpu_index_out_of_range_names_the_cli_option(tmp_path, capsys):
    script = tmp_path / "two.py"
    script.write_text("import torch\nx = torch.ones(2).to('cuda:1')\n")
    assert 1 == main(["run", "--pretend", "cuda", str(script)])
    err = capsys.readouterr().err
    assert "--device-count 2" in err
    assert "pretend_cuda(device_count" not in err
