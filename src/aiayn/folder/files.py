"""Files written so that nothing is lost: each replaced atomically (a temporary file in the same
folder, then os.replace: a crash or Ctrl-C never leaves half a file, and a link at the path is
replaced, never written through), and where a path would land (inside a model folder).

Torch-free, so that every layer (data included) writes its files this way.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from aiayn.errors import UserError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600: use the user's umask like open()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> None:
    """Run write(tmp_path), then move the result into place atomically."""
    with atomic_path(path) as tmp:
        write(tmp)


def model_folder_around(path: str | Path) -> Path | None:
    """The model folder that `path` (a file to write) would land in, as its real path: the first
    folder above it holding config.json and model.safetensors; None if there is none."""
    here = Path(os.path.realpath(path)).parent
    for folder in (here, *here.parents):
        if (folder / CONFIG_FILE).is_file() and (folder / WEIGHTS_FILE).is_file():
            return folder
    return None



def refuse_inside_model_folder(out: str | Path, what: str = "--out") -> None:
    """A one-line UserError when the folder `out` would be written inside a model folder other
    than itself (a model folder's checkpoints/, or a folder within it): its files are the
    model's own."""
    around = model_folder_around(Path(out) / CONFIG_FILE)
    if around is not None and around != Path(os.path.realpath(out)):
        raise UserError(f"{what} {out}: is inside the model folder {around}; choose a folder "
                        "outside it")


__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "atomic_path", "atomic_write", "atomic_write_text",
           "model_folder_around", "refuse_inside_model_folder"]
