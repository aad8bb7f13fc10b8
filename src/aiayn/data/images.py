"""Image corpora for the Vision Transformer: the built-in ``digits`` and folders of image files.

    digits        scikit-learn's bundled handwritten digits: 1,797 real 8x8 grey images, 10
                  classes (0-9); pixel values 0..16 scaled to [0, 1]. Stratified, seeded splits.
    a folder      one sub-folder per class (its name is the label), image files inside, read with
                  Pillow, converted to grey ("L") or RGB and resized to image_size x image_size;
                  pixels scaled to [0, 1]. Splits from a hash of each file's bytes, so a file and
                  any byte-identical copy of it always land in the same split.

Both give an ``ImageCorpus``: splits "train" / "valid" / "test" of (images (N, C, H, W) float32,
labels (N,) int64) and the class names that label i stands for. No image is in two splits.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.errors import UserError

SPLITS = ("train", "valid", "test")


@dataclass
class ImageCorpus:
    splits: dict[str, tuple[Tensor, Tensor]]  # split -> (images (N, C, H, W) in [0, 1], labels (N,))
    classes: list[str]
    channels: int
    image_size: int

    @property
    def mode(self) -> str:
        """The Pillow mode images are converted to: "L" (grey) or "RGB"."""
        return "L" if self.channels == 1 else "RGB"


def _check_fracs(where: str, valid_frac: float, test_frac: float) -> None:
    if not (0 <= valid_frac and 0 <= test_frac and valid_frac + test_frac < 1):
        raise UserError(f"{where}: valid_frac={valid_frac} and test_frac={test_frac} must be >= 0 "
                        "and sum to less than 1")


def digits(valid_frac: float = 0.1, test_frac: float = 0.2, seed: int = 0) -> ImageCorpus:
    """scikit-learn's 8x8 digits, split stratified by class with a fixed seed (deterministic)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    _check_fracs("digits", valid_frac, test_frac)
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32)[:, None] / 16.0  # (N, 1, 8, 8) in [0, 1]
    y = torch.tensor(data.target, dtype=torch.long)
    index = np.arange(len(y))
    rest, test = train_test_split(index, test_size=test_frac, stratify=data.target, random_state=seed)
    train, valid = train_test_split(rest, test_size=valid_frac / (1 - test_frac),
                                    stratify=data.target[rest], random_state=seed)
    parts = zip(SPLITS, (train, valid, test), strict=True)
    splits = {name: (x[np.sort(i)], y[np.sort(i)]) for name, i in parts}
    return ImageCorpus(splits, [str(d) for d in data.target_names], channels=1, image_size=8)


def _image_extensions() -> set[str]:
    from PIL import Image

    return {ext.lower() for ext in Image.registered_extensions()}


