"""The sanitizer on Module.to_empty: a tensor read before anything wrote the memory to_empty gave it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import ferry
from ferry.errors import InitializationError


class Rope(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * torch.cat([self.inv_freq, self.inv_freq])  # type: ignore[no-any-return]


def _emptied() -> Rope:
    with torch.device("meta"):
        model = Rope()
    model.to_empty(device="cpu")
    return model


def test_a_forward_reading_a_parameter_nothing_wrote_is_stopped_with_its_name() -> None:
    with ferry.sanitize():
        model = _emptied()
        with pytest.raises(InitializationError) as caught:
            model(torch.ones(2, 8))
    assert caught.value.names == ["lin.weight"]
    assert caught.value.kinds == ["parameter"]
    message = str(caught.value)
    assert "to_empty()" in message
    assert "ferry.deferred_init()" in message
    assert "test_to_empty.py" in message  # the to_empty call's line is named


def test_reset_parameters_fills_the_parameters_but_not_the_non_persistent_buffer() -> None:
    with ferry.sanitize():
        model = _emptied()
        model.lin.reset_parameters()
        with pytest.raises(InitializationError) as caught:
            model(torch.ones(2, 8))
    assert caught.value.names == ["inv_freq"]
    assert "a checkpoint never holds a non-persistent buffer" in str(caught.value)


def test_load_state_dict_fills_what_the_checkpoint_holds(tmp_path: Path) -> None:
    torch.save(Rope().state_dict(), tmp_path / "rope.pt")
    with ferry.sanitize():
        model = _emptied()
        model.load_state_dict(torch.load(tmp_path / "rope.pt", map_location="cpu"))
        with pytest.raises(InitializationError) as caught:
            model(torch.ones(2, 8))
    assert caught.value.names == ["inv_freq"]


def test_everything_written_after_to_empty_runs_clean() -> None:
    with ferry.sanitize() as report:
        model = _emptied()
        model.lin.reset_parameters()
        with torch.no_grad():
            model.inv_freq.copy_(Rope().inv_freq)
        model(torch.ones(2, 8))
    assert report.findings == []


def test_garbage_copied_elsewhere_is_still_garbage() -> None:
    with ferry.sanitize():
        model = _emptied()
        bias = model.lin.bias.clone()
        with pytest.raises(InitializationError, match=r"lin\.bias"):
            bias.sum()


def test_a_model_made_by_ferry_materialize_runs_clean() -> None:
    with ferry.sanitize() as report:
        with ferry.deferred_init():
            model = Rope()
        ferry.materialize(model, "cpu")
        model(torch.ones(2, 8))
    assert report.findings == []


def test_shapes_views_and_moves_of_garbage_are_not_reads() -> None:
    with ferry.sanitize() as report:
        model = _emptied()
        weight = model.lin.weight
        assert weight.shape == (8, 8)
        with torch.no_grad():
            weight[0].fill_(0.0)  # a write through a view: the whole storage counts as written
        weight.detach().view(-1)
        model.lin.weight.t()
    assert report.findings == []


def test_on_pretend_gpus_the_garbage_of_to_empty_is_found_too() -> None:
    with ferry.sanitize(pretend="cuda"):
        with torch.device("meta"):
            model = nn.Linear(4, 4)
        model.to_empty(device="cuda")
        with pytest.raises(InitializationError, match="weight"):
            model(torch.ones(2, 4, device="cuda"))


def test_a_partial_write_leaves_the_rest_garbage_and_a_read_modify_write_reads_it() -> None:
    with ferry.sanitize():
        with torch.device("meta"):
            model = nn.Linear(4, 4)
        model.to_empty(device="cpu")
        with torch.no_grad():
            model.weight[:2].zero_()
            model.bias.zero_()
            model.weight[:2].sum()  # the written rows: fine
            with pytest.raises(InitializationError, match="weight"):
                model(torch.ones(1, 4))
    with ferry.sanitize():
        with torch.device("meta"):
            model = nn.Linear(4, 4)
        model.to_empty(device="cpu")
        with torch.no_grad(), pytest.raises(InitializationError, match="weight"):
            model.weight.mul_(0.5)  # reads the garbage it scales


def test_an_optimizer_step_on_parameters_nothing_wrote_is_a_read_and_setting_grad_is_not() -> None:
    with ferry.sanitize():
        with torch.device("meta"):
            model = nn.Linear(2, 2)
        model.to_empty(device="cpu")
        torch.zeros_like(model.weight)  # shape and dtype only
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for parameter in model.parameters():
            parameter.grad = torch.ones(parameter.shape)
        with pytest.raises(InitializationError, match=r"opt|step"):
            optimizer.step()


def test_a_read_of_the_unwritten_part_says_the_tensor_was_written_in_part() -> None:
    with ferry.sanitize():
        with torch.device("meta"):
            model = nn.Linear(4, 4)
        model.to_empty(device="cpu")
        with torch.no_grad():
            model.weight[:2].zero_()
        with pytest.raises(InitializationError, match="only part of weight"):
            model.weight.sum()
