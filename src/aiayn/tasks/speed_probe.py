"""How many updates a second a translation model makes here: real updates, timed.

`aiayn train auto` plans with it (auto_recipe.plan's `speed`): the updates a budget buys set the
model's size, the passes over the data (and so dropout), the warmup and the checkpoints. A FLOP
count cannot know the machine: on this project's AMD EPYC with AVX512-BF16, bf16 training made
1.74 updates/s of gettext-small where the FLOP model, fitted in fp32, expected 0.92
(benchmarks/RESULTS.md, "Small corpora at equal time"); a GPU's speed for small models is
latency, not FLOPs.

An update here is the Trainer's (training/trainer.py): the same model, loss (seq2seq_loss),
optimizer (make_optimizer), precision (resolve_precision), threads and device, on batches the
run's batcher (pair_batches) cuts from random pairs of the corpus's lengths, after an untimed
epoch of them (below). What a real run spends beside its updates (evaluations, saves, logging,
the weights' running average, batches built in a second thread on the same cores, each of the
corpus's batch shapes seen a first time) is TRAINER_SHARE, measured (below).

    probe = SpeedProbe(lengths=(9.8, 10.5), train=exp.train)
    probe("m", 4000, 3000)           # updates/s of shape m, 4k vocabulary, 3k tokens an update
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from aiayn.config.train import TrainConfig
from aiayn.devices import resolve_precision
from aiayn.training import distributed

PROBE_PAIRS = 1000  # random pairs the batches are cut from: ~10-20 batches an epoch
# An epoch of them is run untimed, then whole epochs are timed in windows of MIN_SECONDS or more.
# The first time a CPU sees a batch's shape it builds its kernels: on an AMD EPYC with
# AVX512-BF16 the first epoch of a probe ran at 2/3 of the rate of the second and third (5.2 vs
# 7.6 updates/s for d_model 128, 2.5 vs 3.8 for 256 with d_ff 1024), and a real run sees each of
# its shapes that first time only once. Rule 2 timed three updates after one: mostly first
# shapes, so for one shape, vocabulary and batch on two corpora of like lengths it said 10.6 and
# 6.6 updates/s where the runs made 8.9 and 9.3.
MIN_SECONDS = 2.0
# Windows are timed until the two fastest agree within AGREE (at most MAX_WINDOWS), and their
# mean is the rate. Until 2026-12-01 the probe timed one window: on 40k en-de pairs, beside a run
# starting on the other core, it timed shape m at 0.63 updates/s (share included) where runs of
# m made 1.0-1.2 there, and auto fell back to the smaller s; timing until two windows agreed, the
# rerun chose m and planned 0.95x the updates it made (RESULTS.md, 2026-12-01). A window slowed
# by a passing load is outvoted by two that agree; on a quiet machine two windows agree, one
# more than before.
AGREE, MAX_WINDOWS = 0.10, 6
# A run's updates/s over the probe's (rule 3). Fitted on the hour-long runs, the budget issue 40
# scores: three probes of each of auto's two 60-minute runs on 20k en-de pairs (d_model 256,
# d_ff 1024, 3+3, 4k BPE, 3k tokens; 9,912 and 9,765 updates made) gave shares of 0.71-0.84,
# median 0.78 (AMD EPYC with AVX512-BF16, 2 threads). Its 5-minute runs of the smallest shape
# made 0.51-0.75x of the probe's rate (18 probes of 6 runs): a run's fixed costs (evaluations,
# first-seen shapes) weigh more in 5 minutes, so there the plan expects up to ~1.4x the updates
# made. Rule 2's share (0.72, of three updates after one) left its runs at 0.84-1.41x of plan.
# Those probes timed one window; two agreeing windows (AGREE) read 1.03x as fast, the median of
# four probes on a quiet core (m twice, s, xs: 1.14, 1.04, 0.98, 1.02; AMD EPYC, 1 thread,
# 2026-12-01: the first timed window still warms up), so the share is 0.78 / 1.03.
TRAINER_SHARE = 0.76


@dataclass
class SpeedProbe:
    """updates/s of (shape, vocabulary, tokens per update), measured once each.

    `lengths`: mean subword pieces of a source and a target sentence; pairs are drawn from
    1 to twice that (uniform), so batches pad as length-sorted real ones do."""

    lengths: tuple[float, float]
    train: TrainConfig
    device: str = "cpu"
    pairs: int = PROBE_PAIRS
    seconds: float = 0.0  # spent measuring, all calls together
    measured: dict[tuple[str, int, int], float] = field(default_factory=dict)
    # (updates timed, batches in an epoch of the probe's pairs) of each measurement
    timed: dict[tuple[str, int, int], tuple[int, int]] = field(default_factory=dict)

    def __call__(self, shape: str, vocab: int, tokens: int) -> float:
        key = (shape, vocab, tokens)
        if key not in self.measured:
            t0 = time.monotonic()
            self.measured[key], self.timed[key] = self._measure(shape, vocab, tokens)
            self.seconds += time.monotonic() - t0
        return self.measured[key]

    def _measure(self, shape: str, vocab: int, tokens: int) -> tuple[float, tuple[int, int]]:
        from aiayn.config.models import TransformerConfig
        from aiayn.models.transformer import Transformer
        from aiayn.tasks.seq2seq import pair_batches
        from aiayn.tasks.seq2seq_loss import seq2seq_loss
        from aiayn.training.auto_recipe import shape_fields
        from aiayn.training.schedule import make_optimizer

        f = shape_fields(shape)
        cfg = TransformerConfig(vocab_size=vocab, d_model=f["d_model"], n_heads=f["n_heads"],
                                d_ff=f["d_ff"], n_encoder_layers=f["n_layers"],
                                n_decoder_layers=f["n_layers"], max_len=256, pad_id=0)
        rng = random.Random(0)

        def sentence(mean: float) -> list[int]:
            return [rng.randrange(4, vocab) for _ in range(rng.randint(1, max(1, round(2 * mean))))]

        pairs = [(sentence(self.lengths[0]), sentence(self.lengths[1])) for _ in range(self.pairs)]
        threads = torch.get_num_threads()
        if self.train.threads:
            torch.set_num_threads(self.train.threads)
        try:
            device = torch.device(self.device)
            torch.manual_seed(0)
            model = Transformer(cfg).to(device).train()
            net = distributed.LossModule(model, seq2seq_loss(0.1, rdrop=self.train.rdrop))
            optimizer = make_optimizer(model, self.train, device)
            precision, _ = resolve_precision(self.train.precision, str(device))
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
            stream = pair_batches(pairs, tokens, seed=0)
            epoch = len(stream.plan(0))  # batches; the next epochs hold the same shapes

            def update() -> None:
                batch = next(stream).to(device)
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast(device.type, dtype=dtype) if dtype else nullcontext():
                    loss, n, _ = net(batch)
                loss.backward()
                torch._foreach_div_([p.grad for p in model.parameters() if p.grad is not None],
                                    float(n))
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()

            for _ in range(epoch):
                update()
            _sync(device)

            def window() -> tuple[int, float]:
                timed, start = 0, time.perf_counter()
                while timed == 0 or time.perf_counter() - start < MIN_SECONDS:
                    for _ in range(epoch):
                        update()
                    timed += epoch
                    _sync(device)
                return timed, time.perf_counter() - start

            rate, timed = steady_rate(window)
            return TRAINER_SHARE * rate, (timed, epoch)
        finally:
            torch.set_num_threads(threads)


def steady_rate(window: Callable[[], tuple[int, float]]) -> tuple[float, int]:
    """(updates/s, updates timed): `window()` times some updates, (updates, seconds); windows
    are timed until the two fastest agree within AGREE, or MAX_WINDOWS have run, and the rate is
    those two's mean. A load that slows one window or a few (another process starting on the
    machine) is outvoted by two steady ones; one that lasts all MAX_WINDOWS still shows."""
    rates, timed = [], 0
    while len(rates) < MAX_WINDOWS:
        updates, seconds = window()
        rates.append(updates / seconds)
        timed += updates
        if len(rates) >= 2:
            a, b = sorted(rates)[-2:]
            if b - a <= AGREE * b:
                break
    top = sorted(rates)[-2:]
    return sum(top) / len(top), timed


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


__all__ = ["SpeedProbe", "steady_rate"]
