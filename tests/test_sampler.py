import doctest
import itertools
import math

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import ferry
import ferry.sampler
from ferry.errors import ArgumentError, CheckpointError, CheckpointWarning
from ferry.sampler import ResumableSampler, _replicas

# (dataset length, num_replicas): per-rank length is ceil(n / num_replicas)
LENGTHS = [(1, 1), (10, 1), (10, 3), (10, 4), (3, 8), (12, 4)]

# (keyword changed on the live sampler, the value it gets, words the message must hold)
MISMATCHES = [
    ({"seed": 1}, "seed 0 but this sampler has 1", "seed=0"),
    ({"shuffle": False}, "shuffle True but this sampler has False", "shuffle=True"),
    ({"num_replicas": 2, "rank": 0}, "number of ranks 1 but this sampler has 2", "num_replicas=1"),
]

BAD_ARGUMENTS = [
    ({"seed": -1}, "seed=-1"),
    ({"seed": 1.5}, "seed=1.5"),
    ({"seed": True}, "seed=True"),
    ({"seed": "0"}, "seed='0'"),
    ({"shuffle": 1}, "shuffle=1"),
    ({"num_replicas": 0, "rank": 0}, "num_replicas=0"),
    ({"num_replicas": 2, "rank": 2}, "rank=2"),
    ({"num_replicas": 2, "rank": -1}, "rank=-1"),
    ({"num_replicas": 2}, "Pass rank="),
    ({"rank": 1}, "rank=1"),
]


def consume(sampler, k):
    """Take k indices from a fresh iterator, as a loop that stops after k would."""
    return list(itertools.islice(iter(sampler), k))


def epoch_orders(sampler, epochs):
    return [list(sampler) for _ in range(epochs)]


# --- orders ------------------------------------------------------------------------------------------------------


def test_each_epoch_is_a_permutation_that_differs_from_the_others():
    orders = epoch_orders(ResumableSampler(range(50), seed=3), 4)
    for order in orders:
        assert list(range(50)) == sorted(order)
    assert 4 == len({tuple(order) for order in orders})


def test_orders_are_deterministic_per_seed_and_epoch():
    assert epoch_orders(ResumableSampler(range(50), seed=3), 3) == epoch_orders(ResumableSampler(range(50), seed=3), 3)
    assert list(ResumableSampler(range(50), seed=3)) != list(ResumableSampler(range(50), seed=4))


def test_seed_plus_one_does_not_replay_the_next_epoch():
    # DistributedSampler seeds with seed + epoch, so seed=1's epoch 0 is seed=0's epoch 1
    seed0 = ResumableSampler(range(50), seed=0)
    seed0.set_epoch(1)
    assert list(seed0) != list(ResumableSampler(range(50), seed=1))


def test_orders_ignore_and_leave_alone_the_global_rng():
    torch.manual_seed(1)
    first = list(ResumableSampler(range(50), seed=3))
    torch.manual_seed(2)
    before = torch.get_rng_state()
    second = list(ResumableSampler(range(50), seed=3))
    assert first == second
    assert torch.equal(before, torch.get_rng_state())


def test_set_epoch_chooses_the_order():
    sampler = ResumableSampler(range(30), seed=5)
    orders = epoch_orders(ResumableSampler(range(30), seed=5), 3)
    sampler.set_epoch(2)
    assert orders[2] == list(sampler)
    sampler.set_epoch(0)
    assert orders[0] == list(sampler)
    sampler.epoch = 1
    assert orders[1] == list(sampler)


def test_set_epoch_of_the_same_epoch_serves_it_again_like_distributed_sampler():
    sampler = ResumableSampler(range(30), seed=5)
    sampler.set_epoch(0)
    first = list(sampler)
    sampler.set_epoch(0)
    assert first == list(sampler)


def test_shuffle_false_yields_indices_in_order_every_epoch():
    sampler = ResumableSampler(range(7), shuffle=False)
    assert [list(range(7))] * 3 == epoch_orders(sampler, 3)


def test_indices_are_plain_ints():
    assert {int} == {type(index) for index in ResumableSampler(range(9))}


@pytest.mark.parametrize(("n", "replicas"), LENGTHS)
def test_len_is_the_per_rank_share(n, replicas):
    samplers = [ResumableSampler(range(n), num_replicas=replicas, rank=r) for r in range(replicas)]
    assert [math.ceil(n / replicas)] * replicas == [len(s) for s in samplers]
    assert [len(s) for s in samplers] == [len(list(s)) for s in samplers]


# --- epochs and positions ------------------------------------------------------------------------------------------


