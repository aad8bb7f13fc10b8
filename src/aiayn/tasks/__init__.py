"""The four tasks, one module each, each with the same skeleton: its data config, reading the
data, batches, loss, evaluation, the user-facing object it returns, and training. What the one
experiment loader needs of a task (its model config, its recipe: a built-in config, ...) is its
row of the family table (aiayn.folder.families); TASK is the task's name there and in config
files.

    seq2seq                encoder-decoder (§3) on pairs of texts          -> Translator
                           (translation, summarization, denoising pretraining)
    language_model         decoder-only (GPT-style) on text                 -> LanguageModel
    text_classification    encoder-only (BERT-style): MLM, then labels     -> TextEncoder
    image_classification   Vision Transformer on labelled images           -> ImageClassifier

The seq2seq task's loss has a module of its own (seq2seq_loss), and so have the Translator
(translator; seq2seq re-exports it) and the scoring of one on a test set (evaluation: what
`aiayn eval` prints, table3 records). translation is the old name of seq2seq, kept as an alias
module (and `task: translation` as an alias in config files).
No task imports another; the generic pieces live in aiayn.data, aiayn.training, aiayn.generation.
"""

# The tasks' names in the family table's order (aiayn.folder.families, which imports torch: this
# tuple gives the command line its choices without it; a test keeps the two equal).
TASKS = ("seq2seq", "language_model", "text_classification", "image_classification")

__all__ = ["TASKS"]
