"""SentencePiece model files (``*.spm`` / ``*.model``) -> a `tokenizers` Unigram tokenizer.

A SentencePiece model is a protocol-buffer message (sentencepiece_model.proto): a list of pieces
(string, score, type) and a normaliser spec. This module reads the few fields it needs from the
wire format itself, so neither the `sentencepiece` library nor `protobuf` is needed, and builds
the tokenizer the way transformers' SpmConverter does (the precompiled normalisation map,
whitespace collapsed, Metaspace "▁" words, a Unigram model with the file's scores). Only
unigram models are read (OPUS-MT's Marian models are); a BPE-type file is refused.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import UserError

# sentencepiece_model.proto: SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM = 1  # TrainerSpec.ModelType
NEVER = -1e6  # the score of a piece the source model cannot produce


@dataclass
class SpmModel:
    pieces: list[tuple[str, float, int]]  # (piece, score, type) in the file's id order
    model_type: int = UNIGRAM
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    byte_fallback: bool = False


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(data: bytes):
    """(field number, wire type, value) of one message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if i > len(data):
            raise ValueError("truncated field")
        yield number, wire, value


def read_spm(path: str | Path) -> SpmModel:
    """The pieces and normaliser of a SentencePiece model file; a UserError naming the file
    when it is not one."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror})") from None
    model = SpmModel(pieces=[])
    try:
        for number, wire, value in _fields(data):
            if number == 1 and wire == 2:  # repeated SentencePiece pieces
                piece, score, kind = "", 0.0, NORMAL
                for n, w, v in _fields(value):
                    if n == 1 and w == 2:
                        piece = v.decode("utf-8")
                    elif n == 2 and w == 5:
                        score = struct.unpack("<f", v)[0]
                    elif n == 3 and w == 0:
                        kind = v
                model.pieces.append((piece, score, kind))
            elif number == 2 and wire == 2:  # TrainerSpec
                for n, w, v in _fields(value):
                    if n == 3 and w == 0:
                        model.model_type = v
                    elif n == 35 and w == 0:
                        model.byte_fallback = bool(v)
            elif number == 3 and wire == 2:  # NormalizerSpec
                for n, w, v in _fields(value):
                    if n == 2 and w == 2:
                        model.precompiled_charsmap = bytes(v)
                    elif n == 3 and w == 0:
                        model.add_dummy_prefix = bool(v)
    except (ValueError, UnicodeDecodeError, struct.error) as e:
        raise UserError(f"{path}: not a SentencePiece model file ({e})") from None
    if not model.pieces:
        raise UserError(f"{path}: not a SentencePiece model file (no pieces)")
    if model.model_type != UNIGRAM:
        raise UserError(f"{path}: a SentencePiece model of type {model.model_type}; only unigram "
                        "models (type 1, as in OPUS-MT) are read")
    return model


def unigram_tokenizer(spm: SpmModel, vocab: list[str], specials: list[str], unk_id: int):
    """A `tokenizers` Tokenizer whose id i is the piece `vocab[i]`: the ids come from the caller
    (a Marian vocab.json, reordered), the segmentation from `spm`'s scores. Pieces of `vocab`
    that `spm` does not have (the other language's, in a Marian joint vocabulary) are scored
    as SentencePiece and the Marian tokenizer treat them: a character `spm` does not know is
    an unknown piece, scored min - 10 (SentencePiece's unknown penalty), which the Marian
    tokenizer then looks up in vocab.json, so it keeps its id; a longer piece is never produced
    (scored -1e6, below any path of known pieces). `specials` (among `vocab`) are special
    tokens, never produced from text; vocab[unk_id] stands for what nothing else spells.
    One difference remains: SentencePiece fuses a run of unknown characters into one piece,
    which Marian maps to <unk> unless the run is in vocab.json; here each character of the run
    that vocab.json has keeps its own id."""
    from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import Unigram

    scores = {p: s for p, s, kind in spm.pieces if kind in (NORMAL, USER_DEFINED)}
    unknown = min(scores.values(), default=0.0) - 10.0  # SentencePiece's kUnkPenalty
    table = [(t, 0.0 if t in specials else scores[t] if t in scores else
              unknown if len(t) == 1 else NEVER) for t in vocab]
    hf = HFTokenizer(Unigram(table, unk_id, False))
    steps = [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), "▁")]
    if spm.precompiled_charsmap:
        steps.insert(0, normalizers.Precompiled(spm.precompiled_charsmap))
    hf.normalizer = normalizers.Sequence(steps)
    scheme = "always" if spm.add_dummy_prefix else "never"
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme)
    hf.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=scheme)
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return hf


__all__ = ["SpmModel", "read_spm", "unigram_tokenizer"]
