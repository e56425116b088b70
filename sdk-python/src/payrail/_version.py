"""The library's version (also in pyproject.toml; a test keeps the two equal)."""

VERSION = "0.1.0"
