"""The registers (seed 004): findings, intake and records in git, linted against trunk history."""
