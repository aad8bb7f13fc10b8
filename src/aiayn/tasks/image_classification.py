"""Image classification with the Vision Transformer in one object: train, load, predict, evaluate.

    from aiayn import load
    clf = load("digits-vit")                   # an ImageClassifier
    clf.predict_files(["three.png"])           # [("3", 0.98)]
    clf.evaluate(images, labels)               # accuracy

Images are float tensors (B, C, H, W) with pixels in [0, 1] (aiayn.data.images); a model folder
records the class names, the Pillow mode ("L" or "RGB") and the image size it was trained on,
so image files are converted the same way at prediction time.

The same skeleton as every module of aiayn.tasks: data config, reading the data,
batches, loss, evaluation, the user-facing object (ImageClassifier), training.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from aiayn.config import Config, _fail
from aiayn.config.experiment import Experiment, load_experiment
from aiayn.data.images import ImageCorpus, digits, image_folder, load_image, random_affine
from aiayn.errors import UserError
from aiayn.folder.families import FAMILIES
from aiayn.folder.families import VIT as FAMILY
from aiayn.folder.load import load_model
from aiayn.folder.weights import save_model
from aiayn.models.vit import VisionTransformer
from aiayn.training.losses import classification_loss
from aiayn.training.run import TrainResult, start_run
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer

# -- data config ---------------------------------------------------------------------------------


@dataclass
class VisionDataConfig(Config):
    """Where the images come from, how they are batched and augmented."""

    corpus: str | None = field(default="digits", metadata={
        "help": "a built-in corpus; None with an image folder"})
    images: str | None = field(default=None, metadata={
        "help": "a folder with one sub-folder of image files per class"})
    image_size: int | None = field(default=None, metadata={
        "help": "folder images are resized to this (default: the first's size)"})
    channels: int | None = field(default=None, metadata={
        "help": "1 = grey, 3 = RGB (default: the first image's)"})
    valid_frac: float = field(default=0.1, metadata={
        "help": "share of the images held out for validation"})
    test_frac: float = field(default=0.2, metadata={"help": "share held out for the test split"})
    batch_size: int = field(default=32, metadata={"help": "images per training batch"})
    augment: bool = field(default=True, metadata={
        "help": "random small rotations, zooms and shifts of training images"})
    rotate: float = field(default=10.0, metadata={"help": "degrees, +-"})
    scale: float = field(default=0.1, metadata={"help": "+- relative zoom"})
    translate: float = field(default=0.5, metadata={"help": "pixels, +-"})

    def __post_init__(self) -> None:
        self._check_types()
        if (self.corpus is None) == (self.images is None):
            _fail("corpus", self.corpus, "give exactly one of corpus (digits) or images (a folder)")
        if self.corpus is not None and self.corpus != "digits":
            _fail("corpus", self.corpus, "unknown image corpus; the built-in one is digits")
        if self.batch_size <= 0:
            _fail("batch_size", self.batch_size, "must be a positive integer")
        for name in ("rotate", "scale", "translate"):
            if getattr(self, name) < 0:
                _fail(name, getattr(self, name), "must be non-negative")


# The task's name in config files; its recipe (aiayn/configs/vit-digits.yaml: AdamW, a short
# warmup and cosine decay, the usual ViT recipe) and the rest the loader needs are in the family
# table.
TASK = FAMILIES[FAMILY].task


def experiment(config: str | Path | dict[str, Any] | None = None, overrides: Sequence[str] = (),
               **options: Any) -> Experiment:
    """The run `aiayn vit train CONFIG OVERRIDES...` would train (options: out=, data=)."""
    return load_experiment(config, overrides, task=TASK, **options)


# -- data ----------------------------------------------------------------------------------------

def load_image_corpus(data: VisionDataConfig) -> ImageCorpus:
    if data.corpus == "digits":
        return digits(data.valid_frac, data.test_frac)
    return image_folder(data.images, data.image_size, data.channels, data.valid_frac, data.test_frac)


# -- batches -------------------------------------------------------------------------------------

def image_batches(images: Tensor, labels: Tensor, data: VisionDataConfig, seed: int) -> BatchStream:
    """Shuffled batches, epoch after epoch; the shuffle and each batch's augmentation are seeded
    by (seed, epoch, batch), so a resumed run sees exactly the same batches."""

    def plan(epoch: int) -> list[tuple[int, int, Tensor]]:
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed + epoch))
        return [(epoch, i, idx) for i, idx in enumerate(order.split(data.batch_size))]

    def collate(item: tuple[int, int, Tensor]) -> tuple[Tensor, Tensor]:
        epoch, i, idx = item
        x = images[idx]
        if data.augment:
            g = torch.Generator().manual_seed((seed * 1_000_003 + epoch) * 1_000_003 + i)
            x = random_affine(x, g, data.rotate, data.scale, data.translate)
        return x, labels[idx]

    return BatchStream(plan, collate)


# -- loss ----------------------------------------------------------------------------------------

def image_classification_loss(model, batch: tuple[Tensor, Tensor], label_smoothing: float = 0.0):
    """(loss summed over the batch, examples, {"accuracy": correct count}) for the Trainer."""
    images, labels = (t.to(_device(model)) for t in batch)
    return classification_loss(model(images), labels, label_smoothing)


def _device(model) -> torch.device:
    return next(model.parameters()).device


# -- evaluate ------------------------------------------------------------------------------------

@torch.no_grad()
def predict_logits(model: VisionTransformer, images: Tensor, batch_size: int = 256) -> Tensor:
    model.eval()
    device = _device(model)
    return torch.cat([model(images[i:i + batch_size].to(device)).float().cpu()
                      for i in range(0, len(images), batch_size)]) if len(images) else torch.zeros(0)


def accuracy(model: VisionTransformer, images: Tensor, labels: Tensor) -> float:
    if len(labels) == 0:
        return float("nan")
    return (predict_logits(model, images).argmax(-1) == labels).float().mean().item()


# -- the user-facing object ----------------------------------------------------------------------

class ImageClassifier:
    """A VisionTransformer with its class names and image format, ready to predict."""

    def __init__(self, model: VisionTransformer, classes: Sequence[str], mode: str = "L",
                 device: str | torch.device = "cpu", meta: dict[str, Any] | None = None):
        self.model = model.to(device).eval()
        self.classes, self.mode = list(classes), mode
        self.device = torch.device(device)
        # What config.json says besides the family and the model fields (those come from `model`).
        self.meta = {k: v for k, v in (meta or {}).items() if k not in ("family", "model")}

    @classmethod
    def load(cls, folder: str | Path, device: str | torch.device = "cpu") -> ImageClassifier:
        model, meta = load_model(folder, device, expect=FAMILY)
        classes = meta.get("classes") or [str(i) for i in range(model.config.n_classes)]
        return cls(model, classes, meta.get("image_mode", "L"), device, meta)

    def save(self, folder: str | Path) -> Path:
        save_model(folder, FAMILY, self.model, {**self.meta, "classes": self.classes,
                                                 "image_mode": self.mode})
        return Path(folder)

    def predict(self, images: Tensor) -> list[tuple[str, float]]:
        """images (B, C, H, W) in [0, 1] -> (class name, probability) per image."""
        probs = predict_logits(self.model, images).softmax(-1)
        return [(self.classes[int(i)], float(p)) for p, i in zip(*probs.max(-1), strict=True)]

    def predict_files(self, paths: Sequence[str | Path]) -> list[tuple[str, float]]:
        size = self.model.config.image_size
        return self.predict(torch.stack([load_image(p, self.mode, size) for p in paths]))

    def evaluate(self, images: Tensor, labels: Tensor) -> float:
        return accuracy(self.model, images, labels)

    def corpus_split(self, split: str = "test") -> tuple[Tensor, Tensor, str] | None:
        """(images, labels, source) of a split (train, valid, test) of the data it was trained
        on, read again from its folder's data settings (the built-in corpus or the image
        folder, split as in training); None for a folder without them (an imported model)."""
        data = self.meta.get("experiment", {}).get("data")
        if data is None:
            return None
        images, labels = load_image_corpus(VisionDataConfig.from_dict(data)).splits[split]
        return images, labels, data.get("images") or data.get("corpus")


# -- train ---------------------------------------------------------------------------------------

def train(exp: Experiment, resume: bool = False, out: str | Path | None = None,
          say: Callable[[str], None] = print) -> TrainResult:
    """Train a ViT into the folder `out` (or the experiment's). The result holds the test
    accuracy (metrics["test_accuracy"]) when the corpus has test images."""
    # the run's folder has one writer, this process, until its last save (aiayn.folder.lock)
    with start_run(exp, resume, out, say) as run:
        say, data, train_cfg = run.say, exp.data, exp.train
        corpus = load_image_corpus(data)
        (x_train, y_train), (x_valid, y_valid) = corpus.splits["train"], corpus.splits["valid"]
        if len(y_train) == 0:
            raise UserError(f"{data.images or data.corpus}: no training images")
        cfg = exp.model_config(image_size=corpus.image_size, channels=corpus.channels,
                               n_classes=len(corpus.classes))
        say(f"data: {len(y_train)} training, {len(y_valid)} validation, "
            f"{len(corpus.splits['test'][1])} test images of {corpus.channels}x{corpus.image_size}x"
            f"{corpus.image_size}, {len(corpus.classes)} classes")
        vit = VisionTransformer(cfg)
        say(f"model: {vit.num_parameters():,} parameters (d_model {cfg.d_model}, {cfg.n_layers} layers, "
            f"{cfg.n_patches} patches of {cfg.patch_size}x{cfg.patch_size})")

        def evaluate(m) -> dict[str, float]:
            return {"valid_accuracy": accuracy(m, x_valid, y_valid)} if len(y_valid) else {}

        meta = {"task": "image-classification", "classes": corpus.classes, "image_mode": corpus.mode}
        trainer = Trainer(vit, train_cfg, image_batches(x_train, y_train, data, train_cfg.seed),
                          lambda m, b: image_classification_loss(m, b, train_cfg.label_smoothing), run,
                          family=FAMILY, meta=meta, evaluate=evaluate)
        result = trainer.fit()
        if len(corpus.splits["test"][1]):
            result.metrics["test_accuracy"] = accuracy(vit, *corpus.splits["test"])
        return result


__all__ = ["FAMILY", "ImageClassifier", "TASK", "VisionDataConfig",
           "accuracy", "image_classification_loss", "experiment", "image_batches", "train"]
