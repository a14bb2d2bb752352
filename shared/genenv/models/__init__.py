"""Local model folders built from models shipped inside PyPI packages (no hub downloads)."""
