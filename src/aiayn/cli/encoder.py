"""`aiayn classify train | predict | eval`, `aiayn import`, `aiayn embed`: encoder-only models.

    aiayn classify train [CONFIG] [key=value ...]
                         (--corpus gettext-origin | --train F.tsv [--valid F.tsv]) --out MODEL [--resume]
    aiayn classify predict --model MODEL [TEXT ...]        (default: one text per stdin line)
    aiayn classify eval --model MODEL [--test F.tsv]      (default: the corpus's test split)
    aiayn import hf-bert DIR --out MODEL                   (BERT-architecture checkpoint folder)
    aiayn import hf-vit DIR --out MODEL                    (ViT checkpoint folder)
    aiayn embed --model MODEL [--json | --similarity] TEXT ...

CONFIG is a YAML/JSON file with sections out / model / data / train, a built-in config name
(bert-gettext-origin, ...: see `aiayn configs`) or a model preset name (bert-small-cpu, ...);
without one, the classifier's recipe (the built-in config classify), whose train settings every
config's train section is layered over. model.init=DIR fine-tunes an existing encoder (e.g. one
made by `aiayn import hf-bert`) instead of training one from scratch, from a lower peak lr unless
the config sets one; data.mlm_steps=N first pretrains with BERT's masked-LM objective. TSV files
hold text<TAB>label per line.
"""

from __future__ import annotations

import argparse
import json
import sys

from aiayn.cli.common import (
    command_group,
    config_of,
    model_command,
    percent,
    read_stdin_lines,
    report_training,
    say,
    split_overrides,
    training_command,
)
from aiayn.errors import UserError


def register(sub) -> None:
    """Add `aiayn classify`, `aiayn import` and `aiayn embed` to the `aiayn` parser."""
    cmds = command_group(sub, "classify", "classify_command",
                         help="train or use a text classifier (encoder-only, BERT-style)",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    train = cmds.add_parser("train", help="train a text classifier")
    training_command(train, _train, _data_options, task="text_classification")

    pred = model_command(cmds, "predict", "label texts (arguments, or one per stdin line)",
                         precision=False)
    pred.add_argument("texts", nargs="*", metavar="TEXT")
    pred.add_argument("--json", action="store_true", help="print JSON lines")
    pred.set_defaults(func=_predict)

    ev = model_command(cmds, "eval", "accuracy on a TSV file or the training corpus's test split",
                       precision=False)
    ev.add_argument("--test", metavar="FILE.tsv", help="text<TAB>label lines")
    ev.set_defaults(func=_eval)

    emb = model_command(sub, "embed", "sentence embeddings (mean-pooled, normalised)",
                        precision=False)
    emb.add_argument("texts", nargs="*", metavar="TEXT", help="default: one text per stdin line")
    how = emb.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true", help="print [{text, embedding}, ...] as JSON")
    how.add_argument("--similarity", action="store_true", help="print the cosine similarity matrix")
    emb.set_defaults(func=_embed)


def _data_options(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--corpus", choices=("gettext-origin",), help="built-in labelled corpus")
    src.add_argument("--train", metavar="FILE.tsv", help="training examples: text<TAB>label lines")
    p.add_argument("--valid", metavar="FILE.tsv", help="validation examples (with --train)")


def _train(args: argparse.Namespace) -> int:
    from aiayn.tasks.text_classification import experiment, train

    overrides = split_overrides(args)
    if args.valid and not args.train:
        raise UserError("--valid goes with --train")
    data = {"train": args.train, "valid": args.valid, "corpus": None} if args.train else \
        {"corpus": args.corpus, "train": None, "valid": None} if args.corpus else None
    exp = experiment(config_of(args), overrides, out=args.out, data=data)
    result = train(exp, resume=args.resume, say=say)
    details = percent("valid accuracy", result.metrics.get("valid_accuracy")) + \
        percent("test accuracy", result.metrics.get("test_accuracy"))
    return report_training(result, details)


def _texts(args: argparse.Namespace) -> list[str]:
    if args.texts:
        return args.texts
    return [line for line in read_stdin_lines() if line.strip()]


def _predict(args: argparse.Namespace) -> int:
    from aiayn.tasks.text_encoder import TextEncoder

    enc = TextEncoder.load(args.model, device=args.device)
    texts = _texts(args)
    for text, (label, prob) in zip(texts, enc.classify(texts), strict=True):
        if args.json:
            print(json.dumps({"text": text, "label": label, "probability": round(prob, 6)},
                             ensure_ascii=False))
        else:
            print(f"{label}\t{prob:.4f}\t{text}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from aiayn.data.parallel import read_tsv
    from aiayn.tasks.text_classification import TextEncoder, corpus_examples

    enc = TextEncoder.load(args.model, device=args.device)
    if args.test:
        examples, what = read_tsv(args.test), args.test
    else:
        examples = corpus_examples(enc, "test")
        if examples is None:
            raise UserError(f"{args.model}: not trained on a built-in corpus; give --test FILE.tsv")
        what = f"the test split of {enc.meta['experiment']['data']['corpus']}"
    unknown = sorted({y for _, y in examples} - set(enc.labels))
    if unknown:
        raise UserError(f"{args.test or args.model}: label {unknown[0]!r} is not one of the model's "
                        f"({', '.join(enc.labels)})")
    print(f"accuracy {100 * enc.evaluate(examples):.2f}% on {what} ({len(examples)} examples)")
    return 0


def _embed(args: argparse.Namespace) -> int:
    from aiayn.tasks.text_encoder import TextEncoder

    enc = TextEncoder.load(args.model, device=args.device)
    texts = _texts(args)
    vectors = enc.embed(texts)
    if args.json:
        print(json.dumps([{"text": t, "embedding": [round(float(x), 7) for x in v]}
                          for t, v in zip(texts, vectors, strict=True)], ensure_ascii=False))
    elif args.similarity:
        sims = vectors @ vectors.T
        for i, text in enumerate(texts):
            print(" ".join(f"{float(s):.4f}" for s in sims[i]) + f"\t{text}")
    else:
        for v in vectors:
            print(" ".join(f"{float(x):.6f}" for x in v))
    sys.stdout.flush()
    return 0
