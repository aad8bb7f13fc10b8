"""The four tasks, one module each, each with the same skeleton: its data config and training
defaults (TASK, for the one experiment loader), reading the data, batches, loss, evaluation, the
user-facing object it returns, and training.

    translation            encoder-decoder (§3) on sentence pairs          -> Translator
    language_model         decoder-only (GPT-style) on text                 -> LanguageModel
    text_classification    encoder-only (BERT-style): MLM, then labels     -> TextEncoder
    image_classification   Vision Transformer on labelled images           -> ImageClassifier

No task imports another; the generic pieces live in aiayn.data, aiayn.training, aiayn.generation.
"""

TASKS = ("translation", "language_model", "text_classification", "image_classification")

__all__ = ["TASKS"]
