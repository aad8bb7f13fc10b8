"""The one decode loop: a step function and a strategy, for every model family.

    step(new_tokens (N, T_new), cache) -> logits (N, T_new, V)      aiayn.generation.steps
    strategy.advance(logits (N, V)) -> (keep, next_tokens)           greedy / sampling / beam

N is the number of live rows (sentences x beams). Each iteration feeds the new tokens, hands the
last position's logits to the strategy, and keeps the cache rows the strategy keeps: `keep` (N',)
indexes the current rows, in their new order (beam search reorders its hypotheses, and a finished
sentence leaves the batch and the cache, so later steps cost less); None means "all, unchanged".
The strategies keep their bookkeeping in tensors, so a step has no per-row Python loop; the one
host sync per step is the strategy's "which rows are still live" (a nonzero()).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

import torch
from torch import Tensor


class Cache(Protocol):
    def reorder(self, indices: Tensor) -> None:
        """Keep rows `indices` (N',) of everything cached, in that order (a subset or a shuffle)."""


class Step(Protocol):
    def __call__(self, new_tokens: Tensor, cache: Cache) -> Tensor:
        """new_tokens (N, T_new) -> logits (N, T_new, V); extends `cache` with the new positions."""


class Strategy(Protocol):
    def advance(self, logits: Tensor) -> tuple[Tensor | None, Tensor | None]:
        """logits (N, V) of the live rows' next token -> (keep (N',) or None, next_tokens (N', 1)).
        next_tokens None: generation is over."""


@torch.no_grad()
def decode_loop(step: Step, cache: Cache, strategy: Strategy, tokens: Tensor) -> Iterator[None]:
    """Run `strategy` from the first input `tokens` (N, T0) (BOS, or a prompt), yielding after each
    step (a streaming caller reads the strategy's latest tokens then); ends when it is over.

    The cache is reordered only between steps and only when the strategy asks, and there is no
    forward pass after the last step. The loop runs inside the model's `decoding()` context
    where it has one (aiayn's models: self-attention keeps its joined q/k/v weights throughout).
    """
    with _decoding(step):
        while True:
            logits = step(tokens, cache)[:, -1]  # (N, V): each live row's next-token logits
            keep, tokens = strategy.advance(logits)
            yield
            if tokens is None:
                return
            if keep is not None:
                cache.reorder(keep)


def _decoding(step: Step) -> AbstractContextManager[None]:
    """The `decoding()` context of the step's model, or of the model a wrapper holds (a test
    double or a benchmark's `.model`); none for a model without one."""
    model = getattr(step, "model", None)
    for candidate in (model, getattr(model, "model", None)):
        scope = getattr(candidate, "decoding", None)
        if callable(scope):
            return scope()
    return nullcontext()


def run(step: Step, cache: Cache, strategy: Strategy, tokens: Tensor) -> None:
    """decode_loop to the end (for callers that want only the strategy's final result)."""
    for _ in decode_loop(step, cache, strategy, tokens):
        pass


__all__ = ["Cache", "Step", "Strategy", "decode_loop", "run"]
