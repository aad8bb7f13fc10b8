"""Batches by approximate length under a token budget (§5.1), and padding them into tensors.

§5.1: "Sentence pairs were batched together by approximate sequence length. Each training batch
contained a set of sentence pairs containing approximately 25000 source tokens and 25000 target
tokens." ``token_batches`` does the grouping: examples are sorted by length, and consecutive
ones are packed while the padded batch, (longest source + longest target) * batch size, stays
within ``max_tokens``. Sorting first keeps padding small.

The paper's 25k + 25k tokens per step rarely fit in memory at once (on 8 P100s they were split
across GPUs). The trainer reaches them by gradient accumulation: one optimizer step sums the
gradients of ``accum_steps`` batches, so a step sees up to ``max_tokens * accum_steps`` padded
tokens, e.g. max_tokens=5000 with accum_steps=10 for ~50k (25k source + 25k target). Pass
target lengths + 1 in ``lengths`` to budget exactly what ``collate`` builds (it adds <s>/</s>).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from torch import Tensor

from aiayn.data.mlm import IGNORE_INDEX
from aiayn.data.special import BOS, EOS, PAD
from aiayn.errors import UserError


def token_batches(lengths: Sequence[tuple[int, int]], max_tokens: int, shuffle: bool = True,
                  seed: int = 0) -> list[list[int]]:
    """Group example indices into batches of similar length; each index appears exactly once.

    lengths[i] = (source length, target length) of example i (a list of pairs, or an (N, 2)
    integer array, which a stream that plans every epoch makes once). Every batch satisfies
    ``(max source + max target) * len(batch) <= max_tokens``, except that an example over the
    budget on its own still gets a batch of one. With ``shuffle`` the order of equal-length
    examples and the order of the batches are shuffled, deterministically from ``seed`` (use
    seed + epoch for a new order each epoch); without it, batches go from shortest to longest.
    """
    if max_tokens <= 0:
        raise UserError(f"max_tokens={max_tokens} must be a positive number of tokens")
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)  # ties in length then fall in a seed-dependent order
    # A stable sort by (source, target) length: np.lexsort's last key is the first one sorted by.
    # In numpy: this runs for every epoch on the batch thread, beside the GPU's kernel launches
    # (at 50k tokens a batch the lists' sort and loop cost ~3 ms a batch, the arrays' under 1:
    # benchmarks/collate_speed.py). The same batches in the same order (tested against the lists').
    size = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    ordered = np.asarray(order, dtype=np.int64)
    ordered = ordered[np.lexsort((size[ordered, 1], size[ordered, 0]))]
    src, tgt = size[ordered, 0], size[ordered, 1]
    batches: list[list[int]] = []
    start, window = 0, 64
    while start < len(ordered):
        end = _batch_end(src, tgt, start, window, max_tokens)
        batches.append(ordered[start:end].tolist())
        window = 2 * (end - start) + 1  # the next batch is about as long: look that far first
        start = end
    if shuffle:
        rng.shuffle(batches)
    return batches


def _batch_end(src: np.ndarray, tgt: np.ndarray, start: int, window: int, max_tokens: int) -> int:
    """Where the batch that begins at `start` of the sorted examples ends: before the first
    example that would take (max source + max target) x examples over max_tokens (never before
    start + 1). Looks `window` examples ahead, twice as far while none of them is over."""
    while True:
        stop = min(len(src), start + window)
        longest = np.maximum.accumulate(src[start:stop]) + np.maximum.accumulate(tgt[start:stop])
        over = np.flatnonzero(longest[1:] * np.arange(2, stop - start + 1) > max_tokens)
        if over.size:
            return start + 1 + int(over[0])
        if stop == len(src):
            return stop
        window *= 2


@dataclass
class Batch:
    """Padded tensors for one step of teacher forcing (§3.1, Figure 1).

    src      (B, S)  source ids, padded with pad_id
    tgt_in   (B, T)  decoder input: <s> followed by the target (the output "shifted right")
    tgt_out  (B, T)  what the decoder should predict: the target followed by </s>
    tgt_count        the non-pad tokens of tgt_out, counted on the host when collated (None:
                     counted from tgt_out when asked), so that a trainer knows them without
                     waiting for a GPU
    tgt_index (N,)   where they are: flat indices into tgt_out.view(-1), found on the host when
                     collated and moved with the batch, so that a loss projects those rows
                     alone without asking the GPU where they are (None: not found; padded())
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    pad_id: int = PAD
    tgt_count: int | None = field(default=None, repr=False)
    tgt_index: Tensor | None = field(default=None, repr=False)

    def _map(self, fn) -> Batch:
        """The batch with `fn` applied to each of its tensors."""
        index = None if self.tgt_index is None else fn(self.tgt_index)
        return Batch(fn(self.src), fn(self.tgt_in), fn(self.tgt_out), self.pad_id,
                     self.tgt_count, index)

    def pin_memory(self) -> Batch:
        """The batch in page-locked memory, from which a copy to a GPU can overlap compute."""
        return self._map(Tensor.pin_memory)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def padded(self, multiple: int) -> Batch:
        """The batch with its source and target lengths padded up to a multiple of `multiple`
        (pad_id columns), so that a compiled model sees a bounded set of shapes (train.
        pad_to_multiple); without tgt_index, whose length would vary with every batch: a loss
        then masks the padding instead. The same batch when `multiple` is 1."""
        if multiple <= 1:
            return self
        s_len, t_len = self.src.shape[1], self.tgt_out.shape[1]
        grow = (-s_len % multiple, -t_len % multiple)
        src, tgt_in, tgt_out = (torch.nn.functional.pad(t, (0, n), value=self.pad_id)
                                for t, n in ((self.src, grow[0]), (self.tgt_in, grow[1]),
                                             (self.tgt_out, grow[1])))
        return Batch(src, tgt_in, tgt_out, self.pad_id, self.tgt_count)

    def __len__(self) -> int:
        return self.src.size(0)

    @property
    def n_src_tokens(self) -> int:
        return int((self.src != self.pad_id).sum())

    @property
    def n_tgt_tokens(self) -> int:
        """Real target tokens (</s> included): what §5.4's loss is normalised by."""
        if self.tgt_count is not None:
            return self.tgt_count
        return int((self.tgt_out != self.pad_id).sum())

    def __repr__(self) -> str:
        shapes = ", ".join(f"{f.name}={tuple(getattr(self, f.name).shape)}"
                           for f in fields(self) if f.name not in ("pad_id", "tgt_count", "tgt_index"))
        return f"Batch({shapes}, n_tgt_tokens={self.n_tgt_tokens})"