def test_iterating_again_after_a_complete_epoch_starts_the_next():
    sampler = ResumableSampler(range(10), seed=1)
    expected = []
    for epoch in range(3):
        reference = ResumableSampler(range(10), seed=1)
        reference.set_epoch(epoch)
        expected.append(list(reference))
    assert expected == epoch_orders(sampler, 3)
    assert (3, 0) == (sampler.epoch, sampler.position)


def test_iterating_again_after_a_break_continues_the_epoch():
    sampler = ResumableSampler(range(10), seed=1)
    whole = list(ResumableSampler(range(10), seed=1))
    assert whole == consume(sampler, 4) + list(sampler)


def test_position_counts_the_indices_handed_out():
    sampler = ResumableSampler(range(10))
    it = iter(sampler)
    assert 0 == sampler.position
    next(it)
    next(it)
    assert (0, 2) == (sampler.epoch, sampler.position)


def test_an_older_iterator_no_longer_moves_the_state():
    sampler = ResumableSampler(range(10), seed=1)
    old = iter(sampler)
    next(old)
    sampler.set_epoch(4)
    list(old)
    assert (4, 0) == (sampler.epoch, sampler.position)


@pytest.mark.parametrize("k", range(11))
def test_a_restored_sampler_yields_exactly_the_rest_of_the_epoch(k):
    sampler = ResumableSampler(range(10), seed=7)
    sampler.set_epoch(2)
    head = consume(sampler, k)
    resumed = ResumableSampler(range(10), seed=7)
    resumed.load_state_dict(sampler.state_dict())
    reference = ResumableSampler(range(10), seed=7)
    reference.set_epoch(2)
    assert list(reference) == head + list(resumed)
    reference.set_epoch(3)
    assert list(reference) == list(resumed)


@pytest.mark.parametrize("k", [0, 4, 10])
def test_set_epoch_after_a_restore_keeps_the_restored_place(k):
    sampler = ResumableSampler(range(10), seed=7)
    sampler.set_epoch(2)
    head = consume(sampler, k)
    resumed = ResumableSampler(range(10), seed=7)
    resumed.load_state_dict(sampler.state_dict())
    resumed.set_epoch(2)
    resumed.set_epoch(2)  # twice, as a framework and the user might: still the restored place
    reference = ResumableSampler(range(10), seed=7)
    reference.set_epoch(2)
    assert list(reference) == head + list(resumed)


def test_a_state_saved_after_the_epoch_ran_out_is_the_next_epoch_and_completes_the_last():
    sampler = ResumableSampler(range(10), seed=7)
    list(sampler)
    state = sampler.state_dict()
    assert (1, 0) == (state["epoch"], state["position"])
    # a loop that counts its own epochs resumes at 0: epoch 0 is complete, so its pass is empty
    resumed = ResumableSampler(range(10), seed=7)
    resumed.load_state_dict(state)
    resumed.set_epoch(0)
    assert [] == list(resumed)
    resumed.set_epoch(1)
    assert list(resumed) == list(sampler)


def test_set_epoch_away_from_a_restored_mid_epoch_state_warns():
    sampler = ResumableSampler(range(10))
    consume(sampler, 3)
    resumed = ResumableSampler(range(10))
    resumed.load_state_dict(sampler.state_dict())
    with pytest.warns(CheckpointWarning, match=r"rest of epoch 0 is skipped.*set_epoch\(0\)"):
        resumed.set_epoch(1)
    assert (1, 0) == (resumed.epoch, resumed.position)


def test_set_epoch_back_from_a_restored_mid_epoch_state_warns():
    sampler = ResumableSampler(range(10))
    sampler.set_epoch(2)
    consume(sampler, 3)
    resumed = ResumableSampler(range(10))
    resumed.load_state_dict(sampler.state_dict())
    with pytest.warns(CheckpointWarning, match=r"goes back an epoch.*set_epoch\(2\)"):
        resumed.set_epoch(1)
    assert (1, 0) == (resumed.epoch, resumed.position)


def test_set_epoch_accepts_numpy_ints_and_keeps_plain_ints():
    sampler = ResumableSampler(range(10))
    sampler.set_epoch(np.int64(3))
    assert int is type(sampler.state_dict()["epoch"])


# --- state_dict --------------------------------------------------------------------------------------------------


def test_state_dict_holds_plain_values_and_the_settings():
    sampler = ResumableSampler(range(10), seed=4, num_replicas=3, rank=1)
    consume(sampler, 2)
    state = sampler.state_dict()
    assert {"version", "epoch", "position", "seed", "shuffle", "dataset_len", "num_replicas", "order_crc32"} == set(
        state
    )
    assert (0, 2, 4, True, 10, 3) == tuple(
        state[k] for k in ("epoch", "position", "seed", "shuffle", "dataset_len", "num_replicas")
    )
    assert all(type(value) in (int, bool) for value in state.values())


