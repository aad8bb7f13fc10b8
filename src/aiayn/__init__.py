"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017)."""

from aiayn.api import load
from aiayn.config import TransformerConfig, preset
from aiayn.models import Transformer

__version__ = "0.1.0"
__all__ = ["Transformer", "TransformerConfig", "load", "preset", "__version__"]
