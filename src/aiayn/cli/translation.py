"""`aiayn train | translate | eval | average`: the translation model's commands (`aiayn demo`
lives in aiayn.cli.demo).

    aiayn train CONFIG [key=value ...] [--out DIR] [--resume]   CONFIG: file, built-in or preset
    aiayn train auto --corpus DIR --minutes M [--ensemble N] [key=value ...]  a recipe for the data
                (any task: a config that names another, e.g. lm-char, runs as `aiayn lm train`)
                [--text FILE...]   plain text for a denoising objective (pretrain-span)
    aiayn translate --model DIR [--model DIR2 ...] [--beam 4] [--alpha 0.6] [--length-penalty gnmt|avg]
                    [--early-stopping exact|first_k|current_length] [--no-repeat-ngram-size N]
                    [--threads N] [--workers N|auto] [--engine torch|ctranslate2]
                    [--ct2-compute-type TYPE] [TEXT ...]
    aiayn eval --model DIR --src FILE --ref FILE [--json] [--hyp FILE] [--rouge]
                                                         (and translate's options)
    aiayn average --model DIR [--last 5] --out DIR2      (§6.1 checkpoint averaging)

Commands are thin: each parses its arguments and calls a typed function.
"""

from __future__ import annotations

import argparse
import json
import sys

from aiayn.cli.checks import check_engine_options, writable_file
from aiayn.cli.common import (
    beam_size,
    config_of,
    config_task_of,
    device_options,
    finite_float,
    non_negative_int,
    positive_int,
    read_stdin_lines,
    read_stdin_text,
    report_validated,
    runs_model,
    split_overrides,
    stated_precision,
    thread_count,
    thread_count_or_auto,
    train_as,
    training_command,
    warn,
)
from aiayn.errors import UserError

RAW = argparse.RawDescriptionHelpFormatter


def register(sub) -> None:
    """Add the translation commands to the `aiayn` parser."""
    p = sub.add_parser("train", help="train the model a config describes (any task)",
                       description="Train what CONFIG says (a YAML/JSON file, a built-in config "
                       "such as `demo`, `lm-char` or `vit-digits`, or a translation preset): a "
                       "Transformer (§5), or the model of the task the config names (task: "
                       "language_model, ...), as that task's own command would (`aiayn lm train`, "
                       "`aiayn classify train`, `aiayn vit train`; their data flags, such as "
                       "--text, are theirs alone). Dotted key=value arguments override it "
                       "(train.max_steps=100).",
                       formatter_class=RAW)
    training_command(p, _train, _data_options)

    p = sub.add_parser("translate", help="translate sentences (arguments, or one per stdin line)")
    _model_args(p)
    p.add_argument("sentences", nargs="*", metavar="TEXT",
                   help="sentences to translate (default: read one per line from stdin)")
    p.set_defaults(func=_translate)

    p = sub.add_parser("summarize", help="summarize texts with a sequence-to-sequence model "
                       "(e.g. one trained by `aiayn train summarize-small`)")
    _model_args(p)
    p.add_argument("texts", nargs="+", metavar="TEXT",
                   help="texts to summarize, each folded to one line as the corpus's are; "
                        "- reads one text from stdin (all of it)")
    p.set_defaults(func=_summarize)

    p = sub.add_parser("eval", help="sacreBLEU, chrF, exact match and speed on a test set")
    _model_args(p)
    p.add_argument("--src", required=True, help="source sentences, one per line")
    p.add_argument("--ref", required=True, help="reference translations, aligned with --src")
    p.add_argument("--hyp", help="also write the translations to this file")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.add_argument("--rouge", action="store_true",
                   help="also ROUGE-1/2/L F-measures with stemming, for summaries (always for a "
                        "model trained on a summarization corpus, e.g. stdlib-docstrings)")
    p.set_defaults(func=_eval)

    p = sub.add_parser("average", help="average the last N checkpoints into a new folder (§6.1)")
    p.add_argument("--model", required=True, help="model folder with checkpoints/")
    p.add_argument("--last", type=positive_int, default=5,
                   help="how many checkpoints (default 5, §6.1)")
    p.add_argument("--allow-fewer", action="store_true",
                   help="average what there is when fewer than --last checkpoints exist")
    p.add_argument("--out", required=True, help="new model folder for the averaged weights")
    p.set_defaults(func=_average)


