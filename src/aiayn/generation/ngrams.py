"""No repeated n-grams: the generation option fairseq (--no-repeat-ngram-size) and HF
(no_repeat_ngram_size) offer against the loops an undertrained or greedy model falls into
("unbekannter unbekannter unbekannter ..."). Not in the paper; off (0) by default.

A token is banned for a row when it would complete an n-gram that the row already contains:
the row's last n - 1 tokens are compared with the first n - 1 of every n-gram of its history,
all rows and all positions at once (no per-row Python loop).
"""

from __future__ import annotations

import torch
from torch import Tensor


def ban_repeated_ngrams(scores: Tensor, history: Tensor, n: int) -> None:
    """scores (N, V), in place: -inf for every token that would repeat an n-gram of `history`
    (N, T) token ids. Negative ids in history (left padding) never match anything. n = 0: no
    ban; n = 1: no token twice."""
    t = history.shape[1]
    if n <= 0 or t < n:  # fewer than n tokens: no n-gram to repeat yet
        return
    v = scores.shape[1]
    grams = history.unfold(1, n, 1)  # (N, T - n + 1, n): every n-gram of each row
    suffix = history[:, t - n + 1:]  # (N, n - 1): what the next token would extend
    match = (grams[..., :-1] == suffix[:, None, :]).all(dim=-1)  # (N, T - n + 1)
    match &= (grams >= 0).all(dim=-1)  # an n-gram that touches padding is no n-gram
    # Unmatched n-grams point at a spare column V, dropped afterwards (one scatter, no loop).
    target = torch.where(match, grams[..., -1], v)
    banned = torch.zeros(scores.shape[0], v + 1, dtype=torch.bool, device=scores.device)
    banned.scatter_(1, target, True)
    scores.masked_fill_(banned[:, :v], float("-inf"))


def with_padding_marked(tokens: Tensor, mask: Tensor | None) -> Tensor:
    """tokens (N, T) with the positions where mask (N, T) is False set to -1, so that
    ban_repeated_ngrams never counts left padding as text."""
    return tokens if mask is None else tokens.masked_fill(~mask, -1)


__all__ = ["ban_repeated_ngrams", "with_padding_marked"]
