import warnings

import pytest
import torch

import ferry


def kept(x):
    y = x.to("meta")
    z = [x.cpu()]
    print_it = len(x.to(torch.float64).double().shape)
    return y, z, print_it, x.float()


def test_discarded_move_warns_at_its_line():
    x = torch.ones(2)
    with pytest.warns(ferry.SanitizerWarning, match=r"Tensor\.to\(\) discarded") as caught, ferry.sanitize() as report:
        x.to("meta")
    line = test_discarded_move_warns_at_its_line.__code__.co_firstlineno + 3
    assert [line] == [w.lineno for w in caught]
    assert [("discarded-tensor-move", line)] == [(f.kind, f.where.line) for f in report.findings]
    assert '`x = x.to("meta")`' in report.findings[0].message


def test_discarded_move_fix_leaves_the_comment_out():
    x = torch.ones(2)
    with pytest.warns(ferry.SanitizerWarning), ferry.sanitize() as report:
        x.to("meta")  # the result is thrown away
    assert 'Keep the result: `x = x.to("meta")`.' in report.findings[0].message


@pytest.mark.parametrize("method", ["cpu", "float", "half", "long"])
def test_other_discarded_conversions_warn(method):
    x = torch.ones(2)
    with pytest.warns(ferry.SanitizerWarning, match=rf"Tensor\.{method}\(\) discarded"), ferry.sanitize():
        getattr(x, method)()


def test_kept_moves_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ferry.sanitize() as report:
            kept(torch.ones(2))
            moved = [torch.ones(2).to("meta") for _ in range(2)]
            torch.add(torch.ones(2).cpu(), 1)
    assert [] == report.findings
    assert 2 == len(moved)


def test_strict_raises_the_warning():
    x = torch.ones(2)
    with pytest.raises(ferry.SanitizerWarning), ferry.sanitize(strict=True):
        x.cpu()


def test_module_to_is_in_place_and_never_warns():
    with ferry.sanitize() as report:
        torch.nn.Linear(2, 2).to("meta")
    assert [] == report.findings


def every_device(device):
    return True


def test_host_syncs_are_counted_per_line(capsys):
    loss = torch.tensor(1.5)
    with ferry.sanitize(is_accelerator=every_device) as report:
        for _ in range(3):
            loss.item()
        bool(loss > 1)
        loss.tolist()
        print(loss)
        f"{loss}"
    first = test_host_syncs_are_counted_per_line.__code__.co_firstlineno + 4
    counts = {where.line: count for where, count in report.host_syncs.items()}
    assert {first: 3, first + 1: 1, first + 2: 1, first + 3: 1, first + 4: 1} == counts
    err = capsys.readouterr().err
    assert "7 host-device synchronisation(s) on 5 line(s)" in err
    assert "loss.item()" in err


def test_cpu_and_meta_tensors_are_not_syncs_by_default(capsys):
    with ferry.sanitize() as report:
        torch.ones(1).item()
        print(torch.ones(2, device="meta"))
    assert not report.host_syncs
    assert "synchronisation" not in capsys.readouterr().err


def test_meta_as_the_accelerator_counts_sync_attempts():
    x = torch.ones(2, device="meta")
    with (
        ferry.sanitize(is_accelerator=lambda d: d.type == "meta") as report,
        pytest.raises((RuntimeError, NotImplementedError)),  # meta tensors have no data to copy out
    ):
        _ = x.cpu()
    assert [1] == list(report.host_syncs.values())


def test_notebook_cells_show_their_line():
    import linecache

    from ferry.sanitizer import SourceLine

    source = "x = torch.ones(2)\nx.to('meta')\ny = 1\n"
    name = "<ipython-input-7-0123abcd>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    with pytest.warns(ferry.SanitizerWarning, match="ipython-input-7"), ferry.sanitize() as report:
        exec(compile(source, name, "exec"), {"torch": torch})
    assert [SourceLine(name, 2, "x.to('meta')")] == [f.where for f in report.findings]


def test_a_model_moved_to_the_host_to_save_is_named_in_the_mismatch(tmp_path):
    # `torch.save(model.cpu().state_dict(), path)` in a training loop moves the model itself: the next step's
    # mismatch names that line and the copy that saves without moving
    with ferry.sanitize(pretend="cuda") as report:
        model = torch.nn.Linear(4, 2).to("cuda")
        for _ in range(2):
            try:
                model(torch.randn(3, 4, device="cuda")).sum().backward()
            except ferry.DeviceMismatchError as error:
                message = str(error)
                break
            torch.save(model.cpu().state_dict(), tmp_path / "m.pt")
    line = test_a_model_moved_to_the_host_to_save_is_named_in_the_mismatch.__code__.co_firstlineno + 11
    assert f"moved to the CPU at {__file__}:{line}" in message
    assert "{k: v.cpu() for k, v in model.state_dict().items()}" in message
    assert ["input-on-other-device"] == [f.kind for f in report.findings]


def test_a_model_moved_back_before_use_is_not_named(tmp_path):
    with ferry.sanitize(pretend="cuda"):
        model = torch.nn.Linear(4, 2).to("cuda")
        torch.save(model.cpu().state_dict(), tmp_path / "m.pt")
        model.to("cuda")
        loss = torch.nn.MSELoss().cpu()
        with pytest.raises(ferry.DeviceMismatchError) as caught:
            torch.nn.Linear(4, 2)(torch.randn(3, 4, device="cuda"))  # a host model, never on the device
    assert "moved to the CPU" not in str(caught.value)
    assert loss is not None