def _data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", metavar="DIR", default=None,
                   help="with CONFIG auto: the corpus folder (train.src, train.tgt) to choose a "
                        "recipe for (aiayn.training.auto_recipe)")
    p.add_argument("--minutes", type=finite_float, default=None, metavar="M",
                   help="with CONFIG auto: the training budget in minutes the recipe is for")
    p.add_argument("--ensemble", type=positive_int, default=None, metavar="N",
                   help="with CONFIG auto: train N models, each for its share of --minutes, and "
                        "decode them as one (default: auto's choice, 2 where one model would "
                        "pass over the corpus 100 times or more, else 1)")
    p.add_argument("--text", nargs="+", metavar="FILE", default=None,
                   help="plain UTF-8 text files (a document per paragraph) to pretrain on, for a "
                        "config with data.objective (e.g. pretrain-span): data.text")


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, action="append", metavar="DIR",
                   help="model folder; given twice or more (--model A --model B), or a folder of "
                        "an ensemble (as `aiayn train auto` writes one): an ensemble, the mean of "
                        "their next-token distributions (fairseq's; one tokenizer for all)")
    p.add_argument("--beam", type=beam_size, default=None,
                   help="beam size; 1 = greedy (default 4, §6.1, or an imported model's own)")
    p.add_argument("--alpha", type=finite_float, default=None,
                   help="length penalty alpha (default 0.6, or an imported model's own)")
    p.add_argument("--length-penalty", default=None, choices=("gnmt", "avg"),
                   help="gnmt: ((5+|Y|)/6)^alpha (§6.1, default); avg: |Y|^alpha (HF, fairseq)")
    p.add_argument("--early-stopping", default=None,
                   choices=("exact", "first_k", "current_length"),
                   help="when a sentence's beam stops: exact (no live hypothesis can beat the "
                        "K-th best finished; default), first_k (K finished, as fairseq), "
                        "current_length (HF transformers' heuristic)")
    p.add_argument("--no-repeat-ngram-size", type=non_negative_int, default=None, metavar="N",
                   help="no N-gram twice in a translation (fairseq's and HF's option; default 0: "
                        "off, or an imported model's own)")
    p.add_argument("--min-length", type=non_negative_int, default=None, metavar="N",
                   help="no end of sentence before N output tokens (default 1, as fairseq's: no "
                        "empty translation; an imported model keeps its own; 0 allows empty)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (default 64)")
    device_options(p, weights=True)
    p.add_argument("--checkpoint", type=positive_int, metavar="STEP",
                   help="use the weights saved at this training step (checkpoints/)")
    p.add_argument("--threads", type=thread_count, default=None,
                   help="CPU threads for decoding (default: torch's, usually the core count)")
    p.add_argument("--workers", type=thread_count_or_auto, default="auto", metavar="N|auto",
                   help="CPU processes decoding batches side by side, one thread each; the same "
                        "output either way (default auto: one per CPU thread, at most one per "
                        "batch of --batch-size sentences; 1 on a GPU); with --engine "
                        "ctranslate2, its inter_threads")
    p.add_argument("--engine", default="torch", choices=("torch", "ctranslate2"),
                   help="who decodes: torch (aiayn's search, default) or ctranslate2 (OpenNMT's "
                        "C++ engine, pip install aiayn[ct2]: the same search settings and "
                        "output; the folder keeps its export in ctranslate2/, written on first "
                        "use)")
    p.add_argument("--ct2-compute-type", default=None, metavar="TYPE",
                   help="with --engine ctranslate2: the weights' type as CTranslate2 loads them: "
                        "default (float32, as exported), int8, int8_float32, int16, float16, "
                        "bfloat16, ...")


def _set_threads(args: argparse.Namespace) -> None:
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)