@dataclass
class MaskedTokens:
    """A masked-LM batch (data/mlm.py): corrupted ids (B, T), labels (B, T) (IGNORE_INDEX where
    nothing is predicted), and where the predicted positions are, as Batch says its targets:
    flat indices (N,) into labels.view(-1) and their count, found on the host (of_labels)."""

    inputs: Tensor
    labels: Tensor
    index: Tensor
    tgt_count: int

    @classmethod
    def of_labels(cls, inputs: Tensor, labels: Tensor) -> MaskedTokens:
        index = (labels.reshape(-1) != IGNORE_INDEX).nonzero().view(-1)  # (N,) row-major
        return cls(inputs, labels, index, len(index))

    def pin_memory(self) -> MaskedTokens:
        return MaskedTokens(self.inputs.pin_memory(), self.labels.pin_memory(),
                            self.index.pin_memory(), self.tgt_count)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> MaskedTokens:
        return MaskedTokens(*(t.to(device, non_blocking=non_blocking)
                              for t in (self.inputs, self.labels, self.index)), self.tgt_count)


def pad_ids(seqs: Sequence[Sequence[int]], pad_id: int = PAD) -> torch.Tensor:
    """Right-padded (B, T_max) LongTensor of token-id lists (T_max >= 1)."""
    width = max(1, max((len(s) for s in seqs), default=1))
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out


