"""Training encoder-only models: masked-LM pretraining, then text classification.

    aiayn classify train [CONFIG] [key=value ...] (--corpus gettext-origin | --train F.tsv ...)

Two stages, each a resumable run of the one Trainer:
  1. (data.mlm_steps > 0) BERT's masked-LM pretraining on the training texts (aiayn.data.mlm:
     15% of tokens, 80% [MASK] / 10% random / 10% kept) into OUT/pretrain, a model folder of
     its own;
  2. fine-tuning with a classification head (cross-entropy on the pooled [CLS] vector) into OUT,
     starting from the pretrained encoder (or from `model.init`, e.g. an imported MiniLM).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.config import ENCODER_PRESETS, Config, EncoderConfig, TrainConfig, _fail
from aiayn.data.mlm import mask_tokens
from aiayn.data.special import BOS, EOS, PAD, UNK
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import ConfigError, UserError
from aiayn.models.encoder import IGNORE_INDEX, EncoderModel
from aiayn.text_encoder import FAMILY, TextEncoder
from aiayn.training.stream import BatchStream
from aiayn.vision import check_resume_experiment

Example = tuple[str, str]  # (text, label)
PRETRAIN_DIR = "pretrain"
# TrainConfig defaults for `aiayn classify train`: AdamW, warmup + linear-ish cosine decay (the
# BERT fine-tuning recipe), not the paper's §5.3 schedule. From `model.init` the peak lr is 5e-5.
CLASSIFY_TRAIN_DEFAULTS: dict[str, Any] = dict(
    lr_schedule="cosine", lr=5e-4, warmup_steps=200, max_steps=3000, adam_beta2=0.999,
    adam_eps=1e-6, weight_decay=0.01, label_smoothing=0.0, clip_norm=1.0, eval_every=500,
    save_every=1000, log_every=100)


@dataclass
class ClassifyDataConfig(Config):
    """The labelled texts, their tokenizer, batching, and the masked-LM pretraining stage."""

    corpus: str | None = None  # "gettext-origin"
    n_labels: int = 8  # gettext-origin: how many programs (the largest catalogs)
    train: str | None = None  # text<TAB>label files
    valid: str | None = None
    vocab_size: int = 8000  # of the tokenizer trained on the training texts (not with model.init)
    batch_size: int = 32
    mlm_steps: int = 0  # masked-LM pretraining updates before fine-tuning (0 = none)
    mlm_rate: float = 0.15  # BERT: 15% of tokens predicted

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


def load_examples(data: ClassifyDataConfig) -> dict[str, list[Example]]:
    """{"train", "valid" [, "test"]} -> (text, label) examples."""
    from aiayn.data.parallel import read_tsv

    if data.corpus == "gettext-origin":
        from aiayn.data.gettext_origin import gettext_origin
        return gettext_origin(n_labels=data.n_labels)
    splits = {"train": read_tsv(data.train)}
    splits["valid"] = read_tsv(data.valid) if data.valid else []
    return splits


Corrupt = Callable[[Tensor, torch.Generator], tuple[Tensor, Tensor]]


def text_batches(ids: list[list[int]], labels: Tensor | None, batch_size: int, seed: int,
                 pad_id: int, corrupt: Corrupt | None = None) -> BatchStream:
    """Shuffled, padded batches epoch after epoch -> (ids (B, T), labels): the class labels, or
    with `corrupt` (masked LM) the corrupted ids and their per-token labels. Shuffle and masking
    are seeded by (seed, epoch, batch), so a resumed run sees exactly the same batches."""
    from aiayn.text_encoder import pad_ids

    def plan(epoch: int) -> list[tuple[int, int, Tensor]]:
        order = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed + epoch))
        return [(epoch, i, idx) for i, idx in enumerate(order.split(batch_size))]

    def collate(item: tuple[int, int, Tensor]) -> tuple[Tensor, Tensor]:
        epoch, i, idx = item
        x = pad_ids([ids[j] for j in idx.tolist()], pad_id)
        if corrupt is not None:
            g = torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 1_000_003 + i)
            return corrupt(x, g)
        return x, labels[idx]

    return BatchStream(plan, collate)


def _new_encoder(model: dict[str, Any], texts: Sequence[str], data: ClassifyDataConfig,
                 where: str) -> TextEncoder:
    """A fresh EncoderModel + a tokenizer trained on `texts`, or the model.init folder's."""
    fields = dict(model)
    init = fields.pop("init", None)
    if init is not None:
        if fields:
            raise UserError(f"{where}: model.init={init!r} takes the model as it is; "
                            f"drop model.{next(iter(fields))}")
        return TextEncoder.load(init)
    name = fields.pop("preset", "bert-small-cpu")
    if name not in ENCODER_PRESETS:
        raise UserError(f"{where}: model.preset={name!r}: unknown preset; choose one of "
                        f"{', '.join(ENCODER_PRESETS)}")
    for key in ("vocab_size", "pad_id", "n_labels"):
        if key in fields:
            raise UserError(f"{where}: model.{key}: set by the data")
    tokenizer = Tokenizer.train(texts, data.vocab_size)
    mask_id = tokenizer.vocab_size  # one id past the tokenizer: only the masked LM writes it
    try:
        cfg = EncoderConfig.from_dict({**ENCODER_PRESETS[name], **fields, "vocab_size": mask_id + 1,
                                       "pad_id": PAD, "n_labels": 0, "mlm_head": True})
    except ConfigError as e:
        raise UserError(f"{where}: model: {e}") from None
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