def load_image(path: str | Path, mode: str, image_size: int) -> Tensor:
    """One image file -> (C, image_size, image_size) float32 in [0, 1]."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img = img.convert(mode)
            if img.size != (image_size, image_size):
                img = img.resize((image_size, image_size), Image.Resampling.BILINEAR)
            array = np.asarray(img, dtype=np.float32) / 255.0
    except FileNotFoundError:
        raise UserError(f"{path}: image file not found") from None
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise UserError(f"{path}: not a readable image ({e})") from None
    tensor = torch.from_numpy(array.copy())
    return tensor[None] if tensor.dim() == 2 else tensor.permute(2, 0, 1)  # (C, H, W)


def _guess_format(files: list[Path]) -> tuple[int, int]:
    """(channels, image_size) from the first file: grey if it is grey, its size if square."""
    from PIL import Image

    path = files[0]
    try:
        with Image.open(path) as img:
            mode, (w, h) = img.mode, img.size
    except Exception as e:  # noqa: BLE001  (Pillow raises many kinds)
        raise UserError(f"{path}: not a readable image ({e})") from None
    if w != h:
        raise UserError(f"{path}: image is {w}x{h}, not square; set data.image_size to resize "
                        "all images")
    return (1 if mode in ("1", "L", "LA", "I", "I;16", "F") else 3), w


def image_folder(folder: str | Path, image_size: int | None = None, channels: int | None = None,
                 valid_frac: float = 0.1, test_frac: float = 0.2) -> ImageCorpus:
    """A folder with one sub-folder per class -> ImageCorpus. image_size / channels default to
    the first image's (it must then be square)."""
    folder = Path(folder)
    _check_fracs(str(folder), valid_frac, test_frac)
    if not folder.is_dir():
        raise UserError(f"{folder}: image folder not found")
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if len(classes) < 2:
        raise UserError(f"{folder}: needs at least 2 class sub-folders (one per class), "
                        f"found {len(classes)}")
    extensions = _image_extensions()
    files: list[tuple[Path, int]] = []
    for label, name in enumerate(classes):
        found = sorted(p for p in (folder / name).iterdir()
                       if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in extensions)
        if not found:
            raise UserError(f"{folder / name}: class folder has no image files")
        files += [(p, label) for p in found]
    if image_size is None or channels is None:
        guessed_channels, guessed_size = _guess_format([p for p, _ in files])
        channels = guessed_channels if channels is None else channels
        image_size = guessed_size if image_size is None else image_size
    if channels not in (1, 3):
        raise UserError(f"channels={channels} is not supported (1 = grey, 3 = RGB)")
    if image_size <= 0:
        raise UserError(f"image_size={image_size} must be positive")
    mode = "L" if channels == 1 else "RGB"
    parts: dict[str, tuple[list[Tensor], list[int]]] = {s: ([], []) for s in SPLITS}
    for path, label in files:
        images, labels = parts[_split_of_bytes(path, valid_frac, test_frac)]
        images.append(load_image(path, mode, image_size))
        labels.append(label)
    splits = {s: (torch.stack(x) if x else torch.zeros(0, channels, image_size, image_size),
                  torch.tensor(y, dtype=torch.long)) for s, (x, y) in parts.items()}
    return ImageCorpus(splits, classes, channels, image_size)


def _split_of_bytes(path: Path, valid_frac: float, test_frac: float) -> str:
    h = int.from_bytes(hashlib.blake2b(path.read_bytes(), digest_size=8).digest(), "big")
    u = h / 2.0**64
    return "test" if u < test_frac else "valid" if u < test_frac + valid_frac else "train"


def random_affine(images: Tensor, generator: torch.Generator, rotate: float = 10.0,
                  scale: float = 0.1, translate: float = 0.5) -> Tensor:
    """Training augmentation: each image rotated by up to +-`rotate` degrees, scaled by up to
    +-`scale`, shifted by up to +-`translate` pixels (bilinear, zero fill). (B, C, H, W) -> same."""
    b, _, h, w = images.shape
    u = torch.rand(4, b, generator=generator) * 2 - 1  # uniform in [-1, 1)
    angle = u[0] * rotate * math.pi / 180
    zoom = 1 + u[1] * scale
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    tx, ty = u[2] * translate * 2 / w, u[3] * translate * 2 / h  # pixels -> [-1, 1] grid units
    theta = torch.stack([torch.stack([cos, -sin, tx], 1), torch.stack([sin, cos, ty], 1)], 1)
    grid = F.affine_grid(theta.to(images.dtype), list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


IMAGE_CORPORA = {"digits": digits}


def load_images(name_or_folder: str | Path, **kw) -> ImageCorpus:
    """The built-in corpus of that name, or the image folder at that path."""
    if str(name_or_folder) in IMAGE_CORPORA:
        return IMAGE_CORPORA[str(name_or_folder)](**{k: v for k, v in kw.items()
                                                     if k in ("valid_frac", "test_frac")})
    return image_folder(name_or_folder, **kw)


__all__ = ["IMAGE_CORPORA", "ImageCorpus", "digits", "image_folder", "load_image", "load_images",
           "random_affine"]
