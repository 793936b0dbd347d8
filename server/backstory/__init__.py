"""Backstory: find prior art in a repository's own git history."""

__version__ = "0.1.0"
