"""Greedy, sampled and §6.1 beam search for the encoder-decoder, over the one decode loop.

The model interface used here (aiayn.models.Transformer has it; test doubles can too):
    model.encode(src, src_mask) -> memory
    model.new_cache() -> a cache with .reorder(indices)
    model.decode(tgt_new, memory, src_mask, cache) -> logits (B, T_new, V)
EncoderDecoderStep (aiayn.generation.steps) turns it into step(new_tokens, cache) -> logits; the
strategies (Sampler, BeamSearch) choose tokens; aiayn.generation.loop runs them.

§6.1: maximum output length = input length + 50 (`max_extra`); padding and BOS are never emitted.
decode_ids decodes many sentences of token ids: sorted by length into batches (little padding),
optionally by several CPU processes (workers.py), and put back in the caller's order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.data.batching import pad_ids
from aiayn.data.special import BOS, EOS, PAD
from aiayn.errors import ConfigError
from aiayn.generation.beam import BeamSearch, Hypothesis, length_penalty
from aiayn.generation.config import LENGTH_PENALTIES, GenerationConfig
from aiayn.generation.loop import run
from aiayn.generation.steps import EncoderDecoderStep
from aiayn.generation.strategies import Sampler
from aiayn.generation.workers import map_batches, resolve_workers


def _max_lengths(src: Tensor, config: GenerationConfig) -> Tensor:
    """§6.1: at most input length + max_extra output tokens (EOS not counted), per source row,
    and at most max_new_tokens when set. -> (B,)"""
    n = (src != config.pad_id).sum(dim=1) + config.max_extra
    return n if config.max_new_tokens is None else n.clamp(max=config.max_new_tokens)


def _check(src: Tensor, config: GenerationConfig) -> None:
    if not isinstance(config, GenerationConfig):
        raise TypeError(f"config must be a GenerationConfig, got {type(config).__name__}")
    if src.dim() != 2:
        raise ConfigError(f"src must be (batch, length) token ids, got shape {tuple(src.shape)}")
    if config.eos_id is None:
        raise ConfigError("eos_id=None: an encoder-decoder needs an end-of-sequence token")


@torch.no_grad()
def _start(model, src: Tensor, config: GenerationConfig, beam: bool):
    """The adapter, an encoded cache, the strategy (beam search or Sampler) and the first input."""
    step = EncoderDecoderStep(model)
    cache = step.start(src, config.pad_id)
    # Never emit padding or BOS; but fairseq's models start the decoder with </s> itself (BOS =
    # EOS), which must stay possible as an output.
    start = () if config.bos_id == config.eos_id else (config.bos_id,)
    banned = (config.pad_id, *start, *config.banned)
    max_len = _max_lengths(src, config)
    if beam:
        cache.repeat(config.beam)  # K decoder rows per sentence, sentence-major
        strategy = BeamSearch(max_len, config, banned)
    else:
        generator = None
        if config.seed is not None:
            generator = torch.Generator(device=src.device).manual_seed(config.seed)
        # Log-probabilities, as beam search scores them: beam 1 picks exactly greedy's tokens.
        strategy = Sampler(max_len, config, banned, log_probs=True, generator=generator)
    # One row per sentence at the first step, beams or not (a beam search's K beams all start
    # from BOS; BeamSearch makes K rows of each after it).
    bos = torch.full((src.shape[0], 1), config.bos_id, dtype=torch.long, device=src.device)
    return step, cache, strategy, bos


def search(model, src: Tensor, config: GenerationConfig) -> list[list[int]]:
    """src (B, S) -> per row the output tokens without BOS/EOS: beam search's best hypothesis
    (config.beam > 1), greedy (temperature 0) or a sample (temperature > 0)."""
    _check(src, config)
    step, cache, strategy, bos = _start(model, src, config, beam=config.strategy == "beam")
    run(step, cache, strategy, bos)
    if isinstance(strategy, BeamSearch):
        return [h[0].tokens if h else [] for h in strategy.hypotheses()]
    return strategy.results()


def search_hypotheses(model, src: Tensor, config: GenerationConfig) -> list[list[Hypothesis]]:
    """All finished hypotheses per source row, best first (up to config.beam each; a beam
    search even for beam 1, whose one hypothesis is greedy's with its score)."""
    _check(src, config)
    step, cache, strategy, bos = _start(model, src, config, beam=True)
    run(step, cache, strategy, bos)
    return strategy.hypotheses()


def greedy_search(model, src: Tensor, *, bos_id: int, eos_id: int, pad_id: int,
                  max_extra: int = 50) -> list[list[int]]:
    """Most likely next token at each step. src (B, S) -> B token lists without BOS/EOS."""
    config = GenerationConfig(bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, max_extra=max_extra)
    return search(model, src, config)


def beam_search_hypotheses(model, src: Tensor, *, beam: int = 4, alpha: float = 0.6,
                           length_penalty_kind: str = "gnmt", bos_id: int, eos_id: int,
                           pad_id: int, max_extra: int = 50,
                           early_stopping: str = "exact") -> list[list[Hypothesis]]:
    """All finished hypotheses per source row, best first (up to `beam` each)."""
    config = GenerationConfig(beam=beam, alpha=alpha, length_penalty=length_penalty_kind,
                              bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, max_extra=max_extra,
                              early_stopping=early_stopping)
    return search_hypotheses(model, src, config)


def beam_search(model, src: Tensor, *, beam: int = 4, alpha: float = 0.6,
                length_penalty: str = "gnmt", bos_id: int, eos_id: int, pad_id: int,
                max_extra: int = 50, early_stopping: str = "exact") -> list[list[int]]:
    """§6.1 beam search. src (B, S) -> the best hypothesis per row, without BOS/EOS."""
    config = GenerationConfig(beam=beam, alpha=alpha, length_penalty=length_penalty,
                              bos_id=bos_id, eos_id=eos_id, pad_id=pad_id, max_extra=max_extra,
                              early_stopping=early_stopping)
    hyps = search_hypotheses(model, src, config)
    return [h[0].tokens if h else [] for h in hyps]


# -- many sentences -------------------------------------------------------------------------

def decode_ids(model, src_ids: Sequence[Sequence[int]], *, beam: int = 4, alpha: float = 0.6,
               length_penalty: str = "gnmt", batch_size: int = 64, max_extra: int = 50,
               device: str | torch.device = "cpu",
               early_stopping: str = "exact", workers: int | str = 1,
               no_repeat_ngram_size: int = 0, bos_id: int = BOS, eos_id: int = EOS,
               pad_id: int = PAD, forced_first_id: int | None = None, min_length: int = 0,
               max_new_tokens: int | None = None, forced_eos: bool = False,
               counted_once: Sequence[int] = ()) -> list[list[int]]:
    """Token ids in -> token ids out (no BOS/EOS), in input order. beam=1 is greedy search.
    bos_id / eos_id / pad_id: the decoder's first input, its end and the padding (aiayn's by
    default; an imported model's own, e.g. BART's decoder starts from </s> and pads with 1);
    forced_first_id: every output's first token (BART's forced_bos_token_id), kept in it;
    min_length / max_new_tokens: EOS not before that many tokens, at most that many, and
    forced_eos: EOS scored 0 at the limit (an imported model's own generation_config.json).
    counted_once: ids left out of the softmax, as another id's row repeats theirs (an imported
    T5's or Marian's <pad>, also its <s>: Translator.search_ids).
    no_repeat_ngram_size n > 0: no n-gram twice in an output (fairseq's and HF's option).
    workers > 1: the batches are decoded by that many CPU processes at once (same outputs;
    aiayn.generation.workers); "auto": one per CPU thread on a Linux CPU, else 1.

    The output of each sentence is at most len(src) + max_extra tokens (§6.1: input + 50), and
    never longer than the model's positions allow (max_len - 1, leaving room for BOS). That cap
    is per batch (its longest source), so only a sentence within max_extra tokens of max_len can
    get a different (shorter) limit in another batch.
    """
    # Checked here, before any batch is decoded (GenerationConfig names the bad parameter).
    config = GenerationConfig(beam=beam, alpha=alpha, length_penalty=length_penalty,
                              early_stopping=early_stopping, bos_id=bos_id, eos_id=eos_id,
                              pad_id=pad_id, max_extra=max_extra, forced_first_id=forced_first_id,
                              no_repeat_ngram_size=no_repeat_ngram_size, min_length=min_length,
                              max_new_tokens=max_new_tokens, forced_eos=forced_eos,
                              counted_once=tuple(counted_once))
    if batch_size < 1:
        raise ConfigError(f"batch_size={batch_size}: must be a positive integer")
    max_len = model.config.max_len
    src_ids = [list(s)[:max_len] for s in src_ids]  # longer inputs are truncated
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    results: list[list[int]] = [[] for _ in src_ids]
    todo = [i for i in order if src_ids[i]]  # an empty sentence translates to nothing
    workers = resolve_workers(workers, device)
    model.eval()

    def translate_batch(rows: list[int]) -> list[list[int]]:
        src = pad_ids([src_ids[i] for i in rows], pad_id).to(device)
        # Positions 0..max_len-1 hold BOS and at most max_len - 1 output tokens (also for a
        # source of max_len tokens, which leaves max_extra no room).
        extra = max(0, min(max_extra, max_len - 1 - src.shape[1]))
        cap = max_len - 1 if config.max_new_tokens is None else min(config.max_new_tokens,
                                                                     max_len - 1)
        return search(model, src, config.replace(max_extra=extra, max_new_tokens=cap))

    batches = [todo[start:start + batch_size] for start in range(0, len(todo), batch_size)]
    for rows, out in zip(batches, map_batches(translate_batch, batches, workers), strict=True):
        for i, tokens in zip(rows, out, strict=True):
            results[i] = tokens
    return results


__all__ = ["LENGTH_PENALTIES", "GenerationConfig", "Hypothesis", "beam_search",
           "beam_search_hypotheses", "decode_ids", "greedy_search", "length_penalty", "search",
           "search_hypotheses"]
