"""Greedy and sampled decoding as a strategy of the one decode loop (aiayn.generation.loop).

One token per live row per step: the argmax (temperature 0) or a draw after temperature / top-k /
top-p filtering (aiayn.generation.sampling). A row stops at EOS or at its length limit, and then
leaves the batch and the cache. All bookkeeping is in tensors indexed by `rows`, the batch row of
each live row, so a step has no per-row Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.generation.config import GenerationConfig
from aiayn.generation.ngrams import ban_repeated_ngrams
from aiayn.generation.sampling import sample


def force_first(scores: Tensor, token: int) -> None:
    """In place: only `token` may come, with score 0 (log-probability 0, as transformers'
    ForcedBOSTokenLogitsProcessor gives it)."""
    scores.fill_(float("-inf"))
    scores[:, token] = 0.0


def to_scores(logits: Tensor, log_probs: bool, counted_once: Sequence[int] = ()) -> Tensor:
    """log_softmax in at least fp32 (half-precision logits lose too much), or the logits as they
    are; `counted_once` (GenerationConfig's) -inf before either, so left out of the softmax."""
    if counted_once:  # a copy: the step's logits stay as the model gave them
        logits = logits.index_fill(-1, torch.tensor(counted_once, device=logits.device),
                                   float("-inf"))
    if not log_probs:
        return logits
    return torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)


class Sampler:
    """Greedy (temperature 0) or sampling, for a batch of B rows.

    max_len (B,): new tokens allowed per row (a row stops after that many, EOS or not).
    banned: token ids never produced. log_probs: choose from log_softmax(logits) (the search's
    scores, so that greedy equals beam 1 exactly) instead of the logits themselves.
    prefix (B, T): tokens before the output that count for config.no_repeat_ngram_size (a
    language model's prompt, padding marked by aiayn.generation.ngrams.with_padding_marked).
    After each step, `last` (B,) holds each row's new token (pad_id once a row has finished);
    at the end, `results()` the new tokens of every row, without EOS.
    """

    def __init__(self, max_len: Tensor, config: GenerationConfig, banned: Sequence[int] = (),
                 log_probs: bool = False, generator: torch.Generator | None = None,
                 prefix: Tensor | None = None):
        b, device = max_len.shape[0], max_len.device
        self.cfg, self.log_probs, self.generator = config, log_probs, generator
        self.prefix = prefix
        self.banned = sorted(set(banned))
        self.rows = torch.arange(b, device=device)  # (N,) the batch row of each live row
        self.max_len = max_len  # (N,)
        width = max(1, int(max_len.max()) if b else 1)
        self.out = torch.full((b, width), config.pad_id, dtype=torch.long, device=device)
        self.lengths = torch.zeros(b, dtype=torch.long, device=device)  # (B,) tokens before EOS
        self.last: Tensor | None = None
        self.step = 0

    def advance(self, logits: Tensor) -> tuple[Tensor | None, Tensor | None]:
        """logits (N, V) -> (live rows kept (N',) or None for all, next tokens (N', 1) or None)."""
        cfg = self.cfg
        scores = to_scores(logits, self.log_probs, cfg.counted_once)  # (N, V)
        if self.banned:
            scores[:, self.banned] = float("-inf")  # never emit padding or BOS (fairseq)
        if cfg.no_repeat_ngram_size:
            history = self.out[self.rows, :self.step]  # (N, step) the live rows' output so far
            if self.prefix is not None:
                history = torch.cat([self.prefix[self.rows], history], dim=1)
            ban_repeated_ngrams(scores, history, cfg.no_repeat_ngram_size)
        if cfg.eos_id is not None and self.step < cfg.min_length:
            scores[:, cfg.eos_id] = float("-inf")
        if self.step == 0 and cfg.forced_first_id is not None:
            force_first(scores, cfg.forced_first_id)
        token = sample(scores, cfg.temperature, cfg.top_k, cfg.top_p, generator=self.generator)
        self.out[self.rows, self.step] = token
        self.last = torch.full_like(self.lengths, cfg.pad_id).index_copy_(0, self.rows, token)
        ended = self.max_len <= self.step + 1  # (N,) the length limit is reached
        if cfg.eos_id is not None:
            is_eos = token == cfg.eos_id
            ended |= is_eos
            self.lengths.index_add_(0, self.rows, (~is_eos).long())
        else:
            self.lengths.index_add_(0, self.rows, torch.ones_like(token))
        self.step += 1
        live = (~ended).nonzero().squeeze(1)  # (N',): the step's one host sync
        if live.numel() == 0:
            return None, None
        if live.numel() == ended.numel():
            return None, token[:, None]
        # Finished rows leave the batch: later steps compute only the live ones.
        self.rows, self.max_len = self.rows[live], self.max_len[live]
        return live, token[live, None]

    def results(self) -> list[list[int]]:
        """Per batch row, its new tokens without EOS."""
        return [row[:n] for row, n in zip(self.out.tolist(), self.lengths.tolist(), strict=True)]


__all__ = ["Sampler", "to_scores"]
