"""The doors: the Python API a harness calls for a unit, and what a long-lived door keeps between calls."""
