"""No host synchronisation inside an update, by construction: between two training-loss lines
the trainer reads no number out of a tensor (.item(), float(), int(), bool(), .tolist()); the
loss, its sums, the units and the clipped norm are read at log time. On the CPU that costs
little, but on a GPU each read waits for every kernel queued before it (tests/test_cuda.py
checks the same on a GPU with torch.cuda.set_sync_debug_mode("error"))."""

import sys
import threading
from collections import Counter

import pytest
import torch

from aiayn import EncoderModel, Transformer, encoder_preset, preset
from aiayn.data.batching import MaskedTokens, collate
from aiayn.data.mlm import mask_tokens
from aiayn.tasks.seq2seq_loss import seq2seq_loss
from aiayn.tasks.text_classification import masked_lm_loss
from aiayn.training.losses import classification_loss, label_smoothed_nll
from aiayn.training.progress import Window
from aiayn.training.trainer import Trainer
from tests.training.test_trainer import copy_stream, loss_fn, quiet, random_sequences, tiny_model

READS = ("item", "__float__", "__int__", "__bool__", "__index__", "tolist")
OURS = ("/aiayn/training/", "/aiayn/data/", "/aiayn/tasks/", "/tests/training/")


@pytest.fixture
def reads(monkeypatch):
    """Counts the reads of a tensor's value as a Python number made, while `reads.on` is set, by
    the training loop (aiayn/training, aiayn/data) or the loss function (tests/training, the
    tasks' losses in aiayn/tasks), on the
    main thread (the Prefetcher's thread collates on the host). Not the model's: its attention
    looks at a CPU mask on the CPU alone (nn/attention.py), and torch.optim's Adam reads its step
    counters, host tensors by design (torch keeps them on the CPU unless fused); the GPU test
    covers the whole update."""
    seen = Counter()
    seen.on = False

    def counting(name, original):
        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename.replace("\\", "/")
            if seen.on and threading.current_thread() is threading.main_thread() \
                    and any(part in caller for part in OURS):
                seen[f"{name} in {caller.rsplit('/', 2)[-2]}/{caller.rsplit('/', 1)[-1]}"] += 1
            return original(self, *args, **kwargs)
        return read

    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, counting(name, getattr(torch.Tensor, name)))
    return seen


def _updates_reads(tmp_path, reads, loss, **settings):
    """The reads counted in updates 3..6 of a run that logs every 8 (so no log line among them)."""
    cfg = quiet(max_steps=8, log_every=8, **settings)
    trainer = Trainer(tiny_model(), cfg, copy_stream(random_sequences(40, 3), 8), loss, tmp_path,
                      family="transformer")
    update = trainer._update

    def watched():
        reads.on = 3 <= trainer.step + 1 <= 6
        try:
            return update()
        finally:
            reads.on = False

    trainer._update = watched
    result = trainer.fit()
    assert result.step == 8 and result.metrics["loss"] > 0  # the sums were read at log time
    return dict(reads)


@pytest.mark.parametrize("settings", [{}, {"accum_steps": 2, "clip_norm": 1.0},
                                      {"precision": "bf16", "average_width": 0.1}])
def test_an_update_reads_no_number_from_a_tensor(tmp_path, reads, settings):
    assert _updates_reads(tmp_path, reads, loss_fn, **settings) == {}


@pytest.mark.parametrize("multiple", [1, 8])
def test_an_update_of_the_seq2seq_loss_reads_no_number_from_a_tensor(tmp_path, reads,
                                                                        multiple):
    """The task's own loss (tasks/seq2seq.py) as `aiayn train` runs it: on collated batches
    (the non-pad rows at the host's Batch.tgt_index) and on padded ones (the padding masked).
    Its accuracy was an int() of a device sum: a read every batch."""
    assert _updates_reads(tmp_path, reads, seq2seq_loss(0.1), pad_to_multiple=multiple) == {}


def _on_meta(loss_fn, model, batch):
    """The loss, forward and backward, of a model and batch on the meta device (shapes, no
    values): any op that needs a tensor's values on the host (.item(), int(), a boolean mask's
    nonzero) raises there, as it would wait for a GPU. Returns (units, sums)."""
    loss, n, sums = loss_fn(model.to("meta"), batch.to("meta"))
    loss.backward()
    assert loss.device.type == "meta" and loss.dim() == 0
    return n, sums


