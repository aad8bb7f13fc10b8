"""`aiayn classify train | predict | eval`, `aiayn import`, `aiayn embed`: encoder-only models.

    aiayn classify train [CONFIG] [key=value ...]
                         (--corpus gettext-origin | --train F.tsv [--valid F.tsv]) --out MODEL [--resume]
    aiayn classify predict --model MODEL [TEXT ...]        (default: one text per stdin line)
    aiayn classify eval --model MODEL [--test F.tsv]      (default: the corpus's test split)
    aiayn import hf-bert DIR --out MODEL                   (BERT-architecture checkpoint folder)
    aiayn import hf-vit DIR --out MODEL                    (ViT checkpoint folder)
    aiayn embed --model MODEL [--json | --similarity] TEXT ...

CONFIG is a YAML/JSON file with sections out / model / data / train (configs/bert-*.yaml) or a
model preset name (bert-small-cpu, bert-tiny, ...). model.init=DIR fine-tunes an existing encoder
(e.g. one made by `aiayn import hf-bert`) instead of training one from scratch; data.mlm_steps=N
first pretrains with BERT's masked-LM objective. TSV files hold text<TAB>label per line.
"""

from __future__ import annotations

import argparse
import json
import sys

from aiayn.cli.vit import make_config, out_folder, read_experiment
from aiayn.errors import UserError


def register(sub) -> None:
    """Add `aiayn classify`, `aiayn import` and `aiayn embed` to the `aiayn` parser."""
    fmt = argparse.RawDescriptionHelpFormatter
    clf = sub.add_parser("classify", help="train or use a text classifier (encoder-only, BERT-style)",
                         description=__doc__, formatter_class=fmt)
    clf.set_defaults(func=lambda args: (clf.print_help(), 2)[1])
    cmds = clf.add_subparsers(dest="classify_command", metavar="COMMAND")

    train = cmds.add_parser("train", help="train a text classifier")
    train.add_argument("items", nargs="*", metavar="[CONFIG] [KEY=VALUE]",
                       help="config file or preset name, then overrides (train.max_steps=100); "
                       "put them before the --options")
    src = train.add_mutually_exclusive_group()
    src.add_argument("--corpus", choices=("gettext-origin",), help="built-in labelled corpus")
    src.add_argument("--train", metavar="FILE.tsv", help="training examples: text<TAB>label lines")
    train.add_argument("--valid", metavar="FILE.tsv", help="validation examples (with --train)")
    train.add_argument("--out", help="model folder to write (or `out:` in the config)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out")
    train.set_defaults(func=_train)

    pred = cmds.add_parser("predict", help="label texts (arguments, or one per stdin line)")
    pred.add_argument("--model", required=True, metavar="DIR")
    pred.add_argument("texts", nargs="*", metavar="TEXT")
    pred.add_argument("--json", action="store_true", help="print JSON lines")
    pred.set_defaults(func=_predict)

    ev = cmds.add_parser("eval", help="accuracy on a TSV file or the training corpus's test split")
    ev.add_argument("--model", required=True, metavar="DIR")
    ev.add_argument("--test", metavar="FILE.tsv", help="text<TAB>label lines")
    ev.set_defaults(func=_eval)

    imp = sub.add_parser("import", help="convert a checkpoint folder of another library",
                         description="Convert a local checkpoint folder (config.json + "
                         "model.safetensors [+ tokenizer.json]) into an aiayn model folder.")
    imp.set_defaults(func=lambda args: (imp.print_help(), 2)[1])
    kinds = imp.add_subparsers(dest="import_kind", metavar="KIND")
    for kind, (help_text, func) in IMPORTERS.items():
        p = kinds.add_parser(kind, help=help_text)
        p.add_argument("folder", metavar="DIR", help="checkpoint folder")
        p.add_argument("--out", required=True, help="aiayn model folder to write")
        p.set_defaults(func=func)

    emb = sub.add_parser("embed", help="sentence embeddings (mean-pooled, normalised)")
    emb.add_argument("--model", required=True, metavar="DIR")
    emb.add_argument("texts", nargs="*", metavar="TEXT", help="default: one text per stdin line")
    how = emb.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true", help="print [{text, embedding}, ...] as JSON")
    how.add_argument("--similarity", action="store_true", help="print the cosine similarity matrix")
    emb.set_defaults(func=_embed)


def _import_bert(args: argparse.Namespace) -> int:
    from aiayn.text_encoder import import_hf_bert

    enc = import_hf_bert(args.folder, args.out)
    cfg = enc.model.config
    print(f"imported {args.folder}: {enc.model.num_parameters():,} parameters ({cfg.n_layers} layers, "
          f"d_model {cfg.d_model}, vocabulary {cfg.vocab_size}) into {args.out}")
    return 0


