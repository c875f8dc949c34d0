"""The write commands: report, route, resolve, remember, dispatch/close/decide, propose/accept, verify, registers, init."""
