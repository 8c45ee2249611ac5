"""The corpus context, under the name callers have always imported it by (`models.cde.context`).

Defined in `models.context` so that the base Embedder, which every architecture builds on, can name it
without importing the CDE package; this module re-exports it unchanged.
"""

from models.context import META_FILE, VECTORS_FILE, CorpusContext

__all__ = ["META_FILE", "VECTORS_FILE", "CorpusContext"]
