"""The model folder: one self-describing directory per model, everything needed to resume,
translate, generate or export it (STYLE.md, habit 8), and everything that reads or writes one.

    files.py       atomic writes (temporary file, then os.replace); where a path would land
                   (refuse_inside_model_folder). Torch-free: every layer writes its files so.
    lock.py        one writer per folder: an flock held by every command that writes one
    format.py      what a folder holds and where (config.json's "meta", checkpoints/), and how
                   a fresh folder is written (new_folder). Torch-free.
    weights.py     the weights as safetensors, written with tied tensors once, read back checked
    checkpoint.py  training state, numbered checkpoints, the run's folder checks, averaging (§6.1)
    families.py    the family table: which config, model and task each kind of folder holds
    load.py        a folder opened by its family: load_model, and aiayn.load(DIR)'s object

The names below are importable from here (`from aiayn.folder import read_meta`); those of the
torch-using modules (weights, checkpoint, families, load) are imported on first use (PEP 562), so
that the command line and the data layer read and write folders without loading torch.
"""

from __future__ import annotations

from aiayn.folder.files import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    atomic_path,
    atomic_write,
    atomic_write_text,
    model_folder_around,
    refuse_inside_model_folder,
)
from aiayn.folder.format import (
    CHECKPOINT_DIR,
    EXAMPLE_CHARS,
    INCOMPLETE_MARKER,
    TOKENIZER_FILE,
    checkpoint_path,
    folder_contents,
    list_checkpoints,
    new_folder,
    read_json,
    read_meta,
    remove_stale_tmp,
    require_new_folder,
)
from aiayn.folder.lock import LOCK_FILE, FolderBusy, holder, is_locked, writer_lock
from aiayn.lazy import lazy_names

_EXPORTS = {
    "load_weights": "aiayn.folder.weights", "save_model": "aiayn.folder.weights",
    "save_weights": "aiayn.folder.weights",
    "folder_family": "aiayn.folder.load", "load_model": "aiayn.folder.load",
}
__all__ = ["CHECKPOINT_DIR", "CONFIG_FILE", "EXAMPLE_CHARS", "INCOMPLETE_MARKER", "LOCK_FILE",
           "TOKENIZER_FILE", "WEIGHTS_FILE", "FolderBusy", "atomic_path", "atomic_write",
           "atomic_write_text", "checkpoint_path", "folder_contents", "holder", "is_locked",
           "list_checkpoints", "model_folder_around", "new_folder", "read_json", "read_meta",
           "refuse_inside_model_folder", "remove_stale_tmp", "require_new_folder",
           "writer_lock", *sorted(_EXPORTS)]

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
