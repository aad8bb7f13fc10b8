"""The family table: for each kind of model folder, which typed config and model class it holds,
which task trains and uses it, the object `aiayn.load` returns, and what the one experiment
loader (aiayn.config.experiment) needs to know of that task.

A folder's config.json names its family ("family": "transformer") and a config file its task
("task: seq2seq"; the old name "translation" is an alias, TASK_ALIASES); everything that dispatches on either (loading weights, `aiayn.load`, the
attention views, the explorer, the experiment loader, `aiayn train`) reads this table instead of
repeating the names. The table names the task module's classes (its data config, its object) by
name, so it stays below the tasks: a task module is imported only when one of them is needed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from aiayn.config import Config, DecoderLMConfig, EncoderConfig, TransformerConfig, ViTConfig
from aiayn.data.special import PAD
from aiayn.errors import UserError
from aiayn.models import DecoderLM, EncoderModel, Transformer, VisionTransformer

SEQ2SEQ = "transformer"  # encoder-decoder (§3), a Translator
TRANSLATION = SEQ2SEQ  # the old name of the constant, kept as an alias
LANGUAGE_MODEL = "decoder_lm"  # decoder-only (GPT-style), a LanguageModel
ENCODER = "encoder"  # encoder-only (BERT-style), a TextEncoder
VIT = "vit"  # Vision Transformer, an ImageClassifier


@dataclass(frozen=True)
class Family:
    """One kind of model folder and the task that trains it."""

    name: str  # as written in config.json
    task: str  # the module under aiayn.tasks that trains it; a config file's `task:`
    command: str  # the CLI command that trains it, for messages ("aiayn lm train")
    config: type[Config]  # the typed model config (aiayn.config)
    model: type  # the nn.Module built from it (aiayn.models)
    data: str  # the task's data config: its class name in the task module
    object: str  # the user-facing class in the task module (has .load(folder, device))
    what: str  # how messages name it ("a translation model")
    # The built-in config (aiayn/configs/NAME.yaml) that is the task's recipe: what a run without
    # a config trains, and the train settings a config file's train section is layered over.
    # None: TrainConfig's own defaults (the paper's §5 recipe).
    recipe: str | None = None
    default_preset: str | None = None  # the preset a model section without one starts from
    set_by_data: dict[str, str] = field(default_factory=dict)  # model field -> why it can't be set
    model_keys: tuple[str, ...] = ()  # keys of the model section that are not config fields
    # Values for set_by_data fields that let a model section be checked before the data is read
    # (None: checked once the data is known).
    placeholders: dict[str, Any] | None = None
    # Train settings over the recipe's when model.init names a pretrained model to fine-tune.
    fine_tuning: dict[str, Any] = field(default_factory=dict)

    @property
    def data_config(self) -> type[Config]:
        """The task's data config class (imports the task module)."""
        return getattr(importlib.import_module(f"aiayn.tasks.{self.task}"), self.data)


_BY_TOKENIZER = {k: "set by the tokenizer (use data.vocab_size)" for k in ("vocab_size", "pad_id")}

FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family(SEQ2SEQ, "seq2seq", "aiayn train", TransformerConfig, Transformer,
           "DataConfig", "Translator", "a translation model", model_keys=("init",),
           set_by_data=_BY_TOKENIZER, placeholders={"vocab_size": 1000, "pad_id": PAD}),
    Family(LANGUAGE_MODEL, "language_model", "aiayn lm train", DecoderLMConfig, DecoderLM,
           "LMDataConfig", "LanguageModel", "a language model", recipe="lm",
           set_by_data=_BY_TOKENIZER, placeholders={"vocab_size": 1000, "pad_id": PAD}),
    Family(ENCODER, "text_classification", "aiayn classify train", EncoderConfig, EncoderModel,
           "ClassifyDataConfig", "TextEncoder", "an encoder", recipe="classify",
           default_preset="bert-small-cpu", model_keys=("init",),
           set_by_data={k: "set by the data" for k in ("vocab_size", "pad_id", "n_labels")},
           placeholders={"vocab_size": 1000, "pad_id": PAD},
           # BERT's fine-tuning range is 2e-5 .. 5e-5 (Devlin et al. 2019, appendix A.3)
           fine_tuning={"lr": 5e-5}),
    Family(VIT, "image_classification", "aiayn vit train", ViTConfig, VisionTransformer,
           "VisionDataConfig", "ImageClassifier", "a vision transformer", recipe="vit-digits",
           default_preset="vit-digits",
           set_by_data={k: "set by the data" for k in ("image_size", "channels", "n_classes")}),
)}


# Old task names -> today's: configs, model folders' records and scripts that name them still load.
TASK_ALIASES = {"translation": "seq2seq"}


def task_name(task: Any) -> Any:
    """Today's name of the task named `task` ("translation" -> "seq2seq"); other values as given."""
    return TASK_ALIASES.get(task, task) if isinstance(task, str) else task


def task_family(task: str) -> Family:
    """The family the task named `task` (or its alias) trains (a config file's `task:
    language_model`)."""
    task = task_name(task)
    for family in FAMILIES.values():
        if family.task == task:
            return family
    from aiayn.config import did_you_mean

    tasks = [f.task for f in FAMILIES.values()]
    raise UserError(f"task={task!r}: unknown task{did_you_mean(str(task), tasks)}; choose one of "
                    f"{', '.join(tasks)}")


__all__ = ["ENCODER", "FAMILIES", "Family", "LANGUAGE_MODEL", "SEQ2SEQ", "TASK_ALIASES",
           "TRANSLATION", "VIT", "task_family", "task_name"]
