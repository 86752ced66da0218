"""The one error type users see: what went wrong, why, and what to do."""

from __future__ import annotations


class CitegraphError(Exception):
    """An expected error, rendered as one line; ``code`` is the process exit code.

    Exit codes (SPEC §16): 1 refused for the state of the repository (retryable),
    2 usage or input error, 3 environment error.
    """

    def __init__(self, what: str, todo: str = "", *, code: int = 2, retryable: bool = False,
                 kind: str = "error") -> None:
        self.what = what
        self.todo = todo
        self.code = code
        self.retryable = retryable
        self.kind = kind
        super().__init__(self.line())

    def line(self) -> str:
        return f"citegraph: {self.what}" + (f" — {self.todo}" if self.todo else "")
