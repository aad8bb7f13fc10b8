"""Image corpora: digits splits, image folders read with Pillow, clear errors, augmentation."""

import numpy as np
import pytest
import torch
from PIL import Image

from aiayn.data.images import digits, image_folder, load_image, load_images, random_affine
from aiayn.errors import UserError


def _image_key(x: torch.Tensor) -> bytes:
    return x.numpy().tobytes()


def test_digits_splits_are_disjoint_deterministic_and_stratified():
    corpus = digits()
    sizes = {name: len(y) for name, (_, y) in corpus.splits.items()}
    assert sizes == {"train": 1257, "valid": 180, "test": 360}
    keys = {name: {_image_key(img) for img in x} for name, (x, _) in corpus.splits.items()}
    assert sum(len(k) for k in keys.values()) == 1797  # every image once, none shared
    assert not (keys["train"] & keys["test"] or keys["train"] & keys["valid"] or keys["valid"] & keys["test"])
    again = digits()
    for name in corpus.splits:
        assert torch.equal(corpus.splits[name][0], again.splits[name][0])
    counts = torch.bincount(corpus.splits["test"][1], minlength=10)
    assert counts.min() >= 35 and counts.max() <= 37  # stratified: ~36 of each digit
    x, _ = corpus.splits["train"]
    assert x.shape[1:] == (1, 8, 8) and x.min() == 0.0 and x.max() == 1.0
    assert corpus.classes == [str(d) for d in range(10)] and corpus.mode == "L"


def _write_folder(root, n_per_class=6, size=8, mode="L"):
    rng = np.random.default_rng(0)
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(n_per_class):
            shape = (size, size) if mode == "L" else (size, size, 3)
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(root / name / f"{i}.png")
    (root / "cat" / "notes.txt").write_text("not an image")  # ignored: not an image extension
    return root


def test_image_folder_reads_classes_and_splits(tmp_path):
    root = _write_folder(tmp_path / "imgs", n_per_class=20)
    corpus = image_folder(root, valid_frac=0.2, test_frac=0.2)
    assert corpus.classes == ["cat", "dog"] and corpus.channels == 1 and corpus.image_size == 8
    total = sum(len(y) for _, y in corpus.splits.values())
    assert total == 40
    keys = [{_image_key(img) for img in x} for x, _ in corpus.splits.values()]
    assert sum(len(k) for k in keys) == 40 and not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    again = image_folder(root, valid_frac=0.2, test_frac=0.2)
    for name, (x, y) in corpus.splits.items():
        assert torch.equal(x, again.splits[name][0]) and torch.equal(y, again.splits[name][1])
    assert all(len(y) for _, y in corpus.splits.values())  # 40 files: every split gets some


def test_identical_files_land_in_the_same_split(tmp_path):
    root = _write_folder(tmp_path / "imgs", n_per_class=20)
    for i in range(20):
        (root / "cat" / f"copy{i}.png").write_bytes((root / "cat" / f"{i}.png").read_bytes())
    corpus = image_folder(root, valid_frac=0.3, test_frac=0.3)
    keys = [{_image_key(img) for img in x} for x, _ in corpus.splits.values()]
    assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    # pixel values are the file's, scaled to [0, 1]
    first = np.asarray(Image.open(root / "cat" / "0.png"), dtype=np.float32) / 255
    assert torch.allclose(load_image(root / "cat" / "0.png", "L", 8)[0], torch.from_numpy(first))


def test_image_folder_resizes_and_converts(tmp_path):
    root = _write_folder(tmp_path / "rgb", size=10, mode="RGB")
    corpus = image_folder(root, image_size=4, channels=1)
    x, _ = corpus.splits["train"]
    assert x.shape[1:] == (1, 4, 4)
    rgb = image_folder(root)
    assert rgb.channels == 3 and rgb.splits["train"][0].shape[1:] == (3, 10, 10)
    assert load_images(root).classes == ["cat", "dog"]


def test_image_folder_errors_name_the_problem(tmp_path):
    with pytest.raises(UserError, match="not found"):
        image_folder(tmp_path / "missing")
    (tmp_path / "one" / "only").mkdir(parents=True)
    with pytest.raises(UserError, match="at least 2 class"):
        image_folder(tmp_path / "one")
    root = _write_folder(tmp_path / "ok")
    (root / "empty").mkdir()
    with pytest.raises(UserError, match="empty: class folder has no image"):
        image_folder(root)
    (root / "empty" / "broken.png").write_bytes(b"not a png at all")
    with pytest.raises(UserError, match=r"broken\.png: not a readable image"):
        image_folder(root, image_size=8, channels=1)
    wide = _write_folder(tmp_path / "wide", size=8)
    Image.new("L", (8, 6)).save(wide / "cat" / "0.png")
    with pytest.raises(UserError, match="not square"):
        image_folder(wide)
    with pytest.raises(UserError, match="valid_frac"):
        digits(valid_frac=0.5, test_frac=0.6)


def test_random_affine_identity_and_variety():
    images = digits().splits["train"][0][:16]
    same = random_affine(images, torch.Generator().manual_seed(0), rotate=0, scale=0, translate=0)
    assert torch.allclose(same, images, atol=1e-6)
    a = random_affine(images, torch.Generator().manual_seed(1))
    b = random_affine(images, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.allclose(a, images)
    assert a.shape == images.shape and a.min() >= 0 and a.max() <= 1 + 1e-6
