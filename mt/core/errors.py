"""The one exception type for a user's mistake: the CLI prints its message as one line and exits."""


class MtError(Exception):
    """Bad input, config or environment. The message names the file and line, config key or option.

    exit_code: 2 for usage, config and data errors; 1 for failures at run time.
    """

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def first_line(error: Exception) -> str:
    """An exception's message as one line for an MtError about it: its first line, or its type when it has none."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
