"""Greedy and beam search for the encoder-decoder (§6.1), each one loop that owns the KV cache.

The model interface used here (aiayn.models.Transformer has it; test doubles can too):
    model.encode(src, src_mask) -> memory
    model.new_cache() -> a cache with .reorder(indices)
    model.decode(tgt_new, memory, src_mask, cache) -> logits (B, T_new, V)

§6.1: beam size 4, length penalty alpha = 0.6, maximum output length = input length + 50, and
"terminate early when possible". Lessons from fairseq: only the first beam is live at step 0,
2 x beam candidates are scored so that finished (EOS) hypotheses cannot starve the beam, only
EOS among the top `beam` candidates is finalised, padding and BOS are never emitted.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.masks import padding_mask

LENGTH_PENALTIES = ("gnmt", "avg")


def length_penalty(length: int, alpha: float, kind: str = "gnmt") -> float:
    """The divisor of a hypothesis' summed log-probability.

    gnmt: ((5 + |Y|) / 6) ** alpha, Wu et al. 2016, the form §6.1 cites.
    avg:  |Y| ** alpha (fairseq's --lenpen and HF's length_penalty; alpha=1 is the mean log-prob).
    |Y| counts the output tokens including the final EOS.
    """
    if kind == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if kind == "avg":
        return float(length) ** alpha
    raise ValueError(f"length_penalty={kind!r}: must be one of {', '.join(LENGTH_PENALTIES)}")


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # summed log-probability (incl. EOS) / length penalty
    logprob: float  # summed log-probability (incl. EOS)


def _max_lengths(src: Tensor, pad_id: int, max_extra: int) -> Tensor:
    """§6.1: at most input length + max_extra output tokens (EOS not counted), per source row."""
    return (src != pad_id).sum(dim=1) + max_extra


def _step_logprobs(model, tokens: Tensor, memory: Tensor, src_mask: Tensor, cache,
                   banned: tuple[int, ...]) -> Tensor:
    logits = model.decode(tokens[:, -1:], memory, src_mask, cache)[:, -1]  # (N, V)
    lprobs = torch.log_softmax(logits.float(), dim=-1)
    lprobs[:, list(banned)] = float("-inf")  # never emit padding or BOS
    return lprobs


@torch.no_grad()
def greedy_search(model, src: Tensor, *, bos_id: int, eos_id: int, pad_id: int,
                  max_extra: int = 50) -> list[list[int]]:
    """Most likely next token at each step. src (B, S) -> B token lists without BOS/EOS."""
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    max_len = _max_lengths(src, pad_id, max_extra)
    cache = model.new_cache()
    b = src.shape[0]
    tokens = torch.full((b, 1), bos_id, dtype=torch.long, device=src.device)
    out: list[list[int]] = [[] for _ in range(b)]
    running = torch.ones(b, dtype=torch.bool, device=src.device)
    for step in range(int(max_len.max())):
        lprobs = _step_logprobs(model, tokens, memory, src_mask, cache, (pad_id, bos_id))
        next_tok = lprobs.argmax(dim=-1)  # (B,)
        for i in running.nonzero().flatten().tolist():
            if next_tok[i].item() == eos_id:
                running[i] = False
            else:
                out[i].append(next_tok[i].item())
                if step + 1 >= max_len[i]:
                    running[i] = False
        if not running.any():
            break
        tokens = torch.cat([tokens, next_tok[:, None]], dim=1)
    return out


@torch.no_grad()
def beam_search_hypotheses(model, src: Tensor, *, beam: int = 4, alpha: float = 0.6,
                           length_penalty_kind: str = "gnmt", bos_id: int, eos_id: int,
                           pad_id: int, max_extra: int = 50) -> list[list[Hypothesis]]:
    """All finished hypotheses per source row, best first (up to `beam` each)."""
    length_penalty(1, alpha, length_penalty_kind)  # validate the kind before any work
    b, k = src.shape[0], beam
    device = src.device
    src_mask = padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    max_len = _max_lengths(src, pad_id, max_extra).tolist()
    rows = torch.arange(b, device=device).repeat_interleave(k)  # (B*K,) beam rows per source
    memory, src_mask = memory.index_select(0, rows), src_mask.index_select(0, rows)
    cache = model.new_cache()
    tokens = torch.full((b * k, 1), bos_id, dtype=torch.long, device=device)
    scores = torch.zeros(b, k, device=device)
    scores[:, 1:] = float("-inf")  # step 0: only the first beam is live (all beams are equal)
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    done = [False] * b
    for step in range(max(max_len) + 1):
        lprobs = _step_logprobs(model, tokens, memory, src_mask, cache, (pad_id, bos_id))
        v = lprobs.shape[-1]
        for i in range(b):  # at the length limit only EOS may follow
            if step >= max_len[i]:
                eos_lp = lprobs[i * k:(i + 1) * k, eos_id].clone()
                lprobs[i * k:(i + 1) * k] = float("-inf")
                lprobs[i * k:(i + 1) * k, eos_id] = eos_lp
        cand = (scores.view(-1, 1) + lprobs).view(b, k * v)
        cand_scores, cand_idx = cand.topk(min(2 * k, k * v), dim=1)  # (B, 2K)
        cand_beam, cand_tok = cand_idx // v, cand_idx % v
        _finalise(finished, done, cand_scores, cand_beam, cand_tok, tokens, k, eos_id, alpha,
                  length_penalty_kind)
        # Next beams: the best k candidates that did not end in EOS.
        rank = torch.arange(2 * k, device=device).expand(b, 2 * k)
        rank = torch.where(cand_tok == eos_id, rank + 2 * k, rank)
        keep = rank.topk(k, dim=1, largest=False).values % (2 * k)  # (B, K), best first
        scores = cand_scores.gather(1, keep)
        _early_stop(finished, done, scores, step, max_len, k, alpha, length_penalty_kind)
        if all(done):
            break
        src_rows = (torch.arange(b, device=device)[:, None] * k + cand_beam.gather(1, keep)).view(-1)
        cache.reorder(src_rows)
        tokens = torch.cat([tokens.index_select(0, src_rows), cand_tok.gather(1, keep).view(-1, 1)], 1)
    for hyps in finished:
        hyps.sort(key=lambda h: h.score, reverse=True)
        del hyps[k:]  # the k best (more may have finished while a live one could still win)
    return finished


def _finalise(finished, done, cand_scores, cand_beam, cand_tok, tokens, k, eos_id, alpha, lp_kind):
    """Move EOS candidates among each row's top k into that row's finished list."""
    eos_pos = (cand_tok[:, :k] == eos_id) & torch.isfinite(cand_scores[:, :k])
    for i, j in eos_pos.nonzero().tolist():
        if done[i]:
            continue
        prefix = tokens[i * k + cand_beam[i, j].item(), 1:].tolist()
        logprob = cand_scores[i, j].item()
        score = logprob / length_penalty(len(prefix) + 1, alpha, lp_kind)
        finished[i].append(Hypothesis(prefix, score, logprob))


def _early_stop(finished, done, scores, step, max_len, k, alpha, lp_kind):
    """§6.1 "terminate early when possible": a row is done once it has k finished hypotheses
    and no live one can still beat the k-th best of them. A live log-probability only falls as
    tokens are added, and its final length lies in [step + 2, max_len + 1], so dividing it by the
    largest penalty over that range bounds its final score. (Stopping at k finished alone,
    fairseq's rule, can return a hypothesis far worse than greedy's when unlikely beams end
    early.)"""
    for i in range(len(finished)):
        if done[i] or len(finished[i]) < k:
            continue
        kth_best = sorted((h.score for h in finished[i]), reverse=True)[k - 1]
        lp = max(length_penalty(n, alpha, lp_kind) for n in (step + 2, max_len[i] + 1))
        best_live = scores[i, 0].item() / lp
        if best_live <= kth_best:
            done[i] = True


def beam_search(model, src: Tensor, *, beam: int = 4, alpha: float = 0.6,
                length_penalty: str = "gnmt", bos_id: int, eos_id: int, pad_id: int,
                max_extra: int = 50) -> list[list[int]]:
    """§6.1 beam search. src (B, S) -> the best hypothesis per row, without BOS/EOS."""
    hyps = beam_search_hypotheses(model, src, beam=beam, alpha=alpha,
                                  length_penalty_kind=length_penalty, bos_id=bos_id,
                                  eos_id=eos_id, pad_id=pad_id, max_extra=max_extra)
    return [h[0].tokens if h else [] for h in hyps]
