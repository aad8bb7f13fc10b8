"""`aiayn lm train`, `aiayn lm eval`, `aiayn generate`: decoder-only (GPT-style) language models.

    aiayn lm train CONFIG [key=value ...] [--corpus python-stdlib | --text FILE... [--valid FILE...]]
                   [--out DIR] [--resume]
    aiayn lm eval --model DIR [--text FILE... | --split valid|test]
    aiayn generate --model DIR --prompt "def " [--prompt ...] [--num-samples N]
                   [--max-new-tokens 100] [--temperature 0.8] [--top-k 40] [--top-p 0.95] [--seed 0]
    (generation may run past the model's context: the last max_len tokens are kept, as nanoGPT)

CONFIG is a YAML/JSON file with sections out / model / data / train, a built-in config name
(lm-char, lm-stdlib: see `aiayn configs`), or a model preset name (gpt2-mini, gpt2-small, tiny);
without one, the language model's recipe (the built-in config lm), whose train settings every
config's train section is layered over. Overrides use dotted keys: model.n_layers=2
data.block_len=128 train.max_steps=200 out=runs/lm. `aiayn train CONFIG` runs a language-model
config too, without the data flags.
"""

from __future__ import annotations

import argparse
import sys

from aiayn.cli.checks import Given, given_flags
from aiayn.cli.common import (
    command_group,
    config_of,
    finite_float,
    model_command,
    non_negative_int,
    positive_int,
    report_training,
    runs_model,
    say,
    seed,
    split_overrides,
    training_command,
)
from aiayn.errors import UserError


