"""Model families built from aiayn.nn blocks: one readable file each."""

from aiayn.models.transformer import Transformer

__all__ = ["Transformer"]
