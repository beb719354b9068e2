"""What the sanitizer checks at each training step: optimizer state beside its parameters, and host syncs per step."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch
from torch import nn

import ferry


def _train_step(model: nn.Module, optimizer: torch.optim.Optimizer, device: str) -> torch.Tensor:
    loss = model(torch.randn(4, 3, device=device)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    return loss


@pytest.mark.parametrize("kind", ["adam stepped on the cpu", "adagrad built before the move", "loaded before the move"])
def test_optimizer_state_left_behind_by_a_move_is_reported_at_the_step(kind: str) -> None:
    with ferry.sanitize(pretend="cuda") as report:
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        if kind == "adagrad built before the move":
            optimizer: torch.optim.Optimizer = torch.optim.Adagrad(model.parameters())
        else:
            optimizer = torch.optim.Adam(model.parameters())
            _train_step(model, optimizer, "cpu")
            optimizer.step()
            if kind == "loaded before the move":
                saved = optimizer.state_dict()
                optimizer = torch.optim.Adam(model.parameters())
                optimizer.load_state_dict(saved)
        model.cuda()
        _train_step(model, optimizer, "cuda")
        with pytest.raises(ferry.DeviceError) as caught:
            optimizer.step()  # the reported line
    line = next(
        n
        for n, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if text.rstrip().endswith("# the reported line")
    )
    message = str(caught.value)
    assert "is on cpu, but the parameter is on cuda:0" in message
    assert "ferry.place(model, 'cuda:0', optimizer=optimizer)" in message
    assert [("optimizer-state-device", __file__, line)] == [
        (f.kind, f.where.file, f.where.line) for f in report.findings
    ]


def test_optimizer_state_moved_with_the_model_is_fine() -> None:
    with ferry.sanitize(pretend="cuda") as report:
        model = nn.Linear(3, 2)
        optimizer = torch.optim.Adam(model.parameters())
        _train_step(model, optimizer, "cpu")
        optimizer.step()
        ferry.place(model, "cuda", optimizer=optimizer)
        for _ in range(2):
            _train_step(model, optimizer, "cuda")
            optimizer.step()
    assert [] == report.findings
    assert 3 == report.optimizer_steps


def test_host_syncs_are_summarised_per_training_step_leaving_out_logging_and_evaluation(capsys) -> None:
    with ferry.sanitize(pretend="cuda") as report:
        model = nn.Linear(3, 2).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        for step in range(1, 21):
            loss = _train_step(model, optimizer, "cuda")
            optimizer.step()
            total += loss.item()  # every step: the one line to report
            if step % 5 == 0:
                print(f"step {step}: {loss.item():.3f}")  # a logging line: not every step
        with torch.no_grad():
            for _ in range(40):  # evaluation, more batches than training steps
                model(torch.randn(4, 3, device="cuda")).sum().item()
    first = test_host_syncs_are_summarised_per_training_step_leaving_out_logging_and_evaluation.__code__.co_firstlineno
    assert {first + 8: 1.0} == {where.line: rate for where, rate in report.host_syncs_per_step().items()}
    err = capsys.readouterr().err
    assert "1 host-device synchronisation(s) per training step on 1 line(s) (over 20 training step(s))" in err
    assert "total += loss.item()" in err
    assert "print(f" not in err
    assert ".sum().item()" not in err


def test_an_inference_script_lists_its_busiest_sync_lines(capsys) -> None:
    with ferry.sanitize(pretend="cuda") as report:
        model = nn.Linear(3, 2).cuda()
        with torch.no_grad():
            for _ in range(3):
                model(torch.randn(4, 3, device="cuda")).argmax(1).tolist()
    assert 0 == report.optimizer_steps
    assert [3] == list(report.host_syncs.values())
    assert "3 host-device synchronisation(s) on 1 line(s)" in capsys.readouterr().err


def test_two_optimizers_stepping_once_each_make_one_training_step() -> None:
    # a GAN: the discriminator's and the generator's optimizer each step once per training step
    with ferry.sanitize(pretend="cuda") as report:
        generator, discriminator = nn.Linear(3, 3).cuda(), nn.Linear(3, 1).cuda()
        optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (discriminator, generator)]
        for _ in range(5):
            for optimizer, loss in zip(optimizers, (discriminator, generator), strict=True):
                loss(torch.randn(2, 3, device="cuda")).sum().backward()
                optimizer.step()
            discriminator(torch.randn(2, 3, device="cuda")).mean().item()  # once per training step
    assert 5 == report.optimizer_steps
    assert [1.0] == list(report.host_syncs_per_step().values())


def test_models_trained_one_after_another_add_their_steps_up() -> None:
    # a teacher trained before its student: 3 + 4 steps, one `.item()` per step in each phase
    with ferry.sanitize(pretend="cuda") as report:
        for steps in (3, 4):
            model = nn.Linear(3, 2).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(steps):
                loss = _train_step(model, optimizer, "cuda")
                optimizer.step()
                loss.item()
        student_only = nn.Linear(3, 1).cuda()
        optimizer = torch.optim.SGD(student_only.parameters(), lr=0.1)
        for _ in range(2):
            loss = _train_step(student_only, optimizer, "cuda")
            optimizer.step()
            student_only.weight.sum().item()  # only in this last phase: still once per step of its own
    assert 9 == report.optimizer_steps
    assert [1.0, 1.0] == list(report.host_syncs_per_step().values())


def test_a_freed_optimizer_lends_no_count_to_one_made_at_its_address() -> None:
    # Python reuses a freed object's id(): a student's optimizer can sit where the teacher's was, and must still
    # start a step of its own (CI once counted 8 of the 9 steps above this way)
    sanitizer = ferry.sanitize(pretend="cuda")
    with sanitizer as report:
        teacher = nn.Linear(3, 2).cuda()
        optimizer = torch.optim.SGD(teacher.parameters(), lr=0.1)
        for _ in range(3):
            _train_step(teacher, optimizer, "cuda")
            optimizer.step()
        del optimizer
        gc.collect()
        assert 0 == len(sanitizer._steps_by_optimizer)  # nothing kept that a new optimizer at that address could match
        assert 0 == len(sanitizer._stepped_this_round)
        student = nn.Linear(3, 1).cuda()
        optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
        for _ in range(2):
            _train_step(student, optimizer, "cuda")
            optimizer.step()
    assert 5 == report.optimizer_steps


def test_data_dependent_shapes_and_boolean_masks_are_host_syncs() -> None:
    with ferry.sanitize(pretend="cuda") as report:
        x = torch.randn(4, 4, device="cuda")
        mask = torch.eye(4, dtype=torch.bool, device="cuda")
        x[~mask].sum()  # boolean-mask indexing: the number of True elements is read on the host
        torch.nonzero(x > 0)
        x.masked_select(mask)
        torch.unique(x.round())
        x[0, 1:].sum()  # plain indexing: no sync
        x[mask] = 0.0  # a masked assignment
    assert [5] == [sum(report.host_syncs.values())]


def test_a_grad_scalers_own_inf_check_is_not_listed_as_a_sync_per_step() -> None:
    # GradScaler.step reads found_inf on the host by design: nothing in the user's code avoids it
    with ferry.sanitize(pretend="cuda") as report:
        model = nn.Linear(3, 2).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cuda")
        for _ in range(3):
            loss = model(torch.randn(4, 3, device="cuda")).pow(2).mean()
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    assert 3 == report.optimizer_steps
    assert {} == report.host_syncs_per_step()