def collate(pairs_ids: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int = PAD,
            bos_id: int = BOS, eos_id: int = EOS) -> Batch:
    """Pad a list of (source ids, target ids) into a Batch (ids without <s>/</s>), its target
    tokens counted and located here, on the host."""
    if not pairs_ids:
        raise UserError("collate: cannot build a batch from no examples")
    s_len = max(len(src) for src, _ in pairs_ids)
    t_len = max(len(tgt) for _, tgt in pairs_ids) + 1
    # Each row padded as a list, then one tensor per field: one call into torch, not 3 per row.
    src = torch.tensor([[*s, *[pad_id] * (s_len - len(s))] for s, _ in pairs_ids],
                       dtype=torch.long)  # (B, S)
    tgt_in = torch.tensor([[bos_id, *t, *[pad_id] * (t_len - 1 - len(t))] for _, t in pairs_ids],
                          dtype=torch.long)  # (B, T)
    tgt_out = torch.tensor([[*t, eos_id, *[pad_id] * (t_len - 1 - len(t))] for _, t in pairs_ids],
                           dtype=torch.long)  # (B, T)
    index = (tgt_out.view(-1) != pad_id).nonzero().view(-1)  # (N,) row-major
    return Batch(src, tgt_in, tgt_out, pad_id, len(index), index)


class PackedPairs:
    """A corpus of (source ids, target ids) pairs held as two flat tensors, so that a batch of
    them is collated by a dozen tensor ops instead of Python loops over its tokens.

    ``packed.collate(indices)`` is ``collate([pairs[i] for i in indices])``, tensor for tensor
    (tested). It is what the training stream calls for every batch, on the Prefetcher's thread:
    at the base config's ~700 pairs a batch (50k tokens) the lists cost ~8 ms of Python holding
    the GIL on a quiet core (~25 on a loaded one), the packed tensors ~1 ms
    (benchmarks/collate_speed.py), and the thread shares the interpreter with the one launching
    the GPU's kernels (STYLE.md: "a batch padded in Python while the GPU idles")."""

    def __init__(self, pairs_ids: Sequence[tuple[Sequence[int], Sequence[int]]],
                 pad_id: int = PAD, bos_id: int = BOS, eos_id: int = EOS):
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.src, self.src_start, self.src_len = self._flat([s for s, _ in pairs_ids])
        self.tgt, self.tgt_start, self.tgt_len = self._flat([t for _, t in pairs_ids])

    @staticmethod
    def _flat(seqs: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor, Tensor]:
        """(all ids end to end, each sequence's start in them, each one's length). The ids in
        int32 (a batch's are int64): half the memory of a large corpus's."""
        lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
        flat = torch.tensor([i for s in seqs for i in s], dtype=torch.int32)
        return flat, torch.cumsum(lengths, 0) - lengths, lengths

    def __len__(self) -> int:
        return len(self.src_len)

    def collate(self, indices: Sequence[int]) -> Batch:
        if len(indices) == 0:
            raise UserError("collate: cannot build a batch from no examples")
        idx = torch.as_tensor(indices, dtype=torch.long)
        s_len, t_len = self.src_len[idx], self.tgt_len[idx]  # (B,)
        width_s, width_t = int(s_len.max()), int(t_len.max()) + 1
        src = self._rows(self.src, self.src_start[idx], s_len, width_s)  # (B, S)
        body = self._rows(self.tgt, self.tgt_start[idx], t_len, width_t)  # (B, T): t, pad
        pos = torch.arange(width_t)
        # tgt_out = t, </s>, pad...; tgt_in = <s>, t, pad... (the output shifted right)
        tgt_out = body.masked_fill(pos == t_len[:, None], self.eos_id)
        tgt_in = torch.cat([torch.full((len(idx), 1), self.bos_id), body[:, :-1]], 1)
        # the non-pad targets, row-major: row b's first t_len[b] + 1 positions
        kept = t_len + 1
        starts = torch.repeat_interleave(torch.arange(len(idx)) * width_t, kept)
        firsts = torch.repeat_interleave(torch.cumsum(kept, 0) - kept, kept)
        index = starts + torch.arange(len(starts)) - firsts  # (N,)
        return Batch(src, tgt_in, tgt_out, self.pad_id, len(index), index)

    def _rows(self, flat: Tensor, start: Tensor, length: Tensor, width: int) -> Tensor:
        """(B, width): row b holds flat[start[b]:start[b] + length[b]], then pad_id."""
        pos = torch.arange(width)
        inside = pos < length[:, None]  # (B, width)
        if flat.numel() == 0:
            return torch.full(inside.shape, self.pad_id, dtype=torch.long)
        at = (start[:, None] + pos).clamp_(max=flat.numel() - 1)
        return flat[at].long().masked_fill_(~inside, self.pad_id)
