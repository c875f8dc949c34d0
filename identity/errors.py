"""Errors a user can cause, each carrying the documented exit code (design §13). Defined in the
lowest layer so that a file read here (identity.regular) refuses as the engine does; engine.base.errors
is where the rest of regulator imports them from."""


class RegulatorError(Exception):
    """One line for the user: what was wrong and what to do."""

    exit_code = 1


class BadInput(RegulatorError):
    """Exit 2: the input is wrong; nothing was written."""

    exit_code = 2


class Refused(RegulatorError):
    """Exit 3: a veto, a missing grant, or a state that no longer allows it; nothing written."""

    exit_code = 3
