"""What an imported folder keeps of the transformers folder it came from, so that `aiayn export hf`
gives that folder back: HF -> aiayn -> HF is an identity.

An import keeps, in the aiayn folder's meta "hf_original" (config.json, written by the folder's one
writer):

    config   config.json as it came (a dict)
    model    the aiayn config the import made of it (to tell what changed since: see `restore`)
    rows     where aiayn's vocabulary rows come from, as runs [first HF id, count]: T5 and Marian
             move their ids onto aiayn's fixed special ids (hf_t5.py, hf_marian.vocabulary_order);
             absent where the ids are kept (BART, and an aiayn export imported back)
    files    the tokenizer, generation and preprocessor files (KEPT_FILES) byte for byte: UTF-8
             text as {"text": ...}, anything else (spiece.model) as {"base64": ...}

The export of such a folder writes (`restore`) the original config.json, with the values the aiayn
model has changed since its import (a fine-tuning's dropout) written over it, the kept files as they
were, and the weights with their vocabulary rows back at the original ids: aiayn's row that the
import added (T5's and Marian's <pad> row is aiayn's <pad> and its <s>) is dropped, the <s> row kept
(it is the decoder's first input, as <pad> is T5's and Marian's), and the rest are put back in their
order. A transformers pipeline holding the original tokenizer then reads the exported model as the
original.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.errors import ConfigError, UserError

KEY = "hf_original"  # the meta key
# What a transformers folder holds besides config.json and the weights that `from_pretrained` of
# a tokenizer, a generation config or an image processor reads.
KEPT_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
              "added_tokens.json", "spiece.model", "sentencepiece.bpe.model", "vocab.json",
              "merges.txt", "vocab.txt", "source.spm", "target.spm", "generation_config.json",
              "preprocessor_config.json")
# Names (their endings) of the exported tensors indexed by the vocabulary: rows, or columns.
VOCAB_ROWS = ("shared.weight", "embed_tokens.weight", "lm_head.weight", "wte.weight",
              "word_embeddings.weight")
VOCAB_COLUMNS = ("final_logits_bias",)


def keep(folder: Path, hf_config: dict[str, Any], config: Any,
         order: list[int] | None = None) -> dict[str, Any]:
    """The meta "hf_original" of an import of `folder` (its config.json `hf_config`) into a model
    of `config`; `order`: the HF id of each aiayn id, where the import moved them."""
    files = {}
    for name in KEPT_FILES:
        path = folder / name
        if path.is_file():
            data = path.read_bytes()
            try:
                files[name] = {"text": data.decode("utf-8")}
            except UnicodeDecodeError:
                files[name] = {"base64": base64.b64encode(data).decode("ascii")}
    kept: dict[str, Any] = {"config": hf_config, "model": config.to_dict(), "files": files}
    if order is not None and order != list(range(len(order))):
        kept["rows"] = _runs(order)
    return kept


def _runs(order: list[int]) -> list[list[int]]:
    """`order` as runs [first, count] of consecutive ids (T5's: [[0, 1], [0, V]])."""
    runs: list[list[int]] = []
    for i in order:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1][1] += 1
        else:
            runs.append([i, 1])
    return runs


def _order(runs: Any, where: str) -> list[int]:
    if not isinstance(runs, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) and x >= 0 for x in r)
            for r in runs):
        raise UserError(f"{where}: {KEY}.rows: expected runs [first id, count]")
    return [i for first, count in runs for i in range(first, first + count)]


def repeated_ids(meta: dict[str, Any]) -> list[int]:
    """The aiayn ids of an imported model whose HF row a later aiayn id is too (T5's and
    Marian's: aiayn's <pad>, whose row is also its <s>). The model's distribution is the
    original's over the other ids: the original counts that row once in its softmax."""
    kept = meta.get(KEY)
    if not isinstance(kept, dict) or "rows" not in kept:
        return []
    order = _order(kept["rows"], KEY)
    last = {theirs: mine for mine, theirs in enumerate(order)}
    return [mine for mine, theirs in enumerate(order) if last[theirs] != mine]


