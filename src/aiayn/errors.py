"""User-facing errors: the CLI prints them as one line and exits non-zero, without a traceback."""


class UserError(Exception):
    """Bad input from the user (a file, a line, a key, a value). The message names the problem."""


class ConfigError(UserError, ValueError):
    """An invalid config field or value (a ValueError, as the Python API promises)."""


# Failures of the machine rather than of the program: a full disk, a read-only filesystem, a
# denied or impossible path. torch.save and safetensors report them as their own exception types.
_WRITE_FAILURES = ("PytorchStreamWriter", "unexpected pos", "file write failed", "IoError")


def describe_os_error(e: BaseException) -> str | None:
    """One line for an error of the filesystem ("PATH: No space left on device"), or None when `e`
    is not one (a programming error, which should keep its traceback)."""
    if isinstance(e, OSError):
        reason = e.strerror or str(e) or type(e).__name__
        return f"{e.filename}: {reason}" if e.filename is not None else reason
    text = str(e)
    if type(e).__name__ == "SafetensorError" or any(w in text for w in _WRITE_FAILURES):
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        for name in ("No space left on device", "Read-only file system", "Permission denied"):
            if name.lower() in text.lower():
                return name
        return f"writing failed ({first})"
    return None
