"""`model.init`: fine-tuning starts from a pretrained model folder's weights.

    model: {init: runs/pretrain-span}                # the folder's model, as it is
    model: {init: runs/pretrain-span, dropout: 0.3}  # with another dropout

The folder's config is the model's. The model section may still name a preset and fields (a
fine-tuning config shared with runs from scratch: summarize-small's {preset: small, max_len: 256});
they must describe the pretrained model, except the dropout rates (REGULARISATION), which a
fine-tuning run may change. A section that describes another model (another d_model, layer
count, norm placement, ...), whose weights the pretrained ones are not, is refused in one line,
before any training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from aiayn.errors import ConfigError, UserError
from aiayn.folder.families import FAMILIES
from aiayn.folder.load import load_model

# The fields a fine-tuning run may set apart from its pretrained model's.
REGULARISATION = ("dropout", "attn_dropout", "activation_dropout")


def init_model(family_name: str, folder: str | Path, section: dict[str, Any],
               where: str = "config") -> tuple[nn.Module, dict[str, Any]]:
    """(the model `folder` holds, with its weights and the section's dropout rates; the folder's
    meta). `section` is the experiment's model section (its `init` and other model keys are
    skipped: see the module's doc); `where` names it in messages."""
    family = FAMILIES[family_name]
    fields = {k: v for k, v in section.items() if k not in family.model_keys}
    preset = fields.pop("preset", None)
    pretrained, meta = load_model(folder, "cpu", expect=family_name)
    base = pretrained.config
    try:  # the section's model: its preset's whole config, then its fields; the data's sizes kept
        given = family.config.preset(preset).to_dict() if preset is not None else {}
        config = base.replace(**{k: v for k, v in {**given, **fields}.items()
                                 if k not in family.set_by_data})
    except ConfigError as e:
        raise UserError(f"{where}: model: {e}") from None
    changed = [f"{k}={getattr(config, k)!r} (pretrained: {getattr(base, k)!r})"
               for k in config.field_names()
               if k not in REGULARISATION and getattr(config, k) != getattr(base, k)]
    if changed:
        raise UserError(f"{where}: model.init={folder}: the model section describes another "
                        f"model ({', '.join(changed)}); only {', '.join(REGULARISATION)} may "
                        "differ: drop the others to fine-tune the pretrained model")
    model = family.model(config)
    model.load_state_dict(pretrained.state_dict())
    return model, meta


__all__ = ["REGULARISATION", "init_model"]
