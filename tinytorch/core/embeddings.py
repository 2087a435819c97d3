"""Module 11's embeddings under the path the rest of the course imports them from.

`from tinytorch.core.embeddings import Embedding` is `tinytorch.text.embeddings.Embedding`, imported
on first use (`tinytorch/names.py`, the one table).

Given (tito/curriculum/catalog.py GIVEN): it only names what lives where.
"""

from tinytorch.names import lazy_module

__getattr__, __dir__, __all__ = lazy_module("tinytorch.core.embeddings")