def _threads() -> int:
    import torch
    return torch.get_num_threads()


def _search(translator, args: argparse.Namespace) -> dict:
    """The search settings (Translator.search_options: given, else the folder's, else §6.1's),
    resolved once for the checks and the decoding; the beam's own settings are refused with
    greedy search (a beam of 1, given or the folder's), where they change nothing: a user who
    set them expected a beam."""
    search = translator.search_options(args.beam, args.alpha, args.length_penalty,
                                       args.early_stopping, args.no_repeat_ngram_size)
    if search["beam"] > 1:
        return search
    given = [flag for flag, value in (("--alpha", args.alpha),
                                      ("--length-penalty", args.length_penalty),
                                      ("--early-stopping", args.early_stopping))
             if value is not None]
    if given:
        raise UserError(f"{given[0]} has no effect with greedy search (beam 1): give --beam N "
                        f"(N > 1) for a beam search, or leave {given[0]} out")
    return search


def _check_memory(translator, sentences: list[str], args: argparse.Namespace,
                  beam: int) -> None:
    """--beam (as resolved) and --batch-size within the memory, before decoding
    (Translator.check_memory)."""
    translator.check_memory(sentences, beam, args.batch_size, args.workers,
                            names=("--beam", "--batch-size"))


def _load_translator(args: argparse.Namespace):
    """The model folder's Translator, decoding with --engine: CTranslate2 with --workers
    batches side by side (inter_threads) of one thread each, or one batch at a time on
    --threads threads (intra_threads)."""
    from aiayn.tasks.translator import Translator

    check_engine_options(args)
    if args.engine != "ctranslate2":
        translator = Translator.load(args.model, device=args.device, checkpoint=args.checkpoint)
        chosen = stated_precision(args)
        # bf16 / int8: a copy of the model with its weights so (fp16: autocast, runs_model).
        return translator.to_precision(chosen) if chosen in ("bf16", "int8") else translator
    from aiayn.generation.workers import resolve_workers

    args.precision_run = f"ctranslate2 {args.ct2_compute_type}"
    workers = resolve_workers(args.workers, args.device)
    inter, intra = (workers, 1) if workers > 1 else (1, args.threads or _threads())
    return Translator.load(args.model, device=args.device, checkpoint=args.checkpoint,
                           engine="ctranslate2", compute_type=args.ct2_compute_type,
                           inter_threads=inter, intra_threads=intra)


def _decode_opts(args: argparse.Namespace) -> dict:
    return dict(beam=args.beam, alpha=args.alpha, length_penalty=args.length_penalty,
                batch_size=args.batch_size, early_stopping=args.early_stopping,
                workers=args.workers, no_repeat_ngram_size=args.no_repeat_ngram_size,
                min_length=args.min_length)


def _translate_opts(args: argparse.Namespace) -> dict:
    return {**_decode_opts(args), "warn": warn}


def _train(args: argparse.Namespace) -> int:
    from aiayn.folder.families import task_family
    from aiayn.tasks.seq2seq import TASK, experiment, train

    if args.config == "auto":  # a recipe chosen for the corpus and --minutes
        from aiayn.cli.auto import train_auto
        return train_auto(args, split_overrides(args))
    task = config_task_of(args)  # a config of another task: that task's command trains it
    if task != TASK:
        if args.text:
            command = task_family(task).command  # as train_as says it of --text after CONFIG
            raise UserError(f"--text is an option of `{command}`: {args.config} is a {task} "
                            f"config; run `{command} {args.config} ... --text ...`")
        return train_as(task, args)

    overrides = split_overrides(args)
    if args.corpus is not None or args.minutes is not None or args.ensemble is not None:
        raise UserError("--corpus, --minutes and --ensemble go with `aiayn train auto` (or set "
                        "data.* and train.max_minutes in a config)")
    if args.config is None:
        raise UserError("give a CONFIG: a file, a built-in config (`aiayn configs`) or a preset")
    text = {"text": list(args.text), "corpus": None, "corpus_dir": None, "train_src": None,
            "train_tgt": None} if args.text else None
    exp = experiment(config_of(args), overrides, out=args.out, data=text)
    result = train(exp, resume=args.resume, say=lambda m: print(m, file=sys.stderr))
    return report_validated(result)


