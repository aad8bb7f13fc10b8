"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

The names below are imported on first use (PEP 562), so that `import aiayn` and the command
line start without loading torch until a command needs it (and Ctrl-C at start-up is a clean exit).
"""

from __future__ import annotations

from aiayn.lazy import lazy_names

__version__ = "0.1.0"
_EXPORTS = {
    "load": "aiayn.folder.load",
    "DecoderLMConfig": "aiayn.config", "EncoderConfig": "aiayn.config",
    "TransformerConfig": "aiayn.config", "ViTConfig": "aiayn.config",
    "encoder_preset": "aiayn.config", "lm_preset": "aiayn.config", "preset": "aiayn.config",
    "vit_preset": "aiayn.config",
    "DecoderLM": "aiayn.models", "EncoderModel": "aiayn.models", "Transformer": "aiayn.models",
    "VisionTransformer": "aiayn.models",
}
__all__ = [*sorted(_EXPORTS), "__version__"]


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
