"""User-facing errors: the CLI prints them as one line and exits non-zero, without a traceback."""


class UserError(Exception):
    """Bad input from the user (a file, a line, a key, a value). The message names the problem."""


class ConfigError(UserError, ValueError):
    """An invalid config field or value (a ValueError, as the Python API promises)."""
