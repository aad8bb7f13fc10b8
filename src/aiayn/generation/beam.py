"""§6.1 beam search as a strategy of the one decode loop (aiayn.generation.loop), vectorised.

§6.1: beam size 4, length penalty alpha = 0.6, maximum output length = input length + 50, and
"terminate early when possible". Lessons from fairseq: only the first beam is live at step 0,
2 x beam candidates are scored so that finished (EOS) hypotheses cannot starve the beam, only
EOS among the top `beam` candidates is finalised, padding and BOS are never emitted.

Shapes: n live sentences, K beams, V vocabulary, N = n * K decoder rows (sentence-major), L the
longest allowed output. Every per-sentence quantity is a tensor row; a sentence that is done
leaves the batch (and, through the loop, the KV cache). Finished hypotheses are kept per
sentence as its K best so far, in (B, K) tensors: only those can be returned or matter for
stopping, so nothing is lost by dropping the rest as they are beaten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.generation.config import LENGTH_PENALTIES, GenerationConfig
from aiayn.generation.ngrams import ban_repeated_ngrams
from aiayn.generation.strategies import force_first, to_scores


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


class BeamSearch:
    """K hypotheses per sentence; max_len (B,) output tokens allowed per sentence (EOS not counted)."""

    def __init__(self, max_len: Tensor, config: GenerationConfig, banned: Sequence[int] = ()):
        b, k, device = max_len.shape[0], config.beam, max_len.device
        self.cfg, self.k, self.step = config, k, 0
        self.banned = sorted(set(banned))
        limits = max_len.tolist()
        self.sent = torch.arange(b, device=device)  # (n,) the batch row of each live sentence
        self.max_len = max_len  # (n,)
        self.min_limit = min(limits, default=0)  # the live sentences' shortest limit (host copy)
        # The largest penalty a live hypothesis can end with is at length max_len + 1 or at the
        # next step's length (penalties are monotone in |Y|); see _done.
        self.lp_end = torch.tensor([self._lp(m + 1) for m in limits], dtype=torch.float64,
                                   device=device)  # (n,)
        self.scores = torch.zeros(b, k, device=device)  # (n, K) summed log-probs of live beams
        self.scores[:, 1:] = float("-inf")  # step 0: only the first beam is live (all are equal)
        self.tokens = torch.zeros(b * k, 0, dtype=torch.long, device=device)  # (N, t), no BOS
        width = max(limits, default=0)
        self.fin_score = torch.full((b, k), float("-inf"), dtype=torch.float64, device=device)
        self.fin_logprob = torch.full((b, k), float("-inf"), dtype=torch.float64, device=device)
        self.fin_len = torch.zeros(b, k, dtype=torch.long, device=device)
        self.fin_tokens = torch.full((b, k, width), config.pad_id, dtype=torch.long, device=device)

    def _lp(self, length: int) -> float:
        return length_penalty(length, self.cfg.alpha, self.cfg.length_penalty)

    def _lprobs(self, logits: Tensor) -> Tensor:
        """(N, V) log-probabilities with the rules applied: ids counted once in the softmax
        (before it), banned tokens, repeated n-grams, min/max length (after it)."""
        cfg, v = self.cfg, logits.shape[-1]
        lprobs = to_scores(logits, log_probs=True, counted_once=cfg.counted_once)
        if self.banned:
            lprobs[:, self.banned] = float("-inf")
        if cfg.no_repeat_ngram_size:  # self.tokens (N, step): each beam's output so far
            ban_repeated_ngrams(lprobs, self.tokens, cfg.no_repeat_ngram_size)
        if self.step < cfg.min_length:
            lprobs[:, cfg.eos_id] = float("-inf")
        if self.step == 0 and cfg.forced_first_id is not None:
            force_first(lprobs, cfg.forced_first_id)
        if self.step >= self.min_limit:  # §6.1 maximum length: at the limit only EOS may follow
            at_limit = (self.max_len <= self.step).repeat_interleave(self.k)  # (N,)
            not_eos = torch.arange(v, device=logits.device) != cfg.eos_id  # (V,)
            lprobs.masked_fill_(at_limit[:, None] & not_eos, float("-inf"))
            if cfg.forced_eos:  # transformers' forced_eos_token_id: </s> forced, scored 0
                lprobs[:, cfg.eos_id].masked_fill_(at_limit, 0.0)
        return lprobs

    def advance(self, logits: Tensor) -> tuple[Tensor | None, Tensor | None]:
        """logits (N, V) -> (decoder rows to keep (N',), next tokens (N', 1)), or (None, None).
        The first step has one decoder row per sentence (its K beams are alike: only the first
        is live), N = n; every later step K per sentence, N = n x K."""
        k, n = self.k, self.scores.shape[0]
        first = self.step == 0 and logits.shape[0] == n and k > 1
        if first:  # the one row of each sentence stands for its K beams
            logits = logits.repeat_interleave(k, dim=0)
        lprobs = self._lprobs(logits)
        v = lprobs.shape[-1]
        # In place: lprobs is this step's own (N, V) tensor (_lprobs makes it), the largest of a
        # step after the logits; one more per step cost an allocation and a pass (without it
        # beam 4 decoded 1.04-1.11x as fast: benchmarks/RESULTS.md, "Decoding in one process").
        cand = lprobs.add_(self.scores.view(-1, 1)).view(n, k * v)
        cand_scores, cand_idx = cand.topk(min(2 * k, k * v), dim=1)  # (n, 2K), best first
        cand_beam, cand_tok = cand_idx // v, cand_idx % v
        kth_best = self._finalise(cand_scores[:, :k], cand_beam[:, :k], cand_tok[:, :k])
        # Next beams: the best k candidates that did not end in EOS.
        c = cand_scores.shape[1]
        rank = torch.arange(c, device=logits.device).expand(n, c)
        rank = torch.where(cand_tok == self.cfg.eos_id, rank + c, rank)
        keep = rank.topk(k, dim=1, largest=False).values % c  # (n, K), best first
        self.scores = cand_scores.gather(1, keep)
        rows = (torch.arange(n, device=logits.device)[:, None] * k + cand_beam.gather(1, keep)).view(-1)
        if first:  # every beam continues its sentence's one decoder row
            rows = rows // k
        new = cand_tok.gather(1, keep).view(-1, 1)  # (N, 1)
        self.tokens = torch.cat([self.tokens.index_select(0, rows), new], dim=1)
        done = self._done(kth_best)
        self.step += 1
        live = (~done).nonzero().squeeze(1)  # (n',): the step's one host sync
        if live.numel() == 0:
            return None, None
        if live.numel() < n:  # done sentences leave the batch, their beams the cache
            beams = (live[:, None] * k + torch.arange(k, device=live.device)).view(-1)  # (N',)
            rows, new, self.tokens = rows[beams], new[beams], self.tokens[beams]
            self.scores, self.sent = self.scores[live], self.sent[live]
            self.max_len, self.lp_end = self.max_len[live], self.lp_end[live]
            self.min_limit = int(self.max_len.min())
        return rows, new

    def _finalise(self, scores: Tensor, beam: Tensor, tok: Tensor) -> Tensor:
        """EOS among each sentence's top K candidates (n, K) become finished hypotheses; merge
        them into its K best finished. Returns the K-th best finished score (n,) (-inf: fewer)."""
        n, k = scores.shape
        is_eos = (tok == self.cfg.eos_id) & torch.isfinite(scores)
        # All of this step's hypotheses have |Y| = step tokens + EOS: one penalty.
        new_score = torch.where(is_eos, scores.double() / self._lp(self.step + 1), float("-inf"))
        prefix = self.tokens.view(n, k, self.step).gather(
            1, beam[..., None].expand(n, k, self.step))  # (n, K, step): the beams EOS followed
        width = self.fin_tokens.shape[2]
        new_tokens = torch.nn.functional.pad(prefix, (0, width - self.step), value=self.cfg.pad_id)
        s = self.sent
        all_score = torch.cat([self.fin_score[s], new_score], dim=1)  # (n, 2K)
        # Stable: among equal scores, the earlier finished first (as a list sorted at the end).
        order = all_score.sort(dim=1, descending=True, stable=True).indices[:, :k]  # (n, K)
        self.fin_score[s] = all_score.gather(1, order)
        all_logprob = torch.cat([self.fin_logprob[s], scores.double()], 1)
        self.fin_logprob[s] = all_logprob.gather(1, order)
        lengths = torch.cat([self.fin_len[s], torch.full_like(tok, self.step)], 1)
        self.fin_len[s] = lengths.gather(1, order)
        all_tokens = torch.cat([self.fin_tokens[s], new_tokens], 1)  # (n, 2K, L)
        self.fin_tokens[s] = all_tokens.gather(1, order[..., None].expand(n, k, width))
        return self.fin_score[s][:, k - 1]

    def _done(self, kth_best: Tensor) -> Tensor:
        """§6.1 "terminate early when possible": a sentence is done once it has K finished
        hypotheses and no live one can still beat the K-th best of them. A live log-probability
        only falls as tokens are added, and its final length lies in [step + 2, max_len + 1], so
        dividing it by the largest penalty over that range bounds its final score. (Stopping at
        K finished alone, fairseq's rule, can return a hypothesis far worse than greedy's when
        unlikely beams end early.) At the length limit nothing stays live. -> (n,) bool.

        That is `early_stopping="exact"`. With a length penalty that grows as fast as |Y| ("avg",
        alpha 1) the bound is loose and sentences run to their length limit; the two cheaper
        rules: "first_k" stops at K finished (fairseq), "current_length" divides the best live
        log-probability by the penalty of ending at the next step (HF transformers' default)."""
        at_limit = self.max_len <= self.step
        rule = self.cfg.early_stopping
        if rule == "first_k":
            return torch.isfinite(kth_best) | at_limit
        if rule == "current_length":
            lp = self._lp(self.step + 2)
        else:
            lp = self.lp_end.clamp(min=self._lp(self.step + 2))  # (n,) the largest penalty
        best_live = self.scores[:, 0].double() / lp
        return (torch.isfinite(kth_best) & (best_live <= kth_best)) | at_limit

    def hypotheses(self) -> list[list[Hypothesis]]:
        """Per sentence, its finished hypotheses, best first (up to K)."""
        scores, logprobs = self.fin_score.tolist(), self.fin_logprob.tolist()
        lengths, tokens = self.fin_len.tolist(), self.fin_tokens.tolist()
        return [[Hypothesis(tokens[i][j][:lengths[i][j]], scores[i][j], logprobs[i][j])
                 for j in range(self.k) if scores[i][j] > float("-inf")]
                for i in range(len(scores))]


__all__ = ["BeamSearch", "Hypothesis", "length_penalty"]