def test_state_dict_round_trips_through_a_pickle_free_checkpoint(tmp_path):
    sampler = ResumableSampler(range(10), seed=4)
    head = consume(sampler, 6)
    ferry.save({"sampler": sampler.state_dict()}, tmp_path / "ckpt")
    resumed = ResumableSampler(range(10), seed=4)
    resumed.load_state_dict(ferry.load(tmp_path / "ckpt")["sampler"])
    assert list(ResumableSampler(range(10), seed=4)) == head + list(resumed)


@pytest.mark.parametrize(("changed", "message", "fix"), MISMATCHES)
def test_load_state_dict_refuses_other_settings(changed, message, fix):
    saved = ResumableSampler(range(10))
    consume(saved, 3)
    live = ResumableSampler(range(10), **changed)
    with pytest.raises(CheckpointError, match=message) as caught:
        live.load_state_dict(saved.state_dict())
    assert fix in str(caught.value)
    assert "set_epoch(0)" in str(caught.value)


def test_load_state_dict_refuses_another_dataset_size():
    saved = ResumableSampler(range(10))
    list(saved)
    consume(saved, 10)
    with pytest.raises(CheckpointError, match="dataset length 10 but this sampler has 12") as caught:
        ResumableSampler(range(12)).load_state_dict(saved.state_dict())
    assert "the dataset the run was saved with (10 samples)" in str(caught.value)
    assert "set_epoch(2)" in str(caught.value)  # epoch 1 was complete: nothing is lost going on with epoch 2


DAMAGED = [
    ({}, "expected the keys"),
    ([1, 2], "got list"),
    ({"position": -1}, "'position' is -1"),
    ({"position": 11}, "position 11 of epoch 0"),
    ({"shuffle": 1}, "'shuffle' is 1"),
    ({"epoch": "0"}, "'epoch' is '0'"),
    ({"version": 9}, "version 9"),
]


@pytest.mark.parametrize(("change", "message"), DAMAGED)
def test_load_state_dict_refuses_damaged_states(change, message):
    state = ResumableSampler(range(10)).state_dict()
    damaged = change if not isinstance(change, dict) or not change else {**state, **change}
    with pytest.raises(CheckpointError, match=message):
        ResumableSampler(range(10)).load_state_dict(damaged)


def test_a_failed_load_changes_nothing():
    sampler = ResumableSampler(range(10))
    consume(sampler, 4)
    with pytest.raises(CheckpointError):
        sampler.load_state_dict({**sampler.state_dict(), "seed": 1})
    assert (0, 4) == (sampler.epoch, sampler.position)


def test_load_state_dict_warns_when_the_saved_order_differs():
    sampler = ResumableSampler(range(10))
    consume(sampler, 4)
    state = {**sampler.state_dict(), "order_crc32": sampler.state_dict()["order_crc32"] ^ 1}
    with pytest.warns(CheckpointWarning, match="order of epoch 0"):
        ResumableSampler(range(10)).load_state_dict(state)


# --- DataLoader ----------------------------------------------------------------------------------------------------


def train(sampler, loader, epochs, *, start=None, stop_after=None, mark=False):
    """A set_epoch training loop; returns (batches, the sampler state and loop epoch when it stopped)."""
    batches = []
    for epoch in range(sampler.epoch if start is None else start, epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            batches.append(batch.tolist())
            if mark:
                sampler.mark_consumed(len(batch))
            if len(batches) == stop_after:
                return batches, sampler.state_dict(), epoch
    return batches, None, None


def train_without_set_epoch(sampler, loader, epochs, *, stop_after=None):
    batches = []
    while sampler.epoch < epochs:
        for batch in loader:
            batches.append(batch.tolist())
            if len(batches) == stop_after:
                return batches, sampler.state_dict(), None
    return batches, None, None


def make(n, num_workers=0):
    dataset = list(range(n))
    sampler = ResumableSampler(dataset, seed=11)
    return sampler, DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=num_workers)


