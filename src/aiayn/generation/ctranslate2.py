"""Decoding with CTranslate2 (`--engine ctranslate2`) under aiayn's search rules: CT2Decoder,
behind the decoder interface of aiayn's own search (aiayn.generation.decoder.Decoder).

    Translator.load(folder, engine="ctranslate2", compute_type="int8", inter_threads=2,
                    intra_threads=1).translate(sentences, beam=4)   # aiayn's search, CTranslate2's

The CT2Decoder drives a ctranslate2.Translator of the folder's CTranslate2 directory, which
aiayn.convert.ctranslate2_dir exports on first use and loads (load_decoder); this module needs
neither torch nor the PyTorch model, only the model's max_len.

aiayn's tokenizer and special ids stay: the source ids are given to CTranslate2 as the
directory's vocabulary strings (one per id) and its output strings are read back as ids. The
search is the one `Translator.translate` runs (§6.1), mapped onto CTranslate2's options:

- **Greedy** (beam 1): the same tokens.
- **Length limit** (§6.1: input + 50, at most max_len - 1): `max_decoding_length` per sentence,
  in aiayn's batches (sorted by length, batch_size each: the longest source of a batch leaves
  the room below max_len - 1). A search that stops by itself (greedy; first_k with |Y|^alpha)
  runs all sentences in one call to the widest limit, and again to its own limit only a
  sentence that did not end a step before it (the same search up to there); the others go in
  one call per limit. At the limit aiayn ends every live beam
  with </s> and adds its log-probability; CTranslate2 ends its K best candidates as they are.
  Such a hypothesis gets its </s> scored (score_batch) when it could win; the one difference
  left: a beam whose </s> came in the K best one step before the limit has a replacement that
  aiayn ends at the limit and CTranslate2 does not (a degenerate loop: 0-2 of 1,000 test
  sentences of a tiny model, tested).
- **Padding and <s>** are never emitted by aiayn. Greedy suppresses them (the same argmax);
  a beam does not, since CTranslate2's suppress_sequences renormalises the softmax over the
  rest and so changes the summed log-probabilities (a trained model gives them no mass).
- **Length penalty**: aiayn's GNMT ((5 + |Y|) / 6)^alpha (§6.1, the default) has no CTranslate2
  equivalent (its `length_penalty` is |Y|^alpha, with |Y| counting </s> only when
  return_end_token is set). So CTranslate2 returns every finished hypothesis with its score,
  its summed log-probability is recovered (score x |Y|^1, length_penalty=1 with </s> returned)
  and aiayn's penalty, GNMT or avg, ranks them. Ties: the higher score, then the shorter (the
  earlier finished, as aiayn's stable sort keeps it).
- **Stopping**: aiayn's default `exact` stops once no live hypothesis can beat the K-th best
  finished; CTranslate2 cannot test that, so it searches to a horizon (input + 10 tokens, then
  twice that, up to the limit), keeping every hypothesis (patience past any count of finished
  ones), and aiayn's test is made there: the best live beam is the best candidate CTranslate2
  cut at the horizon. Once it holds, the ranking above picks aiayn's best (a hypothesis that
  finishes later cannot beat it: the stopping bound). With alpha 0 CTranslate2's own early
  exit (the best beam ended) is exact and used. `first_k` (fairseq's:
  K finished) with avg is CTranslate2's patience 1; with GNMT, whose ranking CTranslate2 would
  cut to its K best by |Y|^alpha, the whole search again, cut where K had finished. The
  finished hypotheses of a beam do not depend on when it stops, so these are aiayn's own.
  `current_length` (HF's heuristic) has no equivalent and is refused. first_k with avg, the
  fast path, has one difference at the limit: CTranslate2 counts the hypotheses it cuts there
  as finished one step before aiayn would end them.
- **no_repeat_ngram_size**: CTranslate2's, for greedy (the same argmax); with a beam it is
  refused (CTranslate2 bans before its softmax, aiayn after, so the beam's scores differ).
- **min_length** (an imported model's own): aiayn sets </s> to -inf after the softmax;
  CTranslate2's min_decoding_length removes it before, renormalising the rest. Greedy passes
  it (the same argmax); a beam searches without it to the limit and drops hypotheses that
  ended too early (the live beams are the same either way: K beams have at most K </s>
  among their 2K best candidates).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from aiayn.errors import UserError


@contextlib.contextmanager
def _reported():
    """CTranslate2's runtime failures (a library it loads only when it first computes, a device
    out of memory) as one line."""
    try:
        yield
    except RuntimeError as e:
        hint = (" (CTranslate2 4.8's wheel runs on CUDA 12's cuBLAS: install it, e.g. pip install "
                "nvidia-cublas-cu12, or decode on the CPU)" if "libcublas" in str(e) else "")
        raise UserError(f"CTranslate2 failed: {e}{hint}") from None


def _check_mapped(beam: int, early_stopping: str, ngram: int, forced_first_id: int | None):
    """A one-line UserError for a search setting the engine does not map."""
    if early_stopping == "current_length" and beam > 1:
        # an imported model's generation_config.json sets it (early_stopping false) unasked
        raise UserError("the search's stopping rule current_length (HF's heuristic: "
                        "--early-stopping current_length, or an imported model's own "
                        "generation_config.json with early_stopping false) has no CTranslate2 "
                        "equivalent: pass --early-stopping exact or first_k")
    if ngram and beam > 1:
        raise UserError("--no-repeat-ngram-size with a beam is not mapped onto CTranslate2 (it "
                        "bans the n-grams before its softmax, aiayn after: the beam's scores "
                        "differ); greedy (--beam 1) is")
    if forced_first_id is not None:
        raise UserError("this model forces its first output token (an imported BART's "
                        "forced_bos_token_id, from its config.json), which is not mapped onto "
                        "CTranslate2: translate it with --engine torch")


class CT2Decoder:
    """Translator.translate's decoding by CTranslate2, a Decoder (aiayn.generation.decoder):
    `decode_ids` takes the options aiayn.generation.search.decode_ids takes and gives what it
    gives (token ids, no <s> / </s>, in input order); `score_ids` as TorchDecoder's."""

    def __init__(self, translator, tokens: Sequence[str], source_eos: bool,
                 compute_type: str = "default", target_tokens: Sequence[str] | None = None,
                 max_len: int | None = None, source_bos: bool = False,
                 threads: tuple[int, int] = (1, 0)):
        self.translator = translator  # a ctranslate2.Translator
        self.tokens = list(tokens)  # source id -> the directory's vocabulary string
        # ... and the target's (the same but for a separate target vocabulary, tgt_vocab_size)
        self.target_tokens = self.tokens if target_tokens is None else list(target_tokens)
        self.ids = {t: i for i, t in enumerate(self.target_tokens)}
        self.source_eos = source_eos  # CTranslate2 appends </s> itself (add_source_eos)
        self.source_bos = source_bos  # ... and puts <s> first (add_source_bos: BART)
        self.compute_type = compute_type
        self.threads = threads  # (inter_threads, intra_threads) it was loaded with
        self.max_len = max_len  # the model's positions (its config's max_len): the length limits

    def _source(self, ids: Sequence[int]) -> list[str]:
        if self.source_eos:  # the directory's add_source_eos puts it back
            ids = ids[:-1]
        if self.source_bos:  # and its add_source_bos
            ids = ids[1:]
        return [self.tokens[i] for i in ids]

    def decode_ids(self, src_ids: Sequence[Sequence[int]], *, beam: int = 4,
                   alpha: float = 0.6, length_penalty: str = "gnmt", batch_size: int = 64,
                   max_extra: int = 50, early_stopping: str = "exact",
                   no_repeat_ngram_size: int = 0, bos_id: int, eos_id: int, pad_id: int,
                   forced_first_id: int | None = None, min_length: int = 0,
                   max_new_tokens: int | None = None, forced_eos: bool = False,
                   counted_once: Sequence[int] = (), device: Any = None,
                   workers: Any = None) -> list[list[int]]:
        """See the module's doc for how each setting maps. device and workers: the CTranslate2
        translator's own (load_decoder); counted_once: the export has it already (an imported
        T5's or Marian's <pad> column biased out of its softmax)."""
        _check_mapped(beam, early_stopping, no_repeat_ngram_size, forced_first_id)
        max_len = self.max_len
        limits = dict(self._limits(src_ids, max_len, max_extra, max_new_tokens, batch_size))
        options = self._options(beam, alpha, length_penalty, early_stopping, min_length)
        first_k = options.pop("first_k", False)  # aiayn's first_k, applied to a whole search
        # aiayn never emits padding or <s>. CTranslate2's suppress_sequences removes them before
        # its softmax, which renormalises the others: greedy's argmax is the same, a beam's
        # summed log-probabilities are not; so a beam searches over the whole vocabulary, as
        # aiayn's does before its ban, and a trained model gives them no mass.
        banned = None if beam > 1 else [[self.target_tokens[pad_id]]] + (
            [[self.target_tokens[bos_id]]] if bos_id != eos_id else [])
        run = dict(options, beam_size=beam, suppress_sequences=banned, max_input_length=0,
                   no_repeat_ngram_size=no_repeat_ngram_size, return_scores=True,
                   return_end_token=True, min_decoding_length=min_length if beam == 1 else 0)
        sources = {i: self._source(src_ids[i][:max_len]) for i in limits}
        rank = dict(ct2_penalty=options["length_penalty"], alpha=alpha, kind=length_penalty,
                    eos_id=eos_id, cut=beam > 1 and not forced_eos)
        # aiayn's exact stop, tested on a shorter search first (_settled): most sentences end
        # well before input + 50
        stepwise = options.get("patience") == "limit" and not first_k and alpha >= 0
        # A search that stops by itself (greedy, patience 1) runs every sentence to the widest
        # limit in one call, which CTranslate2 batches as it likes (one call per limit made
        # batches of a few sentences: 0.5x CTranslate2 called directly, greedy, batch 64); a
        # sentence that did not end before its own limit is searched again to it (_ended_before).
        wide = options.get("patience") != "limit"
        widest = max(limits.values(), default=0)
        horizon = {i: min(limit, len(src_ids[i]) + 10) if stepwise else widest if wide else limit
                   for i, limit in limits.items()}
        ranked: dict[int, list[list]] = {}
        while horizon:
            found = self._search(sources, horizon, run, batch_size, rank)
            for i, hyps in found.items():
                if beam > 1 and min_length:  # aiayn's -inf on </s> before min_length
                    hyps = [h for h in hyps if len(h[1]) >= min_length]
                if horizon[i] == limits[i] or (wide and self._ended_before(hyps, limits[i])):
                    ranked[i] = hyps
                elif stepwise and self._settled(hyps, beam, alpha, length_penalty, limits[i],
                                                horizon[i]):
                    ranked[i] = [h for h in hyps if h[3]]  # those that ended in </s>
            horizon = {i: limits[i] if wide else min(limits[i], 2 * h)
                       for i, h in horizon.items() if i not in ranked}
        if first_k:
            ranked = {i: self._first_k(hyps, beam) for i, hyps in ranked.items()}
        self._score_cut(ranked, src_ids, alpha, length_penalty, batch_size)
        results: list[list[int]] = [[] for _ in src_ids]
        for i, hyps in ranked.items():
            results[i] = max(hyps, key=lambda h: h[0])[1] if hyps else []
        return results

    def _search(self, sources: dict[int, list[str]], horizon: dict[int, int], run: dict,
                batch_size: int, rank: dict) -> dict[int, list[list]]:
        """One CTranslate2 search of each sentence i to horizon[i] output tokens (sentences
        with one horizon in one call, the calls side by side on its inter_threads): per
        sentence its hypotheses, as _ranked gives them."""
        groups: dict[int, list[int]] = {}
        for i, h in horizon.items():
            groups.setdefault(h, []).append(i)
        pending = []
        for h, rows in sorted(groups.items()):
            options = dict(run)
            if options.get("patience") == "limit":  # past any count of finished hypotheses
                options.update(patience=h + 2, num_hypotheses=run["beam_size"] * (h + 1))
            pending.append((rows, self.translator.translate_batch(
                [sources[i] for i in rows], max_batch_size=batch_size, max_decoding_length=h,
                asynchronous=True, **options)))
        with _reported():
            return {i: self._ranked(result.result(), **rank)
                    for rows, batch in pending for i, result in zip(rows, batch, strict=True)}

    @staticmethod
    def _settled(hyps: list[list], k: int, alpha: float, kind: str, limit: int,
                 horizon: int) -> bool:
        """Whether aiayn's exact rule has stopped a search by `horizon` steps: K hypotheses
        ended in </s>, and the best live beam, its summed log-probability divided by the
        largest penalty (|Y| = limit + 1, alpha >= 0), cannot beat the K-th best. The best live
        beam is CTranslate2's best candidate cut at the horizon; when all K it kept there ended
        in </s>, the live ones came after them (a bound: the lowest of those)."""
        from aiayn.generation.beam import length_penalty

        ended = sorted((h[0][0] for h in hyps if h[3]), reverse=True)
        if len(ended) < k:
            return False
        cut = [h[4] for h in hyps if not h[3]]
        last = [h[4] for h in hyps if h[3] and len(h[1]) == horizon - 1]
        live = max(cut) if cut else min(last, default=float("-inf"))
        return live / length_penalty(limit + 1, alpha, kind) <= ended[k - 1]

    @staticmethod
    def _ended_before(hyps: list[list], limit: int) -> bool:
        """Whether a search that stops by itself ended before `limit` output tokens: then the
        same search to the limit, which matches aiayn's up to there, gives the same hypotheses.
        Every one ended in </s> with a step to spare (CTranslate2's last step is the limit's)."""
        return bool(hyps) and all(h[3] and len(h[1]) + 1 < limit for h in hyps)

    @staticmethod
    def _limits(src_ids, max_len: int, max_extra: int, max_new_tokens: int | None,
                batch_size: int):
        """(sentence, its output limit) as decode_ids sets them: §6.1's input + max_extra, in
        the batches it makes (sorted by length), whose longest source leaves the room below
        max_len - 1; empty sentences translate to nothing."""
        lengths = [min(len(s), max_len) for s in src_ids]
        todo = [i for i in sorted(range(len(src_ids)), key=lambda i: lengths[i]) if lengths[i]]
        cap = max_len - 1 if max_new_tokens is None else min(max_new_tokens, max_len - 1)
        for start in range(0, len(todo), batch_size):
            rows = todo[start:start + batch_size]
            extra = max(0, min(max_extra, max_len - 1 - max(lengths[i] for i in rows)))
            for i in rows:
                yield i, min(lengths[i] + extra, cap)

    @staticmethod
    def _options(beam: int, alpha: float, kind: str, early_stopping: str,
                 min_length: int = 0) -> dict[str, Any]:
        """CTranslate2's length_penalty, patience and num_hypotheses for aiayn's search (the
        module's doc); patience "limit": searched to the length limit; first_k: aiayn's
        first_k applied to that whole search (_first_k)."""
        if beam == 1 or (early_stopping == "exact" and alpha == 0 and not min_length):
            return {"length_penalty": 0.0, "num_hypotheses": 1}  # its early exit: exact here
        if early_stopping == "exact" or (kind == "gnmt" and alpha != 0) or min_length:
            return {"length_penalty": 1.0, "patience": "limit",
                    "first_k": early_stopping == "first_k"}
        # first_k with |Y|^alpha: CTranslate2's patience 1 (K finished) keeps the K best by
        # |Y|^length_penalty, </s> counted: aiayn's "avg". (A length_penalty of 0 would switch
        # CTranslate2 to its other stopping rule.)
        return {"length_penalty": alpha or 1e-9, "patience": 1, "num_hypotheses": beam}

    @staticmethod
    def _first_k(hyps: list[list], k: int) -> list[list]:
        """The hypotheses aiayn's first_k holds when it stops: those finished by the first step
        at which K have (a hypothesis of n tokens finished at step n). A beam's finished
        hypotheses do not depend on when it stops, so a whole search holds them all."""
        steps = sorted(len(h[1]) for h in hyps)
        if len(steps) < k:
            return hyps
        return [h for h in hyps if len(h[1]) <= steps[k - 1]]

    def _ranked(self, result, ct2_penalty: float, alpha: float, kind: str, eos_id: int,
                cut: bool) -> list[list]:
        """Each hypothesis as [aiayn's key, its ids, cut, ended in </s>, summed log-probability]:
        the key (score by aiayn's length penalty, then the shorter) from its summed
        log-probability, CTranslate2's score times |Y|^ct2_penalty (CTranslate2's length: </s>
        counted, return_end_token). With `cut`, a hypothesis CTranslate2 ended at the length
        limit has no </s>: its key is then a bound (aiayn adds log p(</s>) <= 0 there), until
        _score_cut scores it."""
        from aiayn.generation.beam import length_penalty

        out = []
        for tokens, score in zip(result.hypotheses, result.scores, strict=True):
            ids = [self.ids[t] for t in tokens]
            logprob = score * len(ids) ** ct2_penalty
            ended = bool(ids) and ids[-1] == eos_id
            if ended:
                ids = ids[:-1]
            n = len(ids) + 1  # aiayn's |Y| counts </s> (forced at the limit)
            out.append([(logprob / length_penalty(n, alpha, kind), -n), ids, cut and not ended,
                        ended, logprob])
        return out

    def _score_cut(self, ranked: dict[int, list[list]], src_ids, alpha: float, kind: str,
                   batch_size: int) -> None:
        """Score, with the </s> aiayn adds at the length limit, every cut hypothesis whose bound
        beats its sentence's best complete one (only those can win)."""
        from aiayn.generation.beam import length_penalty

        todo = []
        for i, hyps in ranked.items():
            complete = max((h[0] for h in hyps if not h[2]), default=None)
            todo += [(i, h) for h in hyps if h[2] and (complete is None or h[0] > complete)]
        if not todo:
            return
        scores = self.score_ids([(src_ids[i], h[1]) for i, h in todo], batch_size)
        for (_, h), scored in zip(todo, scores, strict=True):
            n = len(h[1]) + 1
            h[0], h[2] = (scored["logprob"] / length_penalty(n, alpha, kind), -n), False

    def score_ids(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
                  batch_size: int = 64) -> list[dict[str, float]]:
        """Teacher-forced log-likelihood of each (source ids, target ids) pair, as
        Translator.score gives it: {"logprob": over the target and </s>, "tokens": how many}."""
        with _reported():
            out = self.translator.score_batch([self._source(s) for s, _ in pairs],
                                              [[self.target_tokens[i] for i in t]
                                               for _, t in pairs],
                                              max_batch_size=batch_size, max_input_length=0)
        return [{"logprob": float(sum(r.log_probs)), "tokens": len(r.log_probs)} for r in out]


__all__ = ["CT2Decoder"]
