"""tito: the command line of the tinytorch course."""

__version__ = "0.1.0"
