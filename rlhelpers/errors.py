"""The one exception type that the CLI and the notebook show as a single clear line."""


class RLHelpersError(Exception):
    """A problem the user can fix: bad input, a conflicting run directory, a broken checkpoint.

    The message names the problem and what to do about it.
    """