def _device(model) -> torch.device:
    return next(model.parameters()).device


def classification_loss(model, batch: tuple[Tensor, Tensor], label_smoothing: float = 0.0):
    """(loss summed over the batch, examples, {"accuracy": correct count}) for the Trainer."""
    ids, labels = (t.to(_device(model)) for t in batch)
    logits = model.classify(ids)
    loss = F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing, reduction="sum")
    return loss, len(labels), {"accuracy": (logits.argmax(-1) == labels).sum().item()}


def masked_lm_loss(model, batch: tuple[Tensor, Tensor]):
    """Summed cross-entropy over the chosen positions only. The vocabulary projection is applied
    to those positions alone (~15% of them): the same loss as ``mlm_loss`` on all logits."""
    inputs, labels = (t.to(_device(model)) for t in batch)
    chosen = labels != IGNORE_INDEX
    logits = model.mlm(model(inputs)[chosen])  # (n, V)
    loss = F.cross_entropy(logits.float(), labels[chosen], reduction="sum")
    n = int(chosen.sum())
    return loss, n, {"accuracy": (logits.argmax(-1) == labels[chosen]).sum().item()}


def _pretrain(enc: TextEncoder, ids: list[list[int]], train: TrainConfig, data: ClassifyDataConfig,
              out: Path, meta: dict[str, Any], say: Callable[[str], None]) -> TextEncoder:
    """Stage 1: masked-LM pretraining into out/pretrain (resumed, or skipped when complete)."""
    from aiayn.training.checkpoint import TRAIN_STATE_FILE, load_train_state
    from aiayn.training.trainer import Trainer

    folder = out / PRETRAIN_DIR
    resume = (folder / TRAIN_STATE_FILE).is_file()
    if resume and load_train_state(folder)["step"] >= data.mlm_steps:
        say(f"masked-LM pretraining: complete in {folder}")
        return TextEncoder.load(folder)
    if not resume:
        enc.save(folder)
    special = [enc.special[k] for k in ("pad", "cls", "sep", "unk") if k in enc.special]
    vocab = enc.model.config.vocab_size
    stream = text_batches(ids, None, data.batch_size, train.seed, enc.special["pad"],
                          corrupt=lambda x, g: mask_tokens(x, enc.special["mask"], vocab, special, g,
                                                           rate=data.mlm_rate))
    cfg = train.replace(max_steps=data.mlm_steps, eval_every=0, max_minutes=None)
    say(f"masked-LM pretraining: {data.mlm_steps} steps into {folder}")
    meta = {**meta, "task": "masked-lm", "special_ids": enc.special, "labels": []}
    Trainer(enc.model, cfg, stream, masked_lm_loss, folder, family=FAMILY, meta=meta).fit(resume=resume)
    return TextEncoder.load(folder)


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


