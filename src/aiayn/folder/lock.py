"""One writer per model folder: an exclusive lock that every command writing a folder holds.

    with writer_lock("runs/x"):          # train, resume, average, export, import, the demo
        ...                              # check the folder, clean it, write it

The lock is `flock(LOCK_EX | LOCK_NB)` on DIR/.aiayn-lock, taken before the folder is checked
and held until the command's last write; the operating system releases it when the process
ends, however it ends (SIGKILL included), so a lock is never left stale. A second writer is
refused at once in one line naming the holder ("runs/x is being written by pid 4242 (aiayn
train demo --out runs/x); wait for it or choose another --out"), before it touches anything.
Readers (translate, eval, serve, viz) never take it: every file is replaced atomically, so they
see the old file or the new one, never half of one.

The lock is re-entrant within a process (the demo holds it around the training it starts) and
released by the outermost holder, which removes the lock file (a folder holds one only while it
is being written) and, when the lock itself created the folder and nothing else went in, the
folder: a command that fails before writing leaves nothing behind, and a refused one touches
nothing. See docs/model-folders.md for what flock guarantees on network filesystems.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

from aiayn.errors import UserError

try:  # POSIX; elsewhere (Windows) folders are not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

LOCK_FILE = ".aiayn-lock"
_HELD: dict[str, tuple[int, int, bool]] = {}  # real path -> (fd, depth, folder created by us)


class FolderBusy(UserError):
    """Another process holds the folder's writer lock."""


def _command() -> str:
    """This process's command line, as a user typed it ("aiayn train demo --out runs/x")."""
    argv = list(sys.argv) or ["python"]
    if argv[0].endswith(("__main__.py", "/aiayn")) or Path(argv[0]).name == "aiayn":
        argv[0] = "aiayn"
    text = " ".join(argv)
    return text if len(text) <= 200 else text[:197] + "..."


def holder(folder: str | Path) -> str | None:
    """What the lock file says of its holder ("pid 4242 (aiayn train ...)"), or None."""
    path = Path(folder) / LOCK_FILE
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    pid, _, command = text.partition(" ")
    return f"pid {pid} ({command})" if pid.isdigit() else None


def _open_lock_file(path: Path, flags: int) -> int:
    """Open the lock file without following a link and without blocking on a FIFO; anything but
    a regular file there is refused in one line naming it (a folder received from someone else
    may hold a planted link, and truncating its target would destroy a file of the user's)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as e:
        if path.is_symlink():
            raise UserError(f"{path} is a symbolic link; aiayn writes through no link it did not "
                            "create: remove it and run the command again") from None
        if os.path.lexists(path) and not path.is_file():
            raise UserError(f"{path} is not a regular file; remove it and run the command "
                            "again") from None
        raise UserError(f"cannot open the writer lock {path}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{path} is not a regular file; remove it and run the command again")
    return fd


def is_locked(folder: str | Path) -> bool:
    """Whether some process (this one included) holds the folder's writer lock now."""
    path = Path(folder) / LOCK_FILE
    if fcntl is None or not os.path.lexists(path):
        return False
    if os.path.realpath(folder) in _HELD:
        return True
    fd = _open_lock_file(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a shared lock taken above


def _acquire(folder: Path) -> tuple[int, bool]:
    while True:
        created = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        fd = _open_lock_file(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            who = holder(folder) or "another process"
            raise FolderBusy(f"{folder} is being written by {who}; wait for it or choose "
                             "another --out") from None
        if _same_file(fd, folder / LOCK_FILE):
            break
        os.close(fd)  # the holder removed its empty folder meanwhile: start again
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {_command()}\n".encode())
    return fd, created


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


@contextlib.contextmanager
def writer_lock(folder: str | Path) -> Iterator[Path]:
    """Hold `folder`'s writer lock (creating the folder) for the body; see the module's doc."""
    folder = Path(folder)
    if fcntl is None:  # pragma: no cover
        yield folder
        return
    key = os.path.realpath(folder)
    if key in _HELD:
        fd, depth, created = _HELD[key]
        _HELD[key] = (fd, depth + 1, created)
    else:
        fd, created = _acquire(folder)
        _HELD[key] = (fd, 1, created)
    try:
        yield folder
    finally:
        fd, depth, created = _HELD[key]
        if depth > 1:
            _HELD[key] = (fd, depth - 1, created)
        else:
            del _HELD[key]
            _release(folder, fd, created)


def _release(folder: Path, fd: int, created: bool) -> None:
    """Remove the lock file, then unlock: a process that opened the file meanwhile finds, once
    it gets the lock, that the path no longer names what it locked, and starts again
    (_acquire). A folder this lock created that received nothing else goes too."""
    try:
        (folder / LOCK_FILE).unlink(missing_ok=True)
        if created and not any(folder.iterdir()):
            folder.rmdir()
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["LOCK_FILE", "FolderBusy", "holder", "is_locked", "writer_lock"]
