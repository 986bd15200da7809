"""The package version (one place; ``privmarg.__version__`` and saved models read it)."""

__version__ = "0.1.0"
