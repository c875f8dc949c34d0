"""Commands that arrive with later issues register here."""
