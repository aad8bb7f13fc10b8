"""Batches built ahead (stream.Prefetcher): the stream's order, the position of the last batch
taken, errors raised where the batch is taken, and a run that trains bitwise the same with and
without it (resume exactness with it: test_trainer.py, which runs with the default prefetch)."""

import pytest
import torch

from aiayn.data.batching import collate
from aiayn.errors import UserError
from aiayn.training.stream import BatchStream, Prefetcher, host_units
from aiayn.training.trainer import Trainer
from tests.training.test_trainer import (
    PAD,
    _assert_same_training,
    copy_stream,
    loss_fn,
    quiet,
    random_sequences,
    tiny_model,
)


def numbers(n_per_epoch=5):
    """Batches that say where they came from: (epoch, index)."""
    return BatchStream(lambda e: list(range(n_per_epoch)), lambda i: i)


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_the_prefetcher_gives_the_streams_batches_in_order_and_its_position_is_the_last_taken(depth):
    reference = numbers()
    feed = Prefetcher(numbers(), next, depth)
    for _ in range(12):  # across two epoch boundaries
        want = next(reference)
        got, units = next(feed)
        assert got == want and units is None
        assert feed.state_dict() == reference.state_dict()  # not the position of batches built ahead
    feed.close()
    assert feed.stream.state_dict() == reference.state_dict() == {"epoch": 2, "index": 2}


def test_a_prefetcher_reopened_at_a_saved_position_continues_there():
    stream = numbers()
    feed = Prefetcher(stream, next, 2)
    for _ in range(3):
        next(feed)
    saved = feed.state_dict()
    feed.close()
    feed = Prefetcher(stream, next, 2)
    assert feed.state_dict() == saved and next(feed)[0] == 3
    feed.close()


def test_an_error_of_the_batch_builder_is_raised_where_the_batch_is_taken():
    def collate_fails_at_2(i):
        if i == 2:
            raise UserError("example 2 is broken")
        return i

    feed = Prefetcher(BatchStream(lambda e: list(range(4)), collate_fails_at_2), next, 2)
    assert [next(feed)[0] for _ in range(2)] == [0, 1]
    with pytest.raises(UserError, match="example 2 is broken"):
        next(feed)
    empty = Prefetcher(BatchStream(lambda e: [], lambda i: i), next, 2)
    with pytest.raises(UserError, match="no batch"):
        next(empty)


def test_a_collated_batch_carries_its_target_tokens_counted_on_the_host():
    pairs = [([5, 6, 7], [8, 9]), ([5], [8, 9, 10, 11])]
    batch = collate(pairs, PAD)
    assert batch.tgt_count == 3 + 5 == int((batch.tgt_out != PAD).sum())
    assert host_units(batch) == 8 and host_units(batch.to("cpu")) == 8
    assert host_units(batch.pin_memory() if torch.cuda.is_available() else batch) == 8
    assert host_units((batch.src, batch.tgt_out)) is None  # a tuple says nothing
    # the padding itself, as the row-by-row collate built it
    assert batch.src.tolist() == [[5, 6, 7], [5, PAD, PAD]]
    assert batch.tgt_in.tolist() == [[1, 8, 9, PAD, PAD], [1, 8, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, 9, 2, PAD, PAD], [8, 9, 10, 11, 2]]


def test_training_with_batches_built_ahead_equals_training_without(tmp_path):
    runs = []
    for depth in (0, 3):
        cfg = quiet(max_steps=6, accum_steps=2, clip_norm=1.0, deterministic=True, prefetch=depth,
                    log_every=3, save_every=4)
        trainer = Trainer(tiny_model(dropout=0.2), cfg, copy_stream(random_sequences(30, 3), 8),
                          loss_fn, tmp_path / str(depth), family="transformer")
        result = trainer.fit()
        runs.append((trainer, result))
    (a, ra), (b, rb) = runs
    _assert_same_training(a, b)  # weights, Adam's state, the stream's position
    assert ra.tokens == rb.tokens and ra.metrics["loss"] == rb.metrics["loss"]
    # 12 batches taken, 4 an epoch (30 sequences by 8): not those the thread had built ahead
    assert a.batches.state_dict() == {"epoch": 2, "index": 4}
