"""ferry's version, in a module of its own so that every part can read it without importing the package API."""

__version__ = "0.2.0"
