"""`aiayn vit train | predict | eval`: the Vision Transformer's commands.

    aiayn vit train [CONFIG] [key=value ...] [--corpus digits | --images DIR] --out MODEL [--resume]
    aiayn vit predict --model MODEL IMAGE... [--json]
    aiayn vit eval --model MODEL [--images DIR] [--split test]

CONFIG is a YAML/JSON file with sections out / model / data / train (configs/vit-*.yaml) or a
model preset name (vit-digits, tiny); without one, the ViT's recipe (the built-in config
vit-digits), whose train settings every config's train section is layered over. Overrides use
dotted keys: model.n_layers=2 data.batch_size=64 train.max_steps=500 out=runs/vit.
Image files are read with Pillow, converted to the model's mode (grey or RGB) and size; pixel
values are scaled to [0, 1] (for digits models: bright = ink, as in scikit-learn's digits).
"""

from __future__ import annotations

import argparse
import json

from aiayn.cli.common import (
    command_group,
    config_of,
    model_command,
    percent,
    report_training,
    say,
    split_overrides,
    training_command,
)
from aiayn.errors import UserError


def register(sub) -> None:
    """Add `aiayn vit train|predict|eval` to the `aiayn` parser."""
    cmds = command_group(sub, "vit", "vit_command",
                         help="train or use a Vision Transformer image classifier",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    train = cmds.add_parser("train", help="train a ViT on digits or a folder of images")
    training_command(train, _train, _data_options, task="image_classification")

    pred = model_command(cmds, "predict", "classify image files", precision=False)
    pred.add_argument("images", nargs="+", metavar="IMAGE")
    pred.add_argument("--json", action="store_true", help="print JSON lines")
    pred.set_defaults(func=_predict)

    ev = model_command(cmds, "eval", "accuracy on a split of the training data or on a folder",
                       precision=False)
    ev.add_argument("--images", metavar="DIR", help="score every image of this class folder")
    ev.add_argument("--split", choices=("train", "valid", "test"), default="test",
                    help="split of the model's own training data (default test)")
    ev.set_defaults(func=_eval)


def _data_options(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--corpus", choices=("digits",), help="built-in image corpus (default digits)")
    src.add_argument("--images", metavar="DIR", help="folder with one sub-folder of images per class")


def _train(args: argparse.Namespace) -> int:
    from aiayn.tasks.image_classification import experiment, train

    overrides = split_overrides(args)
    data = {"images": args.images, "corpus": None} if args.images else \
        {"corpus": args.corpus, "images": None} if args.corpus else None
    exp = experiment(config_of(args), overrides, out=args.out, data=data)
    result = train(exp, resume=args.resume, say=say)
    details = percent("valid accuracy", result.metrics.get("valid_accuracy")) + \
        percent("test accuracy", result.metrics.get("test_accuracy"))
    return report_training(result, details)


def _predict(args: argparse.Namespace) -> int:
    from aiayn.tasks.image_classification import ImageClassifier

    clf = ImageClassifier.load(args.model, device=args.device)
    for path, (label, prob) in zip(args.images, clf.predict_files(args.images), strict=True):
        if args.json:
            print(json.dumps({"image": path, "label": label, "probability": round(prob, 6)}))
        else:
            print(f"{path}\t{label}\t{prob:.4f}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from aiayn.data.images import image_folder
    from aiayn.tasks.image_classification import ImageClassifier

    clf = ImageClassifier.load(args.model, device=args.device)
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
        split = clf.corpus_split(args.split)
        if split is None:
            raise UserError(f"{args.model}: no record of its training data; score a folder "
                            "with --images")
        images, labels, source = split
        what = f"the {args.split} split of {source} ({len(labels)} images)"
    print(f"accuracy {100 * clf.evaluate(images, labels):.2f}% on {what}")
    return 0