@runs_model
def _translate(args: argparse.Namespace) -> int:
    _set_threads(args)
    translator = _load_translator(args)
    sentences = args.sentences or read_stdin_lines()
    search = _search(translator, args)
    _check_memory(translator, sentences, args, search["beam"])
    for line in translator.translate(sentences, **_translate_opts(args), search=search):
        print(line)
    sys.stdout.flush()
    return 0


def _summarize(args: argparse.Namespace) -> int:
    """`translate` over whole texts: a summarizer is an encoder-decoder trained on (text, summary)
    pairs, whose texts (stdlib-docstrings' bodies) are single lines."""
    args.sentences = [" ".join((read_stdin_text() if text == "-" else text).split())
                      for text in args.texts]
    return _translate(args)


@runs_model
def _eval(args: argparse.Namespace) -> int:
    from aiayn.data.parallel import read_parallel
    from aiayn.tasks.evaluation import evaluate

    if args.hyp:
        writable_file("--hyp", args.hyp, {"--src": args.src, "--ref": args.ref})
    pairs = read_parallel(args.src, args.ref, allow_empty=True)  # a line may be empty: scored
    _set_threads(args)
    translator = _load_translator(args)
    search = _search(translator, args)
    _check_memory(translator, [s for s, _ in pairs], args, search["beam"])
    scores, hyps = evaluate(translator, [s for s, _ in pairs], [r for _, r in pairs],
                            **{**_translate_opts(args), "rouge": args.rouge or None,
                               "precision": args.precision_run,
                               "precision_asked": args.precision, "search": search})
    if args.hyp:
        from aiayn.folder import atomic_write_text
        atomic_write_text(args.hyp, "".join(h + "\n" for h in hyps))
    if args.json:
        print(json.dumps(scores, indent=2, ensure_ascii=False))
    else:
        print(f"BLEU {scores['bleu']:.2f}  ({scores['bleu_signature']})")
        print(f"chrF {scores['chrf']:.2f}  ({scores['chrf_signature']})")
        print(f"exact match {scores['exact_match']:.2f}% of {len(pairs)} sentences")
        if "rouge1" in scores:
            print(f"ROUGE-1 {scores['rouge1']:.2f}  ROUGE-2 {scores['rouge2']:.2f}  ROUGE-L "
                  f"{scores['rougeL']:.2f}  (F-measure, Porter stemmer; rouge-score)")
        print(f"speed {scores['sentences_per_s']:.1f} sentences/s, {scores['tokens_per_s']:.0f} "
              f"tokens/s (beam {scores['beam']}, batch {args.batch_size}, precision "
              f"{args.precision_run}, {args.device})")
    return 0


def _summarizes(meta: dict) -> bool:
    """Whether `aiayn eval` reports ROUGE unasked for a folder (aiayn.tasks.evaluation.summarizes)."""
    from aiayn.tasks.evaluation import summarizes

    return summarizes(meta)


def _average(args: argparse.Namespace) -> int:
    from aiayn.folder import read_meta
    from aiayn.folder.checkpoint import (
        average_checkpoints,
        averaging_warning,
        load_train_state,
        running_average_note,
    )

    steps = average_checkpoints(args.model, args.last, args.out, allow_fewer=args.allow_fewer)
    print(f"averaged {len(steps)} checkpoints (steps {', '.join(map(str, steps))}) into {args.out}")
    note = running_average_note(read_meta(args.model))
    if note:
        print(f"aiayn: note: {note}", file=sys.stderr)
    try:
        final = int(load_train_state(args.model)["step"])
    except UserError:  # no training state (e.g. a copied folder): judge by the last checkpoint
        final = steps[-1]
    warning = averaging_warning(steps, final)
    if warning:
        print(f"aiayn: warning: {warning}", file=sys.stderr)
    return 0