def _import_vit(args: argparse.Namespace) -> int:
    from aiayn.convert.hf_vit import load_hf_folder
    from aiayn.vision import ImageClassifier

    model = load_hf_folder(args.folder)
    ImageClassifier(model, [str(i) for i in range(model.config.n_classes)], "RGB"
                    if model.config.channels == 3 else "L", meta={"source": args.folder}).save(args.out)
    print(f"imported {args.folder}: {model.num_parameters():,} parameters into {args.out}")
    return 0


# kind -> (help, function). Other families add their converters here (e.g. "hf-gpt2").
IMPORTERS = {
    "hf-bert": ("BERT-architecture folder (e.g. all-MiniLM-L6-v2) -> encoder model", _import_bert),
    "hf-vit": ("ViT folder (transformers ViTModel / ViTForImageClassification) -> vit model",
               _import_vit),
}


def _train(args: argparse.Namespace) -> int:
    from aiayn.classify import CLASSIFY_TRAIN_DEFAULTS, ClassifyDataConfig, train_classifier
    from aiayn.config import ENCODER_PRESETS, TrainConfig

    raw, where = read_experiment(args.items, ENCODER_PRESETS, "bert-small-cpu")
    if args.valid and not args.train:
        raise UserError("--valid goes with --train")
    if args.train:
        raw["data"].update(train=args.train, valid=args.valid, corpus=None)
    elif args.corpus:
        raw["data"].update(corpus=args.corpus, train=None, valid=None)
    data = make_config(ClassifyDataConfig, raw["data"], where, "data")
    defaults = dict(CLASSIFY_TRAIN_DEFAULTS)
    if "init" in raw["model"]:
        defaults["lr"] = 5e-5  # fine-tuning a pretrained encoder (BERT's range: 2e-5 .. 5e-5)
    train = make_config(TrainConfig, {**defaults, **raw["train"]}, where, "train")
    out = out_folder(args, raw, where)
    result, test = train_classifier(raw["model"], train, data, out, resume=args.resume,
                                    say=lambda s: print(s, flush=True), where=where)
    valid = result.metrics.get("valid_accuracy")
    how = "interrupted" if result.interrupted else f"stopped by {result.stopped_by}"
    print(f"trained {result.step} steps in {result.seconds:.0f} s ({how}); "
          + (f"valid accuracy {100 * valid:.2f}%, " if valid is not None else "")
          + (f"test accuracy {100 * test:.2f}%, " if test is not None else "")
          + f"model saved in {out}")
    return 130 if result.interrupted else 0


def _texts(args: argparse.Namespace) -> list[str]:
    if args.texts:
        return args.texts
    from aiayn.cli.translation import _read_stdin_lines

    return [line for line in _read_stdin_lines() if line.strip()]


def _predict(args: argparse.Namespace) -> int:
    from aiayn.text_encoder import TextEncoder

    enc = TextEncoder.load(args.model)
    texts = _texts(args)
    for text, (label, prob) in zip(texts, enc.classify(texts), strict=True):
        if args.json:
            print(json.dumps({"text": text, "label": label, "probability": round(prob, 6)},
                             ensure_ascii=False))
        else:
            print(f"{label}\t{prob:.4f}\t{text}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from aiayn.classify import ClassifyDataConfig, load_examples
    from aiayn.data.parallel import read_tsv
    from aiayn.text_encoder import TextEncoder

    enc = TextEncoder.load(args.model)
    if args.test:
        examples, what = read_tsv(args.test), args.test
    else:
        data = enc.meta.get("experiment", {}).get("data")
        if data is None or not data.get("corpus"):
            raise UserError(f"{args.model}: not trained on a built-in corpus; give --test FILE.tsv")
        examples = load_examples(ClassifyDataConfig.from_dict(data)).get("test", [])
        what = f"the test split of {data['corpus']}"
    unknown = sorted({y for _, y in examples} - set(enc.labels))
    if unknown:
        raise UserError(f"{args.test or args.model}: label {unknown[0]!r} is not one of the model's "
                        f"({', '.join(enc.labels)})")
    print(f"accuracy {100 * enc.evaluate(examples):.2f}% on {what} ({len(examples)} examples)")
    return 0


def _embed(args: argparse.Namespace) -> int:
    from aiayn.text_encoder import TextEncoder

    enc = TextEncoder.load(args.model)
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
