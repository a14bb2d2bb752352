"""The ``genenv`` command line (Typer + Rich)."""