def file_bytes(entry: Any, name: str, where: str) -> bytes:
    """The bytes of one kept file (meta "hf_original" files[name])."""
    if isinstance(entry, dict) and isinstance(entry.get("text"), str):
        return entry["text"].encode("utf-8")
    if isinstance(entry, dict) and isinstance(entry.get("base64"), str):
        try:
            return base64.b64decode(entry["base64"], validate=True)
        except binascii.Error as e:
            raise UserError(f"{where}: {KEY}.files[{name!r}]: not base64 ({e})") from None
    raise UserError(f"{where}: {KEY}.files[{name!r}]: expected {{\"text\": ...}} or "
                    "{\"base64\": ...}")


def original_rows(state: dict[str, Tensor], order: list[int], where: str) -> dict[str, Tensor]:
    """The exported weights with their vocabulary rows (VOCAB_ROWS; VOCAB_COLUMNS' columns) at
    the original ids: HF id h takes aiayn's last row whose order is h (aiayn's <s> over its
    <pad>, both T5's <pad>: the row the decoder starts from)."""
    size = max(order) + 1
    source = dict.fromkeys(range(size), -1)
    for mine, theirs in enumerate(order):
        source[theirs] = mine
    missing = [h for h, mine in source.items() if mine < 0]
    if missing:
        raise UserError(f"{where}: the import left out the original id {missing[0]}, so its "
                        "vocabulary cannot be given back")
    index = torch.tensor([source[h] for h in range(size)])
    out = {}
    for name, value in state.items():
        if name.endswith(VOCAB_ROWS):
            value = value[index]
        elif name.endswith(VOCAB_COLUMNS):
            value = value[:, index]
        out[name] = value.contiguous()
    return out


def restore(meta: dict[str, Any], model_config: Any, to_hf: Callable[[Any], dict[str, Any]],
            state: dict[str, Tensor], where: str
            ) -> tuple[dict[str, Any], dict[str, Tensor], dict[str, bytes]] | None:
    """(config.json, weights, kept files) of the export of an imported model (meta
    "hf_original"), None for a model aiayn made. `to_hf`: the exporter's config.json of an aiayn
    config; a key whose value it gives for the model now differs from the one it gives for the
    model as imported was changed here, and is written over the original's."""
    kept = meta.get(KEY)
    if kept is None:
        return None
    if not isinstance(kept, dict) or not isinstance(kept.get("config"), dict) or \
            not isinstance(kept.get("model"), dict) or not isinstance(kept.get("files"), dict):
        raise UserError(f"{where}: {KEY}: expected config, model and files (of an import)")
    unknown = sorted(set(kept["files"]) - set(KEPT_FILES))
    if unknown:  # never a path of its own choosing: only these names are written
        raise UserError(f"{where}: {KEY}.files: {unknown[0]!r} is not a file an import keeps")
    try:
        imported = type(model_config).from_dict(kept["model"])
    except ConfigError as e:
        raise UserError(f"{where}: {KEY}.model: {e}") from None
    rows = getattr(model_config, "vocab_size", None)  # (a ViT has none)
    if getattr(imported, "vocab_size", None) != rows:
        raise UserError(f"{where}: the model has {rows} vocabulary rows, its import "
                        f"{imported.vocab_size}: its original vocabulary cannot be given back")
    then, now = to_hf(imported), to_hf(model_config)
    config = {**kept["config"], **{k: v for k, v in now.items() if then.get(k) != v}}
    if "rows" in kept:
        state = original_rows(state, _order(kept["rows"], where), where)
    files = {name: file_bytes(entry, name, where) for name, entry in kept["files"].items()}
    return config, state, files


__all__ = ["KEPT_FILES", "KEY", "file_bytes", "keep", "original_rows", "repeated_ids",
           "restore"]
