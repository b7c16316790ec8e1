"""The one exception type that the CLI and the notebook show as a single clear line."""


class RLHelpersError(Exception):
    """A problem the user can fix: bad input, a conflicting run directory, a broken checkpoint.

    The message names the problem and what to do about it.
    """


def write_error(what: str, exc: Exception, note: str = "") -> RLHelpersError:
    """The error for a run file that could not be written: the OS's reason and what to do about it.
    ``what`` names the file (e.g. ``checkpoint <path>``); ``note`` is appended in brackets."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return RLHelpersError(f"cannot write {what}: {reason}; free disk space or choose a writable --runs-dir"
                          + (f" ({note})" if note else ""))
