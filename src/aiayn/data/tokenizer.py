"""A joint subword tokenizer for source and target text (§5.1), wrapping HF `tokenizers`.

§5.1: WMT14 English-German "sentences were encoded using byte-pair encoding, which has a shared
source-target vocabulary of about 37000 tokens"; English-French used 32000 word-pieces. Here
``kind="bpe"`` is that byte-pair encoding and ``kind="unigram"`` a SentencePiece-style unigram
model (close in spirit to word-pieces). One vocabulary serves both languages, which is what lets
§3.4 share the embedding matrices.

Design choices (documented departures and details):

* Special tokens come first, at the ids of ``aiayn.data.special`` (<pad>=0, <s>=1, </s>=2,
  <unk>=3); ``train`` and ``load`` both check this.
* Pre-tokenisation is SentencePiece's "Metaspace": a space becomes "▁" and is glued to the next
  word, so decoding is exact: ``decode(encode(s)) == s`` for text without leading whitespace
  (a leading space is dropped) and without characters unseen in training.
* Letters, digits and other characters (punctuation, symbols) never share a subword: "»%s«" is
  "▁»%", "s", "«", not one token. SentencePiece does the same (``split_by_unicode_script``,
  ``split_by_number``). Without it, BPE learns one token per quoting of a placeholder ("▁»%s«",
  "▁'%s'", "▁%s:", ...), each rare; on the gettext corpus a model then learned about a third as
  fast per update as fairseq's on SentencePiece pieces (benchmarks/RESULTS.md, "aiayn vs fairseq").
* Every digit is its own token, so a number is copied digit by digit ("2024" -> 2 0 2 4), which
  makes reordering dates ("3/5/24" -> "05.03.24") learnable from few examples.
* No byte fallback: a character that never occurred in the training text (and is not in the
  built-in alphabet of ASCII, digits and German letters) becomes <unk> (id 3), and ``decode``
  drops it. A joint vocabulary trained on the corpus it will encode rarely meets one.
* No Unicode normalisation, so what goes in comes back out unchanged.
* Training is deterministic: the same texts and settings give the same vocabulary and ids.
"""

from __future__ import annotations

import functools
import json
import string
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

from aiayn.data.special import SPECIAL_TOKENS, UNK_TOKEN
from aiayn.errors import UserError

KINDS = ("bpe", "unigram", "byte_bpe", "char")  # the last two for language models (aiayn lm)
FILENAME = "tokenizer.json"
# Always in the vocabulary, whatever the training text: ASCII, digits, German letters.
ALPHABET = sorted(set(string.ascii_letters + string.digits + string.punctuation + "äöüÄÖÜß"))
SPACE = "▁"  # U+2581, SentencePiece's visible space
# Pre-tokens: a run of letters (with combining marks), of digits, or of anything else but spaces;
# each may start with the "▁" of a preceding space (see the module docstring).
CHARACTER_CLASSES = rf"{SPACE}?[\p{{L}}\p{{M}}]+|{SPACE}?\p{{N}}+|{SPACE}?[^\p{{L}}\p{{M}}\p{{N}}\s{SPACE}]+|{SPACE}"


class Tokenizer:
    """Text <-> subword ids. ``encode`` adds no <s>/</s>; ``collate`` adds them where needed."""

    def __init__(self, hf: HFTokenizer, check_specials: bool = True):
        """check_specials=False wraps a tokenizer trained elsewhere (an imported BERT's WordPiece)
        whose special tokens are its own, at its own ids."""
        self.hf = hf
        if check_specials:
            _check_specials(hf, "tokenizer")

    # -- training and files -----------------------------------------------------------------

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, kind: str = "bpe",
              split_digits: bool = True) -> Tokenizer:
        """Learn a joint vocabulary of at most ``vocab_size`` entries (specials included).

        Pass source and target sentences together (§5.1: one shared vocabulary). The result may
        be smaller than ``vocab_size`` when the text has fewer distinct subwords. With
        `split_digits` every digit is a token of its own; without it a run of digits is kept
        apart from letters but may merge (SentencePiece's split_by_number).
        """
        if kind not in KINDS:
            raise UserError(f"tokenizer kind {kind!r} is unknown; choose one of {', '.join(KINDS)}")
        if kind in LM_KINDS:
            return cls(_train_lm_kind(texts, vocab_size, kind))
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) \
                or vocab_size <= len(SPECIAL_TOKENS) + len(ALPHABET):
            raise UserError(f"tokenizer vocab_size={vocab_size!r} is too small: it must exceed "
                            f"{len(SPECIAL_TOKENS) + len(ALPHABET)} (specials + base alphabet)")
        common = dict(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                      initial_alphabet=ALPHABET, show_progress=False)
        if kind == "bpe":
            hf = HFTokenizer(models.BPE(unk_token=UNK_TOKEN))
            trainer = trainers.BpeTrainer(min_frequency=2, **common)
        else:
            hf = HFTokenizer(models.Unigram())
            trainer = trainers.UnigramTrainer(unk_token=UNK_TOKEN, **common)
        hf.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always"),
            pre_tokenizers.Split(Regex(CHARACTER_CLASSES), behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=split_digits),
        ])
        hf.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="always")
        # Sorted input (duplicates kept: they are frequencies): the trainer sees the same text in
        # the same order whatever order the caller's iterable had.
        hf.train_from_iterator(sorted(texts), trainer)
        if kind == "unigram":
            _canonical_unigram(hf)
        return cls(hf)

    def save(self, directory: str | Path) -> Path:
        """Write ``directory/tokenizer.json`` (creating the directory); returns the file path."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / FILENAME
        self.hf.save(str(path))
        return path

    def to_json(self) -> str:
        """The whole tokenizer as the JSON text ``save`` writes."""
        return self.hf.to_str()

    @classmethod
    def load(cls, directory: str | Path, check_specials: bool = True) -> Tokenizer:
        """Read ``directory/tokenizer.json`` (a path to the file itself also works)."""
        path = Path(directory)
        if path.is_dir() or path.suffix != ".json":
            path = path / FILENAME
        if not path.is_file():
            raise UserError(f"{path}: no tokenizer file there")
        try:
            hf = HFTokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises a bare Exception on bad JSON
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UserError(f"{path}: not a valid tokenizer file ({reason})") from None
        if check_specials:
            _check_specials(hf, str(path))
        return cls(hf, check_specials)

    # -- encoding and decoding --------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str) -> list[int]:
        """Subword ids of ``text``, without <s> or </s>."""
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; special tokens (padding, <s>, </s>, <unk>) are skipped."""
        return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)

    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def tokens(self, text: str) -> list[str]:
        """The subword strings of ``text`` (for figure axes); "▁" marks the start of a word."""
        return self.hf.encode(text, add_special_tokens=False).tokens

    def id_to_token(self, i: int) -> str:
        token = self.hf.id_to_token(int(i))
        if token is None:
            raise UserError(f"token id {i} is outside the vocabulary (size {self.vocab_size})")
        return token

    def display_token(self, i: int) -> str:
        """The token as a person reads it, for figures and the explorer: byte-level BPE's
        stand-in characters ("Ġf", "Ã©") become the text they encode ("▁f", "é"); a leading
        space is shown as "▁", as in Metaspace tokens. Other tokens as id_to_token."""
        token = self.id_to_token(i)
        if not self._byte_level():
            return token
        table = _unicode_to_byte()
        if not all(c in table for c in token):  # a special token (<|endoftext|>)
            return token
        text = bytes(table[c] for c in token).decode("utf-8", errors="backslashreplace")
        return text.replace(" ", "\u2581")

    def _byte_level(self) -> bool:
        if not hasattr(self, "_is_byte_level"):
            decoder = json.loads(self.hf.to_str()).get("decoder") or {}
            self._is_byte_level = decoder.get("type") == "ByteLevel"
        return self._is_byte_level

    def token_to_id(self, token: str) -> int | None:
        return self.hf.token_to_id(token)

    def __repr__(self) -> str:
        return f"Tokenizer(kind={type(self.hf.model).__name__.lower()}, vocab_size={self.vocab_size})"


