"""A resumable stream of training batches, and the thread that builds them ahead.

An epoch's batches come from a deterministic `plan(epoch)` (e.g. §5.1 length-bucketed batches,
shuffled with seed + epoch); the stream's whole state is (epoch, index), saved in the train state,
so a resumed run sees exactly the batches the uninterrupted run would have seen.

The Trainer reads them through a Prefetcher: a background thread that walks the same stream in the
same order, collates (pads), pins (for a GPU) and counts each batch's units a few batches ahead, so
that the accelerator does not wait for Python to pad the next one. Its position is that of the
last batch taken, not of the last one built, so what a run saves is unchanged. plan() and
collate() then run on that thread: they must draw from their own seeded generators (all built-in
ones do), never from the global RNGs that the training's dropout uses.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from aiayn.errors import UserError


class BatchStream:
    """Endless iterator of `collate(plan(epoch)[index])`, epoch after epoch."""

    def __init__(self, plan: Callable[[int], Sequence[Any]], collate: Callable[[Any], Any]):
        self.plan = plan
        self.collate = collate
        self.epoch = 0
        self.index = 0
        self._batches: Sequence[Any] | None = None

    def __iter__(self) -> BatchStream:
        return self

    def __next__(self) -> Any:
        return self.collate(self._advance())

    def skip(self) -> None:
        """Move past the next batch without building it (another process takes it)."""
        self._advance()

    def _advance(self) -> Any:
        if self._batches is None:
            self._batches = self._plan(self.epoch)
        if self.index >= len(self._batches):
            self.epoch, self.index = self.epoch + 1, 0
            self._batches = self._plan(self.epoch)
        item = self._batches[self.index]
        self.index += 1
        return item

    def _plan(self, epoch: int) -> Sequence[Any]:
        batches = self.plan(epoch)
        if not batches:
            raise UserError("the training data gives no batch (is the corpus empty?)")
        return batches

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._batches = None


def host_units(batch: Any) -> int | None:
    """The units a batch holds, counted on the host (a Batch's non-pad target tokens, counted
    when it was collated), or None when the batch does not say."""
    count = getattr(batch, "tgt_count", None)
    return int(count) if count is not None else None


class Prefetcher:
    """Batches of a BatchStream built `depth` ahead on a daemon thread, in the stream's order.

    `take(stream)` gives this process's next batch (under torchrun it skips the others' shares);
    `pin` puts each batch in page-locked memory (the copy to a GPU then overlaps compute).
    next() returns (batch, host_units(batch)); state_dict() is the stream's position after the
    last batch returned. With depth 0 the batches are built on the caller's thread when asked
    for. An error of plan() or collate() is raised by the next() that would have returned it."""

    def __init__(self, stream: BatchStream, take: Callable[[BatchStream], Any], depth: int = 2,
                 pin: bool = False):
        self.stream, self.take, self.depth, self.pin = stream, take, depth, pin
        self._position = stream.state_dict()
        self._queue: queue.Queue | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __next__(self) -> tuple[Any, int | None]:
        if self.depth == 0:
            batch, _ = self._build()
            self._position = self.stream.state_dict()
            return batch, host_units(batch)
        if self._thread is None:
            self._start()
        item = self._queue.get()
        if isinstance(item, BaseException):
            self.close()
            raise item
        batch, self._position = item
        return batch, host_units(batch)

    def _build(self) -> tuple[Any, dict[str, int]]:
        batch = self.take(self.stream)
        if self.pin and hasattr(batch, "pin_memory"):
            batch = batch.pin_memory()
        elif self.pin and isinstance(batch, (tuple, list)):
            batch = type(batch)(b.pin_memory() if hasattr(b, "pin_memory") else b for b in batch)
        return batch, self.stream.state_dict()

    def _start(self) -> None:
        self._queue, self._stop = queue.Queue(maxsize=self.depth), threading.Event()
        self._thread = threading.Thread(target=self._work, args=(self._queue, self._stop),
                                        name="aiayn-batches", daemon=True)
        self._thread.start()

    def _work(self, out: queue.Queue, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                item: Any = self._build()
            except BaseException as e:  # handed to the consumer, which raises it
                item = e
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if isinstance(item, BaseException):
                return

    def state_dict(self) -> dict[str, int]:
        return dict(self._position)

    def close(self) -> None:
        """Stop the thread and put the stream back at the position of the last batch taken."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = self._queue = None
        self.stream.load_state_dict(self._position)