def register(sub) -> None:
    """Add `aiayn lm train|eval` and `aiayn generate` to the `aiayn` parser."""
    cmds = command_group(sub, "lm", "lm_command",
                         help="train or evaluate a decoder-only language model",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    train = cmds.add_parser("train", help="train a language model (GPT-style)")
    training_command(train, _train, _data_options, task="language_model")

    ev = model_command(cmds, "eval", "perplexity and bits per byte of a language model")
    ev.add_argument("--text", nargs="+", metavar="FILE", help="files to score (each a document)")
    ev.add_argument("--split", choices=("valid", "test"), default=None,
                    help="a split of the model's training corpus (default: test, else valid)")
    ev.add_argument("--batch-size", type=positive_int, default=8,
                    help="blocks of the text scored together (default 8)")
    ev.set_defaults(func=_eval)

    gen = model_command(sub, "generate", "continue a prompt with a language model (streaming)")
    gen.add_argument("--prompt", action="append", default=None,
                     help="text to continue (default: empty); repeat for several prompts")
    gen.add_argument("--num-samples", type=positive_int, default=1,
                     help="continuations per prompt, decoded in one batch (default 1)")
    gen.add_argument("--max-new-tokens", type=non_negative_int, default=100)
    gen.add_argument("--temperature", type=finite_float, default=0.8,
                     help="0 = greedy (default 0.8, as nanoGPT)")
    gen.add_argument("--top-k", type=non_negative_int, default=200, action=Given,
                     help="sample from the k most likely tokens (default 200, as nanoGPT; 0 = all)")
    gen.add_argument("--top-p", type=finite_float, default=None)
    gen.add_argument("--seed", type=seed, default=None)
    gen.add_argument("--no-repeat-ngram-size", type=non_negative_int, default=0, metavar="N",
                     help="no N tokens in a row twice in prompt + continuation (default 0: off)")
    gen.set_defaults(func=_generate)


def _data_options(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--corpus", help="built-in text corpus (python-stdlib)")
    src.add_argument("--text", nargs="+", metavar="FILE", help="training text files (UTF-8)")
    p.add_argument("--valid", nargs="+", metavar="FILE", default=[],
                   help="validation files (default: the last lines of each --text file)")


def _train(args: argparse.Namespace) -> int:
    from aiayn.tasks.language_model import experiment, train

    overrides = split_overrides(args)
    data = {"corpus": args.corpus} if args.corpus else {"corpus": None} if args.text else None
    exp = experiment(config_of(args), overrides, out=args.out, data=data)
    result = train(exp, resume=args.resume, say=say, texts=args.text or (),
                   valid_texts=args.valid)
    out, m = result.folder, result.metrics
    valid = f", {result.tokens:,} tokens, valid loss {m['valid_loss']:.3f} " \
        f"({m['valid_bpb']:.3f} bits/byte)" if "valid_loss" in m else f", {result.tokens:,} tokens"
    code = report_training(result, valid)
    if not result.interrupted:
        print(f"generate with: aiayn generate --model {out} --prompt {_prompt_hint(args)}")
    return code


def _prompt_hint(args: argparse.Namespace) -> str:
    """A prompt that fits the corpus: the first word of the user's text, or "def " for the
    built-in Python corpus (shell-quoted)."""
    import shlex

    word = ""
    if args.text:
        try:
            with open(args.text[0], encoding="utf-8", errors="replace") as f:
                word = next((line.split()[0][:20] for line in f if line.strip()), "")
        except OSError:
            pass
    return shlex.quote(f"{word} " if word else "def ")


@runs_model
def _eval(args: argparse.Namespace) -> int:
    from aiayn.tasks.language_model import LanguageModel, read_documents

    lm = LanguageModel.load(args.model, device=args.device)
    if args.text:
        docs, what = read_documents(args.text), f"{len(args.text)} file(s)"
    else:
        splits = lm.corpus_splits()
        split = args.split or ("test" if "test" in splits else "valid")
        if split not in splits:
            raise UserError(f"{args.model} was trained on --text files: it has no {split} split; "
                            "score files with --text FILE...")
        docs, what = splits[split], f"the {split} split"
    texts = [text for _, text in docs]
    lm.check_eval_memory(texts, batch_size=args.batch_size, name="--batch-size")
    r = lm.evaluate(texts, batch_size=args.batch_size)
    print(f"{what}: loss {r['loss']:.4f} nats/token, perplexity {r['perplexity']:.2f}, "
          f"{r['bits_per_byte']:.4f} bits/byte ({r['tokens']:,} tokens, {r['bytes']:,} bytes)")
    return 0


def _check_sampling_flags(args: argparse.Namespace) -> None:
    """Greedy decoding (--temperature 0) draws nothing: the sampling flags are refused there,
    where they would change nothing."""
    if args.temperature != 0:
        return
    given = [flag for flag, value in (("--top-k", "top_k" in given_flags(args)),
                                      ("--top-p", args.top_p), ("--seed", args.seed))
             if value not in (None, False)]
    if given:
        raise UserError(f"{given[0]} has no effect with --temperature 0 (greedy: nothing is "
                        f"drawn); give a temperature > 0 to sample, or leave {given[0]} out")


@runs_model
def _generate(args: argparse.Namespace) -> int:
    from aiayn.tasks.language_model import LanguageModel

    _check_sampling_flags(args)
    lm = LanguageModel.load(args.model, device=args.device)
    prompts = args.prompt or [""]
    lm.check_memory(prompts, args.max_new_tokens, args.num_samples,
                    names=("--max-new-tokens", "--num-samples"))
    options = dict(temperature=args.temperature, top_k=args.top_k or None, top_p=args.top_p,
                   seed=args.seed, no_repeat_ngram_size=args.no_repeat_ngram_size)
    out = sys.stdout
    if len(prompts) == 1 and args.num_samples == 1:  # stream: each piece as soon as it exists
        pieces = lm.stream(prompts[0], args.max_new_tokens, **options)  # checks the options
        out.write(prompts[0])
        out.flush()
        for piece in pieces:
            out.write(piece)
            out.flush()
        out.write("\n")
        return 0
    samples = lm.generate_batch(prompts, args.max_new_tokens, args.num_samples, **options)
    for prompt, texts in zip(prompts, samples, strict=True):
        for text in texts:
            out.write(f"{prompt}{text}\n---\n")
    return 0