@functools.cache
def _unicode_to_byte() -> dict[str, int]:
    """Byte-level BPE's alphabet (GPT-2): each byte is a printable character, the printable
    ASCII and Latin-1 bytes themselves, the others shifted past 255. Character -> byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


def _canonical_unigram(hf: HFTokenizer) -> None:
    """Give a trained unigram model a canonical id order.

    The unigram trainer sums its EM statistics in hash-map order, which changes from process to
    process: scores differ in the last bits, and the characters it adds at the end (those of the
    alphabet that won no piece of their own) get scores min, min + 1e-4, ... in a random order.
    Rounding the scores, giving those characters one score, and sorting by (score, piece) makes
    the vocabulary and its ids the same on every run.
    """
    vocab = [(t, s) for t, s in json.loads(hf.to_str())["model"]["vocab"] if t not in SPECIAL_TOKENS]
    lowest = min(s for _, s in vocab)
    for i, (token, score) in enumerate(vocab):
        steps = (score - lowest) / 1e-4
        if len(token) == 1 and steps < len(vocab) + 1 and abs(steps - round(steps)) < 1e-3:
            score = lowest
        vocab[i] = (token, round(score, 6))
    vocab.sort(key=lambda ts: (-ts[1], ts[0]))
    specials = [(token, 0.0) for token in SPECIAL_TOKENS]
    hf.model = models.Unigram(specials + vocab, SPECIAL_TOKENS.index(UNK_TOKEN), False)


def _check_specials(hf: HFTokenizer, where: str) -> None:
    found = [hf.id_to_token(i) for i in range(len(SPECIAL_TOKENS))]
    if tuple(found) != SPECIAL_TOKENS:
        raise UserError(f"{where}: special tokens must be {', '.join(SPECIAL_TOKENS)} at ids "
                        f"0-{len(SPECIAL_TOKENS) - 1}, found {found}")


LM_KINDS = ("byte_bpe", "char")


def _train_lm_kind(texts: Iterable[str], vocab_size: int, kind: str) -> HFTokenizer:
    """Tokenizers for language models, where ``decode(encode(s)) == s`` must hold exactly
    (whitespace and all: Python source is indentation).

    byte_bpe: GPT-2's byte-level BPE (Radford et al. 2019). Text is split by GPT-2's regex
        (words, numbers, punctuation, runs of spaces), each piece becomes its UTF-8 bytes, and
        merges are learned over bytes. All 256 bytes are in the vocabulary, so no text is <unk>.
    char: one token per character; the vocabulary holds the ``vocab_size - 4`` most frequent
        characters of the training text, any other character becomes <unk> (dropped by decode).
    """
    minimum = len(SPECIAL_TOKENS) + (256 if kind == "byte_bpe" else 1)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < minimum:
        raise UserError(f"tokenizer vocab_size={vocab_size!r} is too small for kind {kind!r}: it "
                        f"must be at least {minimum}")
    common = dict(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    if kind == "byte_bpe":
        hf = HFTokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(min_frequency=2, **common,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        hf = HFTokenizer(models.WordLevel(unk_token=UNK_TOKEN))
        hf.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        hf.decoder = decoders.Fuse()  # concatenate, no spaces between characters
        trainer = trainers.WordLevelTrainer(min_frequency=1, **common)
    hf.train_from_iterator(sorted(texts), trainer)  # sorted: the same vocabulary for any order
    return hf
