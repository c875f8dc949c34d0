"""The runtime of regulator: stores, units, the router, obligations, memory, delivery.

No Textual here: the CLI and the host harness import this package, and they must start fast.
"""
