"""Errors a user can cause, each carrying the documented exit code (design §13): defined in
identity.errors (the lowest layer reads files too), imported from here by the rest of regulator."""

from identity.errors import BadInput, Refused, RegulatorError

__all__ = ["BadInput", "Refused", "RegulatorError"]
