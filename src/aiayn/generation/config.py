"""How to generate: one typed config for every model family and every strategy.

    GenerationConfig(beam=4, alpha=0.6)              # §6.1 beam search (translation)
    GenerationConfig(temperature=0.8, top_k=40)      # sampling (language models)
    GenerationConfig()                               # greedy: the most likely token each step

The strategy follows from the fields: beam > 1 is beam search, otherwise temperature 0 is greedy
and temperature > 0 is sampling. Every check raises ValueError (aiayn's ConfigError) naming the
Python parameter and its value, e.g. "beam=0: must be a positive integer".
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field

from aiayn.config import Config
from aiayn.data.special import BOS, EOS, PAD
from aiayn.errors import ConfigError
from aiayn.generation.sampling import check_options

LENGTH_PENALTIES = ("gnmt", "avg")
EARLY_STOPPING = ("exact", "first_k", "current_length")
# The widest beam: §6.1 uses 4, and studies of wide beams stop around 1,000. Every beam is a row
# of the batch, so a larger value is a typo that stalls the search (beam 100000 had not
# translated "1 2" with a tiny model after 20 s).
MAX_BEAM = 1024


def _fail(name: str, value: typing.Any, why: str) -> typing.NoReturn:
    raise ConfigError(f"{name}={value!r}: {why}")


@dataclass
class GenerationConfig(Config):
    """Strategy, lengths and special tokens of one generation call (defaults: greedy, §6.1 limits)."""

    beam: int = field(default=1, metadata={
        "help": "§6.1 uses 4; 1 = greedy (or sampling when temperature > 0)"})
    alpha: float = field(default=0.6, metadata={"help": "§6.1 length-penalty strength"})
    length_penalty: str = field(default="gnmt", metadata={
        "help": '"gnmt": ((5+|Y|)/6)^alpha (§6.1, Wu et al.); "avg": |Y|^alpha'})
    # When a sentence's beam search stops (§6.1 "terminate early when possible"); see BeamSearch:
    # "exact": no live hypothesis can still beat the K-th best finished one (never worse);
    # "first_k": K hypotheses have finished (fairseq); "current_length": no live hypothesis
    # beats the K-th best finished if it ended now (HF transformers' default heuristic).
    early_stopping: str = field(default="exact", metadata={
        "help": "when a beam stops: exact | first_k (fairseq) | current_length (HF)"})
    temperature: float = field(default=0.0, metadata={
        "help": "0 = argmax; > 0 = draw from softmax(logits / temperature)"})
    top_k: int | None = field(default=None, metadata={
        "help": "sampling: keep the k most likely tokens"})
    top_p: float | None = field(default=None, metadata={
        "help": "sampling: keep the smallest set reaching probability p"})
    seed: int | None = field(default=None, metadata={
        "help": "sampling: a seeded torch.Generator, for reproducible draws"})
    max_new_tokens: int | None = field(default=None, metadata={
        "help": "a cap on new tokens (a language model's only limit)"})
    max_extra: int = field(default=50, metadata={
        "help": "§6.1 encoder-decoder: at most input length + max_extra tokens"})
    min_length: int = field(default=0, metadata={
        "help": "EOS is not allowed before this many new tokens"})
    # No n-gram of this size twice in an output (fairseq/HF; not the paper's): 0 = off. Beam
    # search and encoder-decoders count the output tokens; language models the prompt as well.
    no_repeat_ngram_size: int = field(default=0, metadata={
        "help": "no n-gram of this size twice in an output (fairseq/HF); 0 = off"})
    bos_id: int = field(default=BOS, metadata={"help": "the token every output starts from (<s>)"})
    eos_id: int | None = field(default=EOS, metadata={
        "help": "None: no token ends a row (language models may run to the cap)"})
    pad_id: int = field(default=PAD, metadata={
        "help": "the padding token's id: fills rows that have ended"})
    # Not in the paper: BART fine-tuned on targets that start with <s> (its decoder reads
    # </s> <s> ...), and transformers forces that first token (forced_bos_token_id): every other
    # token gets -inf, the forced one log-probability 0, so it adds nothing to a beam's score.
    forced_first_id: int | None = field(default=None, metadata={
        "help": "the first output token, whatever the model says (BART's forced_bos_token_id)"})
    # transformers' forced_eos_token_id: at the length limit </s> is forced and scored as
    # log-probability 0, not its own; only beam search's ranking of capped hypotheses sees it.
    forced_eos: bool = field(default=False, metadata={
        "help": "at the length limit </s> scores 0, as transformers' forced_eos_token_id"})
    banned: tuple[int, ...] = field(default=(), metadata={
        "help": "never produced (search also bans pad and BOS, fairseq-style)"})
    # Not fairseq's rule, which bans after the softmax: an imported T5's or Marian's <pad> row is
    # aiayn's <pad> and its <s> (convert/hf_original.repeated_ids); its logit is -inf BEFORE the
    # log-softmax, so that row counts once, as the original's softmax counts it (Translator.score).
    counted_once: tuple[int, ...] = field(default=(), metadata={
        "help": "ids whose row another id repeats: left out of the softmax (an imported T5's "
                "<pad>, also its <s>)"})
    sliding_window: bool = field(default=False, metadata={
        "help": "LM past max_len: crop to the last max_len tokens, recompute"})

    def __post_init__(self) -> None:
        for name in ("banned", "counted_once"):  # a JSON round-trip gives a list
            if isinstance(getattr(self, name), list):
                setattr(self, name, tuple(getattr(self, name)))
        self._check_types()
        if self.beam < 1:
            _fail("beam", self.beam, "must be a positive integer")
        if self.beam > MAX_BEAM:
            _fail("beam", self.beam, f"at most {MAX_BEAM} (§6.1 uses 4)")
        if not math.isfinite(self.alpha):
            _fail("alpha", self.alpha, "must be a finite number")
        if self.length_penalty not in LENGTH_PENALTIES:
            _fail("length_penalty", self.length_penalty,
                  f"must be one of {', '.join(LENGTH_PENALTIES)}")
        if self.early_stopping not in EARLY_STOPPING:
            _fail("early_stopping", self.early_stopping, f"must be one of {', '.join(EARLY_STOPPING)}")
        check_options(self.temperature, self.top_k, self.top_p)
        if self.beam > 1 and self.temperature > 0:
            _fail("temperature", self.temperature,
                  f"beam search (beam={self.beam}) does not sample; use temperature=0")
        for name in ("max_new_tokens", "max_extra", "min_length", "no_repeat_ngram_size"):
            value = getattr(self, name)
            if value is not None and value < 0:
                _fail(name, value, "must be non-negative")
        ids = {"bos_id": self.bos_id, "eos_id": self.eos_id, "pad_id": self.pad_id,
               "forced_first_id": self.forced_first_id}
        ids.update((f"banned[{i}]", token) for i, token in enumerate(self.banned))
        ids.update((f"counted_once[{i}]", token) for i, token in enumerate(self.counted_once))
        for name, token in ids.items():
            if token is not None and (not isinstance(token, int) or token < 0):
                _fail(name, token, "must be a token id (a non-negative integer)")

    @property
    def strategy(self) -> str:
        """"beam", "greedy" or "sample"."""
        if self.beam > 1:
            return "beam"
        return "greedy" if self.temperature == 0 else "sample"


__all__ = ["EARLY_STOPPING", "LENGTH_PENALTIES", "MAX_BEAM", "GenerationConfig"]
