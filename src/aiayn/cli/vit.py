"""`aiayn vit train | predict | eval`: the Vision Transformer's commands.

    aiayn vit train [CONFIG] [key=value ...] [--corpus digits | --images DIR] --out MODEL [--resume]
    aiayn vit predict --model MODEL IMAGE... [--json]
    aiayn vit eval --model MODEL [--images DIR] [--split test]

CONFIG is a YAML/JSON file with sections out / model / data / train (configs/vit-*.yaml) or a
model preset name (vit-digits, tiny); without one, the vit-digits recipe. Overrides use dotted
keys: model.n_layers=2 data.batch_size=64 train.max_steps=500 out=runs/vit.
Image files are read with Pillow, converted to the model's mode (grey or RGB) and size; pixel
values are scaled to [0, 1] (for digits models: bright = ink, as in scikit-learn's digits).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from aiayn.errors import ConfigError, UserError

SECTIONS = ("out", "model", "data", "train")


def register(sub) -> None:
    """Add `aiayn vit train|predict|eval` to the `aiayn` parser."""
    vit = sub.add_parser("vit", help="train or use a Vision Transformer image classifier",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    vit.set_defaults(func=lambda args: (vit.print_help(), 2)[1])
    cmds = vit.add_subparsers(dest="vit_command", metavar="COMMAND")

    train = cmds.add_parser("train", help="train a ViT on digits or a folder of images")
    train.add_argument("items", nargs="*", metavar="[CONFIG] [KEY=VALUE]",
                       help="config file or preset name, then overrides (train.max_steps=100); "
                       "put them before the --options")
    src = train.add_mutually_exclusive_group()
    src.add_argument("--corpus", choices=("digits",), help="built-in image corpus (default digits)")
    src.add_argument("--images", metavar="DIR", help="folder with one sub-folder of images per class")
    train.add_argument("--out", help="model folder to write (or `out:` in the config)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out")
    train.set_defaults(func=_train)

    pred = cmds.add_parser("predict", help="classify image files")
    pred.add_argument("--model", required=True, metavar="DIR")
    pred.add_argument("images", nargs="+", metavar="IMAGE")
    pred.add_argument("--json", action="store_true", help="print JSON lines")
    pred.set_defaults(func=_predict)

    ev = cmds.add_parser("eval", help="accuracy on a split of the training data or on a folder")
    ev.add_argument("--model", required=True, metavar="DIR")
    ev.add_argument("--images", metavar="DIR", help="score every image of this class folder")
    ev.add_argument("--split", choices=("train", "valid", "test"), default="test",
                    help="split of the model's own training data (default test)")
    ev.set_defaults(func=_eval)


def read_experiment(items: list[str], presets: dict[str, Any],
                    default_preset: str) -> tuple[dict[str, Any], str]:
    """(raw sections, where) from [CONFIG] [KEY=VALUE ...]: CONFIG is a file or a preset name."""
    from aiayn.training.experiment import apply_overrides, read_config_file

    config = None
    if items and "=" not in items[0]:
        config, items = items[0], items[1:]
    for item in items:
        if "=" not in item:
            raise UserError(f"{item!r}: expected KEY=VALUE after the config (e.g. train.max_steps=100)")
    if config is None:  # the family's default recipe (its model builder picks the preset)
        raw: dict[str, Any] = {}
        where = f"the {default_preset} recipe"
    elif config in presets and not Path(config).exists():
        raw, where = {"model": {"preset": config}}, f"preset {config}"
    else:
        raw, where = read_config_file(config), config
    raw = apply_overrides(raw, items, where)
    unknown = sorted(set(raw) - set(SECTIONS))
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}; keys are {', '.join(SECTIONS)}")
    for name in ("model", "data", "train"):
        raw[name] = raw.get(name) or {}
        if not isinstance(raw[name], dict):
            raise UserError(f"{where}: {name}: expected a mapping of fields, got {raw[name]!r}")
    return raw, where


def make_config(cls, fields: dict[str, Any], where: str, section: str):
    try:
        return cls.from_dict(fields)
    except ConfigError as e:
        raise UserError(f"{where}: {section}: {e}") from None


def out_folder(args: argparse.Namespace, raw: dict[str, Any], where: str) -> str:
    out = args.out or raw.get("out")
    if not isinstance(out, str) or not out:
        raise UserError(f"{where}: no output folder: pass --out DIR or set out: in the config")
    return out


def _train(args: argparse.Namespace) -> int:
    from aiayn.config import VIT_PRESETS, TrainConfig
    from aiayn.vision import VIT_TRAIN_DEFAULTS, VisionDataConfig, train_vit

    raw, where = read_experiment(args.items, VIT_PRESETS, "vit-digits")
    if args.images:
        raw["data"].update(images=args.images, corpus=None)
    elif args.corpus:
        raw["data"].update(corpus=args.corpus, images=None)
    data = make_config(VisionDataConfig, raw["data"], where, "data")
    train = make_config(TrainConfig, {**VIT_TRAIN_DEFAULTS, **raw["train"]}, where, "train")
    out = out_folder(args, raw, where)
    result, test_accuracy = train_vit(raw["model"], train, data, out, resume=args.resume,
                                      say=lambda s: print(s, flush=True), where=where)
    valid = result.metrics.get("valid_accuracy")
    how = "interrupted" if result.interrupted else f"stopped by {result.stopped_by}"
    print(f"trained {result.step} steps in {result.seconds:.0f} s ({how}); "
          + (f"valid accuracy {100 * valid:.2f}%, " if valid is not None else "")
          + f"test accuracy {100 * test_accuracy:.2f}%; model saved in {out}")
    return 130 if result.interrupted else 0


def _predict(args: argparse.Namespace) -> int:
    from aiayn.vision import ImageClassifier

    clf = ImageClassifier.load(args.model)
    for path, (label, prob) in zip(args.images, clf.predict_files(args.images), strict=True):
        if args.json:
            print(json.dumps({"image": path, "label": label, "probability": round(prob, 6)}))
        else:
            print(f"{path}\t{label}\t{prob:.4f}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from aiayn.data.images import image_folder
    from aiayn.vision import ImageClassifier, VisionDataConfig, load_image_corpus

    clf = ImageClassifier.load(args.model)
    cfg = clf.model.config
    if args.images:
        corpus = image_folder(args.images, cfg.image_size, cfg.channels, valid_frac=0.0, test_frac=0.0)
        unknown = sorted(set(corpus.classes) - set(clf.classes))
        if unknown:
            raise UserError(f"{args.images}: class folder {unknown[0]!r} is not a class of the model "
                            f"({', '.join(clf.classes)})")
        images, labels = corpus.splits["train"]
        labels = labels.apply_(lambda i: clf.classes.index(corpus.classes[i]))
        what = f"{args.images} ({len(labels)} images)"
    else:
        data = clf.meta.get("experiment", {}).get("data")
        if data is None:
            raise UserError(f"{args.model}: no record of its training data; score a folder "
                            "with --images")
        images, labels = load_image_corpus(VisionDataConfig.from_dict(data)).splits[args.split]
        source = data.get("images") or data.get("corpus")
        what = f"the {args.split} split of {source} ({len(labels)} images)"
    print(f"accuracy {100 * clf.evaluate(images, labels):.2f}% on {what}")
    return 0
