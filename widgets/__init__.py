"""Reusable Textual widgets over the engine's read models. They never write."""
