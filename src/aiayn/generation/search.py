"""Greedy, sampled and §6.1 beam search for the encoder-decoder, over the one decode loop.

The model interface used here (aiayn.models.Transformer has it; test doubles can too):
    model.encode(src, src_mask) -> memory
    model.new_cache() -> a cache with .reorder(indices)
    model.decode(tgt_new, memory, src_mask, cache) -> logits (B, T_new, V)
EncoderDecoderStep (aiayn.generation.steps) turns it into step(new_tokens, cache) -> logits; the
strategies (Sampler, BeamSearch) choose tokens; aiayn.generation.loop runs them.

§6.1: maximum output length = input length + 50 (`max_extra`); padding and BOS are never emitted.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.errors import ConfigError
from aiayn.generation.beam import BeamSearch, Hypothesis, length_penalty
from aiayn.generation.config import LENGTH_PENALTIES, GenerationConfig
from aiayn.generation.loop import run
from aiayn.generation.steps import EncoderDecoderStep
from aiayn.generation.strategies import Sampler


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


__all__ = ["LENGTH_PENALTIES", "GenerationConfig", "Hypothesis", "beam_search",
           "beam_search_hypotheses", "greedy_search", "length_penalty", "search",
           "search_hypotheses"]
