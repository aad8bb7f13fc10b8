"""Denoising pretraining data for the encoder-decoder: plain text -> (corrupted, target) pairs.

The objectives are data/noising.py's; this module turns documents into the pairs a translation
run trains on (`aiayn train pretrain-span --text FILE...`, data.objective):

    span    T5 span corruption: the input keeps 85% of the tokens, each dropped span one sentinel
            (<extra_id_0>, ...); the target is the sentinel-delimited spans.
    infill  BART text infilling: 30% of the tokens in Poisson(3)-long spans, one <mask> each;
            the target is the original text.
    permute BART sentence permutation (Lewis et al. 2020, §2.2): the sentences, cut at full
            stops, shuffled; the target is the original text.
    infill+permute  both, BART-large's pretraining (§5.1): permuted, then infilled.

Sentence ends are found in the ids (sentence_stops): aiayn's BPE glues "." to neighbouring
punctuation (".)", '."'), so a full stop is any all-punctuation token holding a ".", and it ends a
sentence only where the next token starts a word ("▁": a space follows), not in "os.path" or
"3.14". (fairseq's BART cuts at every "." token of GPT-2's BPE, "os.path" included.)

A document is a paragraph of a text file (lines up to a blank line, whitespace runs made one
space), or a source sentence of a corpus. Documents are packed, in order and whole, into pieces of
up to max_len - 1 tokens (the target with its </s> must fit max_len); a longer one is cut.

The objective's tokens are added to the trained tokenizer as special tokens (saved with it in
tokenizer.json, skipped by decode): T5's 100 sentinels, <extra_id_0> the very last id as T5 has
it (noising.t5_sentinels); BART's one <mask>, the last id.

Every epoch draws a fresh corruption of each document from (seed, epoch, document index) alone,
so an epoch's pairs are the same on every machine and in a resumed run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiayn.data import noising
from aiayn.data.batching import token_batches
from aiayn.data.special import EOS
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError

OBJECTIVES = ("span", "infill", "permute", "infill+permute")
N_SENTINELS = 100  # T5's extra_ids
MASK_TOKEN = "<mask>"

IdPair = tuple[list[int], list[int]]


def sentinel_token(i: int) -> str:
    return f"<extra_id_{i}>"


def objective_tokens(objective: str) -> list[str]:
    """The special tokens `objective` writes, in the order they are appended to the vocabulary:
    sentinels from <extra_id_99> down to <extra_id_0> (which gets the last id), or <mask>, or
    none (permute)."""
    if objective == "span":
        return [sentinel_token(i) for i in reversed(range(N_SENTINELS))]
    if objective in ("infill", "infill+permute"):
        return [MASK_TOKEN]
    if objective == "permute":
        return []
    raise UserError(f"objective={objective!r}: choose one of {', '.join(OBJECTIVES)}")


def add_objective_tokens(tok: Tokenizer, objective: str) -> Tokenizer:
    """Append the objective's special tokens to `tok` (in place; returned)."""
    tok.hf.add_special_tokens(objective_tokens(objective))
    return tok


def objective_ids(tok: Tokenizer, objective: str) -> list[int]:
    """The ids of the objective's tokens in `tok`: the sentinels <extra_id_0>, <extra_id_1>, ...
    in that order, or [<mask>]. A tokenizer without them (not trained for the objective) is
    refused in one line."""
    tokens = objective_tokens(objective)[::-1] if objective == "span" else objective_tokens(objective)
    ids = [tok.token_to_id(t) for t in tokens]
    if None in ids:
        raise UserError(f"the tokenizer has no {tokens[ids.index(None)]} token: it was not "
                        f"trained for objective={objective!r}")
    return ids


def permutes(objective: str | None) -> bool:
    """Whether `objective` shuffles sentences (and so needs sentence_stops)."""
    return objective in ("permute", "infill+permute")


@dataclass(frozen=True)
class SentenceStops:
    """Where a document's ids end sentences: after a token of `ends` that the document's last
    token or a token of `word_starts` follows (noising.split_sentences)."""

    ends: frozenset[int]
    word_starts: frozenset[int]


def sentence_stops(tok: Tokenizer) -> SentenceStops:
    """The full stops of `tok`: tokens of punctuation alone (a leading "▁" aside) with a "."
    (".", ".)", '."', "..."); and the tokens that start a word (a "▁" first: a space before)."""
    ends, starts = set(), set()
    for i in range(tok.vocab_size):
        token = tok.display_token(i)
        body = token.lstrip("▁")
        if "." in body and not any(c.isalnum() for c in body):
            ends.add(i)
        if token.startswith("▁"):
            starts.add(i)
    return SentenceStops(frozenset(ends), frozenset(starts))


