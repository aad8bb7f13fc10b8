"""How many updates a second a translation model makes here: a few real updates, timed.

`aiayn train auto` plans with it (auto_recipe.plan's `speed`): the updates a budget buys set the
model's size, the passes over the data (and so dropout), the warmup and the checkpoints. A FLOP
count cannot know the machine: on this project's AMD EPYC with AVX512-BF16, bf16 training made
1.74 updates/s of gettext-small where the FLOP model, fitted in fp32, expected 0.92
(benchmarks/RESULTS.md, "Small corpora at equal time"); a GPU's speed for small models is
latency, not FLOPs.

An update here is the Trainer's (training/trainer.py): the same model, loss (seq2seq_loss),
optimizer (make_optimizer), precision (resolve_precision), threads and device, on batches the
run's batcher (pair_batches) cuts from random pairs of the corpus's lengths. What a real run
spends beside its updates (evaluations, saves, logging, the weights' running average, batches
built in a second thread on the same cores) is TRAINER_SHARE, measured: the probe alone said
3.6-3.8 updates/s of gettext-small's shape where the runs made 2.55-2.71 (60 minutes, 20k pairs),
and 9.6 for the smallest where a 2-minute run made 6.9 (AMD EPYC with AVX512-BF16, 2 threads).

    probe = SpeedProbe(lengths=(9.8, 10.5), train=exp.train)
    probe("m", 4000, 3000)           # updates/s of shape m, 4k vocabulary, 3k tokens an update
"""

from __future__ import annotations

import random
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch

from aiayn.config.train import TrainConfig
from aiayn.devices import resolve_precision
from aiayn.training import distributed

PROBE_PAIRS = 2000  # random pairs the batches are cut from
WARMUP, TIMED = 1, 3  # updates: the first (allocations, a CPU's thread pool) is not timed
TRAINER_SHARE = 0.72  # a run's updates/s over the probe's (see above: 0.71 and 0.72); auto's own
# runs since made 0.84x-1.41x the updates planned with it (RESULTS.md, "Small corpora"): not
# refitted yet


@dataclass
class SpeedProbe:
    """updates/s of (shape, vocabulary, tokens per update), measured once each.

    `lengths`: mean subword pieces of a source and a target sentence; pairs are drawn from
    1 to twice that (uniform), so batches pad as length-sorted real ones do."""

    lengths: tuple[float, float]
    train: TrainConfig
    device: str = "cpu"
    seconds: float = 0.0  # spent measuring, all calls together
    measured: dict[tuple[str, int, int], float] = field(default_factory=dict)

    def __call__(self, shape: str, vocab: int, tokens: int) -> float:
        key = (shape, vocab, tokens)
        if key not in self.measured:
            t0 = time.monotonic()
            self.measured[key] = self._measure(shape, vocab, tokens)
            self.seconds += time.monotonic() - t0
        return self.measured[key]

    def _measure(self, shape: str, vocab: int, tokens: int) -> float:
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

        pairs = [(sentence(self.lengths[0]), sentence(self.lengths[1])) for _ in range(PROBE_PAIRS)]
        threads = torch.get_num_threads()
        if self.train.threads:
            torch.set_num_threads(self.train.threads)
        try:
            device = torch.device(self.device)
            torch.manual_seed(0)
            model = Transformer(cfg).to(device).train()
            net = distributed.LossModule(model, seq2seq_loss(0.1))
            optimizer = make_optimizer(model, self.train, device)
            precision, _ = resolve_precision(self.train.precision, str(device))
            dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
            batches = iter(pair_batches(pairs, tokens, seed=0))
            start = 0.0
            for i in range(WARMUP + TIMED):
                if i == WARMUP:
                    _sync(device)
                    start = time.perf_counter()
                batch = next(batches).to(device)
                optimizer.zero_grad(set_to_none=True)
                with torch.autocast(device.type, dtype=dtype) if dtype else nullcontext():
                    loss, n, _ = net(batch)
                loss.backward()
                torch._foreach_div_([p.grad for p in model.parameters() if p.grad is not None],
                                    float(n))
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            _sync(device)
            return TRAINER_SHARE * TIMED / (time.perf_counter() - start)
        finally:
            torch.set_num_threads(threads)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


__all__ = ["SpeedProbe"]
