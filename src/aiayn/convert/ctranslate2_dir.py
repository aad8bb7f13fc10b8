"""A model folder's CTranslate2 directory, for `--engine ctranslate2`: exported on first use,
loaded as a ctranslate2.Translator, and aiayn's decoder over it (load_decoder: a CT2Decoder,
aiayn.generation.ctranslate2, which maps aiayn's search onto CTranslate2's).

The folder keeps its CTranslate2 directory in `ctranslate2/` (`ctranslate2-step_N/` for a saved
checkpoint), float32 weights exported on first use (aiayn.convert.ctranslate2) by that
directory's one writer (aiayn.folder.lock), and exported again when the model's weights file
changed (a run that trained on). CTranslate2 quantizes when it loads them (`compute_type`: int8).

    load_decoder(folder, config, tokenizer, meta, compute_type="int8")  # Translator.load's engine
    load_translator(folder, compute_type="int8")   # a plain ctranslate2.Translator of the folder
    engine_dir(folder)                             # its CTranslate2 directory (exported if need be)
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from aiayn.convert.ctranslate2 import (
    AIAYN_FILE,
    export_stamp,
    import_ctranslate2,
    vocabulary,
    weights_stamp,
    write_into,
)
from aiayn.errors import UserError
from aiayn.folder import INCOMPLETE_MARKER, folder_contents
from aiayn.generation.ctranslate2 import CT2Decoder

COMPUTE_TYPES = ("default", "auto", "float32", "int8", "int8_float32", "int8_float16",
                 "int8_bfloat16", "int16", "float16", "bfloat16")


def engine_dir(folder: str | Path, checkpoint: int | None = None) -> Path:
    """The folder's CTranslate2 directory, exported now when it is missing, unfinished, damaged
    or not from the folder's weights, config and tokenizer as they are now (by the directory's
    one writer: a second process exporting it meanwhile is refused in one line, and the next
    call finds it done)."""
    folder = Path(folder)
    out = folder / ("ctranslate2" if checkpoint is None else f"ctranslate2-step_{checkpoint:08d}")
    stamp = weights_stamp(folder, checkpoint)
    if _current(out, stamp):
        return out
    try:
        _export_again(folder, out, stamp, checkpoint)
    except PermissionError as e:
        raise UserError(f"{out}: the CTranslate2 export is missing, damaged or older than the "
                        f"folder, and cannot be written here ({e.strerror}); make {folder} "
                        "writable, or translate a writable copy of it") from None
    return out


def _export_again(folder: Path, out: Path, stamp: dict[str, Any], checkpoint: int | None) -> None:
    from aiayn.folder.lock import FolderBusy, holder, writer_lock

    with contextlib.ExitStack() as held:
        try:
            held.enter_context(writer_lock(out))
        except FolderBusy:
            raise FolderBusy(f"{out} is being exported by {holder(out) or 'another process'}; "
                             "run again once it is done") from None
        if not _current(out, stamp):  # (another process may have written it meanwhile)
            import shutil

            for item in folder_contents(out):
                shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
            (out / INCOMPLETE_MARKER).touch()
            write_into(folder, out, None, checkpoint)
            (out / INCOMPLETE_MARKER).unlink()


def _current(out: Path, stamp: dict[str, Any]) -> bool:
    path = out / AIAYN_FILE
    if not path.is_file() or (out / INCOMPLETE_MARKER).exists():
        return False
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):  # damaged: made again
        return False
    # the source (weights read, config, tokenizer) and every file of the export as written: a
    # damaged, reordered or shortened vocabulary or model.bin is exported again
    return isinstance(written, dict) and all(written.get(k) == v for k, v in stamp.items()) \
        and written.get("files") == export_stamp(out)


def load_translator(folder: str | Path, compute_type: str = "default", device: str = "cpu",
                    inter_threads: int = 1, intra_threads: int = 0,
                    checkpoint: int | None = None):
    """A ctranslate2.Translator of the aiayn translation folder (its CTranslate2 directory,
    engine_dir). inter_threads: batches decoded side by side; intra_threads: threads each
    (0: CTranslate2's default). On 2 cores, (2, 1) for many sentences, (1, 2) for one."""
    ct2 = import_ctranslate2()
    if compute_type not in COMPUTE_TYPES:
        raise UserError(f"--ct2-compute-type {compute_type}: one of {', '.join(COMPUTE_TYPES)}")
    if str(device).split(":")[0] not in ("cpu", "cuda"):
        raise UserError(f"--device {device}: CTranslate2 runs on cpu or cuda")
    path = engine_dir(folder, checkpoint)
    try:
        return ct2.Translator(str(path), device=str(device).split(":")[0],
                              device_index=_index(device), compute_type=compute_type,
                              inter_threads=inter_threads, intra_threads=intra_threads)
    except (ValueError, RuntimeError) as e:  # e.g. a compute type this machine lacks
        raise UserError(f"{path}: CTranslate2 cannot load it on {device} with compute type "
                        f"{compute_type}: {e}") from None


def _index(device: Any) -> int:
    text = str(device)
    return int(text.split(":")[1]) if ":" in text else 0


def load_decoder(folder: str | Path, config, tokenizer, meta: dict[str, Any],
                 checkpoint: int | None = None, device: str = "cpu",
                 compute_type: str = "default", inter_threads: int = 1,
                 intra_threads: int = 0) -> CT2Decoder:
    """The CT2Decoder of the folder (its model config, tokenizer and meta as read): no PyTorch
    model is built. The options as load_translator takes them."""
    translator = load_translator(folder, compute_type, device, inter_threads, intra_threads,
                                 checkpoint)
    return CT2Decoder(translator, vocabulary(tokenizer, config.vocab_size),
                      bool(meta.get("source_eos")), compute_type,
                      vocabulary(tokenizer, config.target_vocab_size), max_len=config.max_len,
                      source_bos=bool(meta.get("source_bos")),
                      threads=(inter_threads, intra_threads))


__all__ = ["COMPUTE_TYPES", "engine_dir", "load_decoder", "load_translator"]
