"""Text classification with an encoder-only (BERT-style) Transformer: masked-LM pretraining,
then fine-tuning with a classification head; the TextEncoder also embeds sentences.

    from aiayn import load
    enc = load("minilm")                         # a TextEncoder
    enc.embed(["A cat sits.", "A dog sits."])    # (2, 384), mean-pooled, L2-normalised
    clf = load("origin-classifier")
    clf.classify(["Permission denied"])          # [("coreutils", 0.71)]

Two stages, each a resumable run of the one Trainer:
  1. (data.mlm_steps > 0) BERT's masked-LM pretraining on the training texts (aiayn.data.mlm:
     15% of tokens, 80% [MASK] / 10% random / 10% kept) into OUT/pretrain, a model folder of
     its own;
  2. fine-tuning with a classification head (cross-entropy on the pooled [CLS] vector) into OUT,
     starting from the pretrained encoder (or from `model.init`, e.g. an imported MiniLM).

A text becomes [CLS] tokens [SEP] (truncated to the model's max_len); the special ids live in
the folder's config.json ("special_ids"), because an imported BERT's WordPiece vocabulary has
its own ([PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103), unlike aiayn's tokenizers.
A model trained here uses aiayn's tokenizer: <s> as [CLS], </s> as [SEP], and one id past the
tokenizer's vocabulary as [MASK] (a symbol only the masked-LM objective ever writes).
Same skeleton as every aiayn.tasks module: data config, data, batches, loss, train; the
user-facing object (TextEncoder) and the BERT import are aiayn.tasks.text_encoder's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.config import Config, _fail
from aiayn.config.experiment import Experiment, build_model_config, load_experiment
from aiayn.data.batching import MaskedTokens, pad_ids
from aiayn.data.mlm import mask_tokens
from aiayn.data.special import BOS, EOS, PAD, UNK
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import EXAMPLE_CHARS
from aiayn.folder.checkpoint import TRAIN_STATE_FILE, load_train_state
from aiayn.folder.families import ENCODER as FAMILY
from aiayn.folder.families import FAMILIES
from aiayn.models.encoder import EncoderModel
from aiayn.tasks.text_encoder import TextEncoder, import_hf_bert
from aiayn.training import distributed
from aiayn.training.losses import classification_loss
from aiayn.training.run import Run, TrainResult, start_run
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer

# -- data config ---------------------------------------------------------------------------------

Example = tuple[str, str]  # (text, label)
PRETRAIN_DIR = "pretrain"


@dataclass
class ClassifyDataConfig(Config):
    """The labelled texts, their tokenizer, batching, and the masked-LM pretraining stage."""

    corpus: str | None = field(default=None, metadata={
        "help": "a built-in labelled corpus (gettext-origin); None with train"})
    n_labels: int = field(default=8, metadata={
        "help": "gettext-origin: how many programs (the largest catalogs)"})
    train: str | None = field(default=None, metadata={
        "help": "training TSV file (text<TAB>label lines)"})
    valid: str | None = field(default=None, metadata={
        "help": "validation TSV (text<TAB>label); none: no validation"})
    vocab_size: int = field(default=8000, metadata={
        "help": "of the tokenizer trained on the training texts (not with model.init)"})
    batch_size: int = field(default=32, metadata={"help": "texts per training batch"})
    mlm_steps: int = field(default=0, metadata={
        "help": "masked-LM pretraining updates before fine-tuning (0 = none)"})
    mlm_rate: float = field(default=0.15, metadata={"help": "BERT: 15% of tokens predicted"})

    def __post_init__(self) -> None:
        self._check_types()
        if (self.corpus is None) == (self.train is None):
            _fail("corpus", self.corpus,
                  "give exactly one of corpus (gettext-origin) or train (a TSV file)")
        if self.corpus is not None and self.corpus != "gettext-origin":
            _fail("corpus", self.corpus,
                  "unknown text-classification corpus; the built-in one is gettext-origin")
        for name in ("n_labels", "vocab_size", "batch_size"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        if self.mlm_steps < 0:
            _fail("mlm_steps", self.mlm_steps, "must be a non-negative integer")
        if not 0.0 < self.mlm_rate < 1.0:
            _fail("mlm_rate", self.mlm_rate, "must be in (0, 1)")


# The task's name in config files; its recipe (aiayn/configs/classify.yaml: AdamW, warmup and
# cosine decay, BERT's fine-tuning recipe), its lower lr for fine-tuning a pretrained encoder
# (model.init) and the rest the loader needs are in the family table.
TASK = FAMILIES[FAMILY].task


def experiment(config: str | Path | dict[str, Any] | None = None, overrides: Sequence[str] = (),
               **options: Any) -> Experiment:
    """The run `aiayn classify train CONFIG OVERRIDES...` would train (options: out=, data=)."""
    return load_experiment(config, overrides, task=TASK, **options)


# -- data ----------------------------------------------------------------------------------------

def load_examples(data: ClassifyDataConfig) -> dict[str, list[Example]]:
    """{"train", "valid" [, "test"]} -> (text, label) examples."""
    from aiayn.data.parallel import read_tsv

    if data.corpus == "gettext-origin":
        from aiayn.data.gettext_origin import gettext_origin
        return gettext_origin(n_labels=data.n_labels)
    splits = {"train": read_tsv(data.train)}
    splits["valid"] = read_tsv(data.valid) if data.valid else []
    return splits


def corpus_examples(encoder: TextEncoder, split: str = "test") -> list[Example] | None:
    """The (text, label) examples of a split of the built-in corpus `encoder` was trained on
    (its folder's data settings; no test split: none); None for a model not trained on one
    (on TSV files, or imported)."""
    data = encoder.meta.get("experiment", {}).get("data")
    if data is None or not data.get("corpus"):
        return None
    return load_examples(ClassifyDataConfig.from_dict(data)).get(split, [])

def _label_names(splits: dict[str, list[Example]], data: ClassifyDataConfig) -> list[str]:
    labels = sorted({y for _, y in splits["train"]})
    unseen = sorted({y for s in ("valid", "test") for _, y in splits.get(s, [])} - set(labels))
    if unseen:
        raise UserError(f"{data.valid or data.corpus}: label {unseen[0]!r} never occurs in the "
                        "training data")
    if len(labels) < 2:
        raise UserError(f"{data.train or data.corpus}: needs at least 2 labels, "
                        f"found {len(labels)}")
    return labels


# -- batches -------------------------------------------------------------------------------------

Corrupt = Callable[[Tensor, torch.Generator], "tuple[Tensor, Tensor] | MaskedTokens"]


def text_batches(ids: list[list[int]], labels: Tensor | None, batch_size: int, seed: int,
                 pad_id: int, corrupt: Corrupt | None = None) -> BatchStream:
    """Shuffled, padded batches epoch after epoch -> (ids (B, T), labels): the class labels, or
    with `corrupt` (masked LM) the corrupted ids and their per-token labels. Shuffle and masking
    are seeded by (seed, epoch, batch), so a resumed run sees exactly the same batches."""
    def plan(epoch: int) -> list[tuple[int, int, Tensor]]:
        order = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed + epoch))
        return [(epoch, i, idx) for i, idx in enumerate(order.split(batch_size))]

    def collate(item: tuple[int, int, Tensor]) -> tuple[Tensor, Tensor] | MaskedTokens:
        epoch, i, idx = item
        x = pad_ids([ids[j] for j in idx.tolist()], pad_id)
        if corrupt is not None:
            g = torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 1_000_003 + i)
            return corrupt(x, g)
        return x, labels[idx]

    return BatchStream(plan, collate)


# -- loss ----------------------------------------------------------------------------------------

def _device(model) -> torch.device:
    return next(model.parameters()).device


def text_classification_loss(model, batch: tuple[Tensor, Tensor], label_smoothing: float = 0.0):
    """(loss summed over the batch, examples, {"accuracy": correct count}) for the Trainer."""
    ids, labels = (t.to(_device(model)) for t in batch)
    return classification_loss(model.classify(ids), labels, label_smoothing)


def masked_lm_loss(model, batch: MaskedTokens | tuple[Tensor, Tensor]):
    """Summed cross-entropy over the chosen positions only. The vocabulary projection is applied
    to those positions alone (~15% of them): the same loss as ``mlm_loss`` on all logits. They
    are found on the host (MaskedTokens; from a tuple, here): the count a shape, the accuracy a
    tensor, nothing read from a GPU."""
    if isinstance(batch, (tuple, list)):
        batch = MaskedTokens.of_labels(*batch)
    batch = batch.to(_device(model))
    width, index = batch.inputs.shape[1], batch.index
    logits = model.mlm(model(batch.inputs)[index // width, index % width])  # (N, V)
    target = batch.labels.reshape(-1)[index]
    loss = F.cross_entropy(logits.float(), target, reduction="sum")
    return loss, len(target), {"accuracy": (logits.argmax(-1) == target).sum()}


# -- train ---------------------------------------------------------------------------------------

def _new_encoder(exp: Experiment, texts: Sequence[str]) -> TextEncoder:
    """A fresh EncoderModel + a tokenizer trained on `texts`, or the model.init folder's."""
    fields = dict(exp.model)
    init = fields.pop("init", None)
    if init is not None:
        if fields:
            raise UserError(f"{exp.source}: model.init={init!r} takes the model as it is; "
                            f"drop model.{next(iter(fields))}")
        return TextEncoder.load(init)
    tokenizer = Tokenizer.train(texts, exp.data.vocab_size)
    mask_id = tokenizer.vocab_size  # one id past the tokenizer: only the masked LM writes it
    cfg = build_model_config(exp.task, fields, {"vocab_size": mask_id + 1, "pad_id": PAD,
                                            "n_labels": 0, "mlm_head": True}, exp.source)
    special = {"pad": PAD, "cls": BOS, "sep": EOS, "unk": UNK, "mask": mask_id}
    return TextEncoder(EncoderModel(cfg), tokenizer, special, meta={"task": "text-encoder"})


def _with_classifier(enc: TextEncoder, labels: list[str]) -> TextEncoder:
    """The same encoder weights under a config with an n_labels-way classification head."""
    cfg = enc.model.config.replace(n_labels=len(labels))
    model = EncoderModel(cfg)
    state = {k: v for k, v in enc.model.state_dict().items() if not k.startswith("classifier.")}
    model.load_state_dict(state, strict=False)
    return TextEncoder(model, enc.tokenizer, enc.special, labels, meta=enc.meta,
                       max_len=enc.max_len)


def _pretrain(enc: TextEncoder, ids: list[list[int]], run: Run, exp: Experiment) -> TextEncoder:
    """Stage 1: masked-LM pretraining into out/pretrain (resumed, or skipped when complete)."""
    folder, data, train = run.folder / PRETRAIN_DIR, exp.data, exp.train
    resume = (folder / TRAIN_STATE_FILE).is_file()
    if resume and load_train_state(folder)["step"] >= data.mlm_steps:
        run.say(f"masked-LM pretraining: complete in {folder}")
        return TextEncoder.load(folder)
    stage = run.stage(folder, resume)
    if stage.begin_folder():
        enc.save(folder)
    special = [enc.special[k] for k in ("pad", "cls", "sep", "unk") if k in enc.special]
    vocab = enc.model.config.vocab_size
    stream = text_batches(ids, None, data.batch_size, train.seed, enc.special["pad"],
                          corrupt=lambda x, g: MaskedTokens.of_labels(*mask_tokens(
                              x, enc.special["mask"], vocab, special, g, rate=data.mlm_rate)))
    cfg = train.replace(max_steps=data.mlm_steps, eval_every=0, max_minutes=None)
    run.say(f"masked-LM pretraining: {data.mlm_steps} steps into {folder}")
    meta = {**enc.meta, "task": "masked-lm", "special_ids": enc.special, "labels": []}
    Trainer(enc.model, cfg, stream, masked_lm_loss, stage, family=FAMILY, meta=meta).fit()
    return TextEncoder.load(folder)


def _prepare(exp: Experiment, run: Run, splits: dict[str, list[Example]]) -> tuple[TextEncoder, bool]:
    """The encoder to fine-tune (pretrained first when asked); True if fine-tuning resumes."""
    data = exp.data
    if run.resume and (run.folder / TRAIN_STATE_FILE).is_file():
        return TextEncoder.load(run.folder), True
    if run.resume:  # the pretraining stage was interrupted: same tokenizer, weights from its state
        enc = TextEncoder.load(run.folder / PRETRAIN_DIR)
    else:
        enc = _new_encoder(exp, [t for t, _ in splits["train"]])
        distributed.check_same(enc.tokenizer.to_json(), "the tokenizer")
        run.begin_folder()
    if data.mlm_steps:
        if enc.model.mlm is None or "mask" not in enc.special:
            raise UserError(f"{exp.source}: data.mlm_steps={data.mlm_steps}: the model has no "
                            "masked-LM head (or no [MASK] token); set data.mlm_steps=0")
        ids = [enc.token_ids(t) for t, _ in splits["train"]]
        enc = _pretrain(enc, ids, run, exp)
    return enc, False


def train(exp: Experiment, resume: bool = False, out: str | Path | None = None,
          say: Callable[[str], None] = print) -> TrainResult:
    """Train (optionally MLM-pretrain, then fine-tune) a text classifier into `out` (or the
    experiment's). The result holds the test accuracy (metrics["test_accuracy"]) when the
    corpus has a test split."""
    # the run's folder has one writer, this process, until its last save (aiayn.folder.lock)
    with start_run(exp, resume, out, say, stage=PRETRAIN_DIR) as run:
        say, data, train_cfg = run.say, exp.data, exp.train
        splits = load_examples(data)
        labels = _label_names(splits, data)
        say(f"data: {len(splits['train'])} training, {len(splits['valid'])} validation examples, "
            f"{len(labels)} labels")
        enc, resuming = _prepare(exp, run, splits)
        if not resuming:
            enc = _with_classifier(enc, labels)
            if run.world.is_main:
                enc.save(run.folder)  # tokenizer and special ids beside the weights the Trainer writes
        cfg = enc.model.config
        say(f"model: {enc.model.num_parameters():,} parameters (d_model {cfg.d_model}, "
            f"{cfg.n_layers} layers), vocabulary {cfg.vocab_size}")
        # where the Trainer puts the model
        enc.device = torch.device(distributed.process_device(train_cfg.device))
        index = {y: i for i, y in enumerate(labels)}
        targets = torch.tensor([index[y] for _, y in splits["train"]])
        ids = [enc.token_ids(t) for t, _ in splits["train"]]
        stream = text_batches(ids, targets, data.batch_size, train_cfg.seed, enc.special["pad"])

        def evaluate(m) -> dict[str, float]:
            # m: the weights the folder holds (the running average, if on), not the run's own
            scorer = copy.copy(enc)
            scorer.model = m
            return {"valid_accuracy": scorer.evaluate(splits["valid"])} if splits["valid"] else {}

        meta = {**enc.meta, "task": "text-classification", "special_ids": enc.special,
                "labels": labels, "example": (splits["valid"] or splits["train"])[0][0][:EXAMPLE_CHARS]}
        trainer = Trainer(enc.model, train_cfg, stream,
                          lambda m, b: text_classification_loss(m, b, train_cfg.label_smoothing),
                          run.stage(run.folder, resuming), family=FAMILY, meta=meta, evaluate=evaluate)
        result = trainer.fit()
        if splits.get("test"):
            result.metrics["test_accuracy"] = enc.evaluate(splits["test"])
        return result


__all__ = ["ClassifyDataConfig", "TASK", "TextEncoder", "corpus_examples", "experiment", "import_hf_bert",
           "load_examples", "masked_lm_loss", "text_batches", "text_classification_loss",
           "train"]