@pytest.mark.parametrize("n", [22, 24])  # a short last batch, and none
@pytest.mark.parametrize("loop", ["set_epoch/sampler epoch", "set_epoch/own epoch", "no set_epoch"])
def test_dataloader_without_workers_resumes_exactly_at_every_batch(n, loop):
    epochs = 3
    run = train_without_set_epoch if loop == "no set_epoch" else train
    full, _, _ = run(*make(n), epochs)
    assert epochs * math.ceil(n / 4) == len(full)
    for k in range(1, len(full) + 1):
        head, state, loop_epoch = run(*make(n), epochs, stop_after=k)
        sampler, loader = make(n)
        sampler.load_state_dict(state)
        start = loop_epoch if loop == "set_epoch/own epoch" else None
        tail, _, _ = run(sampler, loader, epochs, **({"start": start} if start is not None else {}))
        assert full == head + tail, f"stopped after batch {k}"


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_dataloader_with_workers_overcounts_unless_the_loop_marks_what_it_consumed():
    n, epochs = 22, 2
    full, _, _ = train(*make(n), epochs)
    # the limitation: prefetching workers take indices before the loop sees them
    _, state, _ = train(*make(n, num_workers=2), epochs, stop_after=1)
    assert 4 < state["position"]
    # the documented fix: mark_consumed once per batch
    for k in (1, 5, 6, 7):  # mid-epoch, last full batch, the short last batch, first of epoch 1
        head, state, loop_epoch = train(*make(n, num_workers=2), epochs, stop_after=k, mark=True)
        sampler, loader = make(n, num_workers=2)
        sampler.load_state_dict(state)
        tail, _, _ = train(sampler, loader, epochs, start=loop_epoch, mark=True)
        assert full == head + tail, f"stopped after batch {k}"


def test_mark_consumed_reports_the_iterators_epoch_until_the_loop_catches_up():
    sampler = ResumableSampler(range(10))
    it = iter(sampler)
    list(it)  # a prefetching loader took the whole epoch; the sampler moved on
    assert (1, 0) == (sampler.epoch, sampler.position)
    sampler.mark_consumed(4)
    assert (0, 4) == (sampler.state_dict()["epoch"], sampler.state_dict()["position"])
    sampler.mark_consumed(4)
    sampler.mark_consumed(4)  # the batch size, past the end of the epoch
    assert (1, 0) == (sampler.state_dict()["epoch"], sampler.state_dict()["position"])


# --- ranks ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "replicas"), LENGTHS)
def test_ranks_share_the_epoch_and_cover_the_dataset(n, replicas):
    shares = [list(ResumableSampler(range(n), seed=2, num_replicas=replicas, rank=r)) for r in range(replicas)]
    order = list(ResumableSampler(range(n), seed=2))
    padded = (order * math.ceil(replicas * len(shares[0]) / n))[: replicas * len(shares[0])]
    assert [padded[r::replicas] for r in range(replicas)] == shares
    assert set(range(n)) == set(itertools.chain(*shares))


@pytest.mark.parametrize("k", [0, 2, 3])
def test_each_rank_resumes_exactly_and_rank_0s_state_resumes_any_rank(k):
    samplers = [ResumableSampler(range(10), seed=2, num_replicas=4, rank=r) for r in range(4)]
    heads = [consume(s, k) for s in samplers]
    state = samplers[0].state_dict()
    for rank in range(4):
        resumed = ResumableSampler(range(10), seed=2, num_replicas=4, rank=rank)
        resumed.load_state_dict(state)
        assert list(ResumableSampler(range(10), seed=2, num_replicas=4, rank=rank)) == heads[rank] + list(resumed)


REPLICAS = [
    # (num_replicas, rank, process group (world size, rank) or None, expected)
    (None, None, None, (1, 0)),
    (None, None, (4, 2), (4, 2)),
    (8, None, (8, 5), (8, 5)),
    (4, 1, (8, 5), (4, 1)),
    (1, None, None, (1, 0)),
]


@pytest.mark.parametrize(("num_replicas", "rank", "group", "expected"), REPLICAS)
def test_replicas_default_to_the_process_group(num_replicas, rank, group, expected):
    assert expected == _replicas(num_replicas, rank, group)


def test_without_a_process_group_there_is_one_replica():
    sampler = ResumableSampler(range(4))
    assert (1, 0) == (sampler.num_replicas, sampler.rank)


# --- bad arguments -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "message"), BAD_ARGUMENTS)
def test_bad_arguments_raise_argument_error(kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        ResumableSampler(range(10), **kwargs)


class Unsized:
    def __getitem__(self, index):
        return index


@pytest.mark.parametrize(("data_source", "message"), [(Unsized(), "has no len"), ([], "empty")])
def test_data_source_must_have_a_length(data_source, message):
    with pytest.raises(ArgumentError, match=message):
        ResumableSampler(data_source)


@pytest.mark.parametrize("call", [lambda s: s.set_epoch(-1), lambda s: s.set_epoch(1.0), lambda s: s.mark_consumed(-4)])
def test_bad_epochs_and_counts_raise_argument_error(call):
    with pytest.raises(ArgumentError, match="pass an int >= 0"):
        call(ResumableSampler(range(10)))


def test_docstring_examples_run():
    assert 0 == doctest.testmod(ferry.sampler, optionflags=doctest.ELLIPSIS).failed
