"""`aiayn.load(DIR)`: open any model folder as the object that uses it.

The folder's config.json names its family; each family registers a loader here
(`register_loader`). A translation model ("transformer") loads as a Translator.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiayn.errors import UserError
from aiayn.folder import CONFIG_FILE, read_meta

LOADERS: dict[str, Callable[..., Any]] = {}


def register_loader(family: str, loader: Callable[..., Any]) -> None:
    """`loader(folder, device=...)` returns the user-facing object of a `family` model folder."""
    LOADERS[family] = loader


def _translator(folder: str | Path, device: str = "cpu"):
    from aiayn.translator import Translator
    return Translator.load(folder, device)


register_loader("transformer", _translator)


def _language_model(folder: str | Path, device: str = "cpu"):
    from aiayn.lm import LanguageModel
    return LanguageModel.load(folder, device)


register_loader("decoder_lm", _language_model)


def _text_encoder(folder: str | Path, device: str = "cpu"):
    from aiayn.text_encoder import TextEncoder
    return TextEncoder.load(folder, device)


register_loader("encoder", _text_encoder)


def _image_classifier(folder: str | Path, device: str = "cpu"):
    from aiayn.vision import ImageClassifier
    return ImageClassifier.load(folder, device)


register_loader("vit", _image_classifier)


def load(folder: str | Path, device: str = "cpu") -> Any:
    """The object for the model folder `folder` (e.g. a Translator with .translate())."""
    family = read_meta(folder)["family"]
    if family not in LOADERS:
        raise UserError(f"{Path(folder) / CONFIG_FILE}: no loader for model family {family!r} "
                        f"(known: {', '.join(sorted(LOADERS))})")
    return LOADERS[family](folder, device=device)


__all__ = ["load", "register_loader"]
