"""Errors a user can cause. The CLI prints their message on one line and exits 2."""


class UserError(Exception):
    """Bad input from the user: a missing file, malformed JSON, an unknown name."""