# -- documents -----------------------------------------------------------------------------------

def read_documents(paths: Sequence[str | Path]) -> list[str]:
    """The paragraphs of UTF-8 text files, in order, whitespace runs made one space."""
    docs: list[str] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"{path}: text file not found") from None
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        paragraph: list[str] = []
        for line in [*text.splitlines(), ""]:
            if line.strip():
                paragraph.append(line)
            elif paragraph:
                docs.append(" ".join(" ".join(paragraph).split()))
                paragraph = []
    return docs


def encode_documents(tok: Tokenizer, docs: Sequence[str], max_len: int) -> list[list[int]]:
    """Token ids of the documents, packed into pieces of at most max_len - 1 tokens: consecutive
    documents share a piece while they fit in it whole (T5 packs its text too: alone, a short
    document would get one noise span, always at its end); a longer one is cut into pieces of
    that length, its tail starting the next piece. Pieces of under 2 tokens are left out."""
    size = max_len - 1
    pieces: list[list[int]] = []
    piece: list[int] = []
    for ids in tok.encode_batch(docs):
        if piece and len(piece) + len(ids) > size:
            pieces.append(piece)
            piece = []
        whole = len(ids) // size * size if len(ids) > size else 0
        pieces += [ids[i:i + size] for i in range(0, whole, size)]
        piece += ids[whole:]
    if piece:
        pieces.append(piece)
    return [p for p in pieces if len(p) >= 2]


# -- corruption ----------------------------------------------------------------------------------

def corrupt(ids: Sequence[int], objective: str, special: Sequence[int],
            rng: np.random.Generator, stops: SentenceStops | None = None) -> IdPair:
    """(input, target) of one document; `special` as objective_ids gives them, `stops` (for an
    objective that permutes) as sentence_stops does."""
    if objective == "span":
        return noising.span_corruption(ids, special, rng)
    if objective == "infill":
        return noising.text_infilling(ids, special[0], rng), list(ids)
    if stops is None:
        raise ValueError(f"objective={objective!r} needs the sentence stops (sentence_stops)")
    if objective == "permute":
        return noising.permute_sentences(ids, stops.ends, rng, stops.word_starts), list(ids)
    return noising.bart_noise(ids, special[0], stops.ends, rng, word_starts=stops.word_starts)


# The epoch number of the validation documents' one fixed corruption (no training epoch's).
VALID_EPOCH = 2**32 - 1


def corrupt_documents(docs: Sequence[Sequence[int]], objective: str, special: Sequence[int],
                      seed: int, epoch: int, max_len: int,
                      source_eos: bool = False, stops: SentenceStops | None = None) -> list[IdPair]:
    """Epoch `epoch`'s corruption of every document, document i's drawn from (seed, epoch, i).
    An input is cut to max_len (infilling's inserted <mask>s may lengthen a full-length piece);
    with `source_eos` it ends with </s>, as translation's encode_pairs gives sources."""
    pairs = []
    for i, ids in enumerate(docs):
        src, tgt = corrupt(ids, objective, special, np.random.default_rng([seed, epoch, i]), stops)
        src = src[:max_len - 1] + [EOS] if source_eos else src[:max_len]
        pairs.append((src, tgt))
    return pairs


def epoch_batches(docs: Sequence[Sequence[int]], objective: str, special: Sequence[int],
                  seed: int, epoch: int, max_len: int, max_tokens: int,
                  source_eos: bool = False, stops: SentenceStops | None = None) -> list[list[IdPair]]:
    """The epoch's pairs in §5.1 batches of similar length, ~max_tokens each, in an order drawn
    from seed + epoch: a BatchStream plan."""
    pairs = corrupt_documents(docs, objective, special, seed, epoch, max_len, source_eos, stops)
    lengths = [(len(s), len(t) + 1) for s, t in pairs]
    return [[pairs[i] for i in b] for b in token_batches(lengths, max_tokens, True, seed + epoch)]


__all__ = ["MASK_TOKEN", "N_SENTINELS", "OBJECTIVES", "VALID_EPOCH", "SentenceStops",
           "add_objective_tokens", "corrupt", "corrupt_documents", "encode_documents",
           "epoch_batches", "objective_ids", "objective_tokens", "permutes", "read_documents",
           "sentence_stops", "sentinel_token"]