@pytest.mark.parametrize("counted_once", [(), (3,)])
@pytest.mark.parametrize("multiple", [1, 8])
def test_the_seq2seq_loss_needs_no_value_from_the_device(counted_once, multiple):
    """tasks/seq2seq.py's loss: the rows it projects come from the host (Batch.tgt_index),
    not from a boolean mask of the targets (a data-dependent shape: a sync on a GPU, a graph
    break for torch.compile); the accuracy stays a tensor."""
    batch = collate([([5, 6, 7], [8, 9]), ([5], [8, 9, 10, 11]), ([4, 4, 4, 4, 4], [7])])
    model = Transformer(preset("tiny", vocab_size=12, d_model=16, d_ff=32))
    n, sums = _on_meta(seq2seq_loss(0.1, counted_once), model, batch.padded(multiple))
    assert n == batch.tgt_count == 10 if multiple == 1 else isinstance(n, torch.Tensor)
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in sums.values())


def test_the_masked_lm_loss_needs_no_value_from_the_device():
    """tasks/text_classification.py's masked-LM loss: the chosen positions found on the host
    (MaskedTokens), the count their number, the accuracy a tensor."""
    ids = torch.randint(5, 50, (4, 16), generator=torch.Generator().manual_seed(0))
    batch = MaskedTokens.of_labels(*mask_tokens(ids, 4, 50, (0, 1, 2, 3),
                                                torch.Generator().manual_seed(0), rate=0.3))
    model = EncoderModel(encoder_preset("tiny", vocab_size=50, d_model=16, d_ff=32))
    n, sums = _on_meta(masked_lm_loss, model, batch)
    assert n == batch.tgt_count > 0 and sums["accuracy"].dim() == 0


def test_the_check_counts_a_loss_that_reads_its_count_on_the_host(tmp_path, reads):
    """The counter above can fail: a loss function that returns int(n), as the trainer's own
    `float(loss)` and `int(n)` did before, is counted once a batch."""
    def reading_loss(model, batch):
        loss, n, sums = loss_fn(model, batch)
        return loss, int(n), sums
    counted = _updates_reads(tmp_path, reads, reading_loss)
    assert counted and sum(counted.values()) == 4  # 4 updates of one batch each


def test_the_losses_return_tensors_not_python_numbers():
    logits, target = torch.randn(2, 3, 7), torch.tensor([[3, 4, 0], [5, 0, 0]])
    loss, nll, n = label_smoothed_nll(logits, target, 0.1, pad_id=0)
    assert all(isinstance(x, torch.Tensor) and x.dim() == 0 for x in (loss, nll, n))
    assert n.item() == 3
    loss, examples, sums = classification_loss(torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))
    assert isinstance(sums["accuracy"], torch.Tensor) and examples == 4


def test_the_window_adds_on_the_device_and_reads_at_log_time():
    window = Window(0.0)
    for k in range(3):
        window.add({"loss": torch.tensor(1.5), "accuracy": torch.tensor(k), "nll": 0.25}, 10)
    assert window.units == 30
    assert window.read() == {"loss": 4.5, "accuracy": 3.0, "nll": 0.75}
    window.reset(1.0)
    assert window.read() == {} and window.units == 0


def test_a_loss_whose_count_differs_from_the_batches_is_an_error_at_log_time(tmp_path):
    """The trainer divides by the batch's host count where the loss returns a device tensor;
    at log time the loss's own count must agree (a loss that counts other units cannot be
    normalised by the batch's)."""
    def miscounting(model, batch):
        loss, n, sums = loss_fn(model, batch)
        return loss, n + 1, sums
    trainer = Trainer(tiny_model(), quiet(max_steps=4, log_every=2), copy_stream(
        random_sequences(16, 3), 8), miscounting, tmp_path, family="transformer")
    with pytest.raises(RuntimeError, match=r"counted \d+ units .* their batches \d+"):
        trainer.fit()
