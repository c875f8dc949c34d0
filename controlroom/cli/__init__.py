"""The command line: controlroom.cli.root is the root Typer app; one module per command group, none importing the root."""
