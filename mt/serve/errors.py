"""A request the server refuses, and how it is answered."""


class ApiError(Exception):
    """A request the server refuses: answered {"error": message} with this HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
