"""A resumable stream of training batches.

An epoch's batches come from a deterministic `plan(epoch)` (e.g. §5.1 length-bucketed batches,
shuffled with seed + epoch); the stream's whole state is (epoch, index), saved in the train state,
so a resumed run sees exactly the batches the uninterrupted run would have seen.
"""

from __future__ import annotations

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
