"""Errors a user can cause, each carrying the documented exit code (design §13): defined in
identity.errors (the lowest layer reads files too), imported from here by the rest of regulator."""

from identity.errors import BadInput, Refused, RegulatorError

__all__ = ["BadInput", "LeaseRefused", "Refused", "RegulatorError"]


class LeaseRefused(Refused):
    """The lease does not act here (exit 3; serve's door answers 401): not the unit's current one,
    or its `unit run` is over or on another host (engine.commands.actors.check_lease)."""