def _prepare(model: dict[str, Any], train: TrainConfig, data: ClassifyDataConfig, out: Path,
             resume: bool, splits: dict[str, list[Example]], experiment: dict[str, Any],
             say: Callable[[str], None], where: str) -> tuple[TextEncoder, bool]:
    """The encoder to fine-tune (pretrained first when asked); True if fine-tuning resumes."""
    from aiayn.training.checkpoint import TRAIN_STATE_FILE
    from aiayn.training.translation import check_out_folder

    if not resume:
        check_out_folder(out, False)
    if resume and (out / TRAIN_STATE_FILE).is_file():
        check_resume_experiment(out, experiment)
        return TextEncoder.load(out), True
    if resume:  # the pretraining stage was interrupted: same tokenizer, weights from its state
        if not (out / PRETRAIN_DIR / TRAIN_STATE_FILE).is_file():
            raise UserError(f"{out / TRAIN_STATE_FILE}: not found: nothing to resume")
        check_resume_experiment(out / PRETRAIN_DIR, experiment)
        enc = TextEncoder.load(out / PRETRAIN_DIR)
    else:
        enc = _new_encoder(model, [t for t, _ in splits["train"]], data, where)
    if data.mlm_steps:
        if enc.model.mlm is None or "mask" not in enc.special:
            raise UserError(f"{where}: data.mlm_steps={data.mlm_steps}: the model has no masked-LM "
                            "head (or no [MASK] token); set data.mlm_steps=0")
        ids = [enc.token_ids(t) for t, _ in splits["train"]]
        enc = _pretrain(enc, ids, train, data, out, {**enc.meta, "experiment": experiment}, say)
    return enc, False


def train_classifier(model: dict[str, Any], train: TrainConfig, data: ClassifyDataConfig,
                     out: str | Path, resume: bool = False, say: Callable[[str], None] = print,
                     where: str = "config"):
    """Train (optionally MLM-pretrain, then fine-tune) a text classifier into `out`.
    Returns (TrainResult, test accuracy or None). `where` names the settings' source in errors."""
    from aiayn.training.trainer import Trainer, seed_everything

    out = Path(out)
    experiment = {"model": model, "data": data.to_dict()}
    splits = load_examples(data)
    labels = _label_names(splits, data)
    say(f"data: {len(splits['train'])} training, {len(splits['valid'])} validation examples, "
        f"{len(labels)} labels")
    seed_everything(train.seed)
    enc, resuming = _prepare(model, train, data, out, resume, splits, experiment, say, where)
    if not resuming:
        enc = _with_classifier(enc, labels)
        enc.save(out)  # tokenizer and special ids beside the weights the Trainer writes
    cfg = enc.model.config
    say(f"model: {enc.model.num_parameters():,} parameters (d_model {cfg.d_model}, "
        f"{cfg.n_layers} layers), vocabulary {cfg.vocab_size}")
    enc.device = torch.device(train.device)  # where the Trainer puts the model (for evaluate)
    index = {y: i for i, y in enumerate(labels)}
    targets = torch.tensor([index[y] for _, y in splits["train"]])
    ids = [enc.token_ids(t) for t, _ in splits["train"]]
    stream = text_batches(ids, targets, data.batch_size, train.seed, enc.special["pad"])

    def evaluate(m) -> dict[str, float]:
        return {"valid_accuracy": enc.evaluate(splits["valid"])} if splits["valid"] else {}

    meta = {**enc.meta, "task": "text-classification", "special_ids": enc.special,
            "labels": labels, "experiment": experiment}
    trainer = Trainer(enc.model, train, stream,
                      lambda m, b: classification_loss(m, b, train.label_smoothing),
                      out, family=FAMILY, meta=meta, evaluate=evaluate)
    result = trainer.fit(resume=resuming)
    test = enc.evaluate(splits["test"]) if splits.get("test") else None
    return result, test


__all__ = ["CLASSIFY_TRAIN_DEFAULTS", "ClassifyDataConfig", "classification_loss", "load_examples",
           "masked_lm_loss", "text_batches", "train_classifier"]
