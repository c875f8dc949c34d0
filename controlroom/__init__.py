"""The control room: the Typer CLI (no Textual import), the --once renderer and the Textual app."""
