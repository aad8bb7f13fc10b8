"""`aiayn demo`: train a small Transformer on dates & numbers (EN -> DE) on the CPU, and show it.

The recipe (the built-in config `demo`, aiayn/configs/demo.yaml) is the paper's (§5: Adam with warmup,
label smoothing 0.1, dropout 0.1, post-norm, shared BPE vocabulary, length-bucketed batches,
§6.1 beam 4 with alpha 0.6), scaled to two CPU cores and a few minutes:

* d_model 128, 4 heads, d_ff 512, 2 + 2 layers (0.9M parameters; the base model has 65M);
* a 300-token BPE vocabulary, small enough that German number words split into their parts
  ("fünf|tausend|drei|hundert|zwei|und|neun|zig"), which the model can learn compositionally;
* ~1500-token batches (the paper: 25k + 25k) for many more updates per minute, with the noam
  schedule rescaled to peak at lr 3e-3 after 300 warmup steps (the paper: d_model^-0.5 peak
  after 4000 steps, tuned for its 100k-step runs);
* one CPU thread: these matrices are small, and a second thread that has to wait for a busy
  core made steps 35 times slower on a shared 2-core machine;
* training stops once validation is saturated: exact match 100% (greedy, 200 pairs) at two
  evaluations in a row, 250 steps apart (train.stop_when); 7 minutes is the cap.

The folder it writes is an ordinary model folder (`aiayn translate --model DIR`), plus
metrics.json (test exact match, BLEU, chrF, train_seconds, ...) and attention.png.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from aiayn.cli.common import beam_size
from aiayn.errors import UserError
from aiayn.folder.lock import writer_lock

N_SAMPLES = 6


def _say(message: str) -> None:
    print(message, flush=True)


def _check_out(out: Path) -> None:
    """The demo replaces only an earlier demo's folder, never anything else."""
    from aiayn.folder.files import CONFIG_FILE
    from aiayn.folder.format import folder_contents

    if not out.exists():
        return
    if out.is_dir() and not folder_contents(out):
        return
    config = out / CONFIG_FILE
    from aiayn.config.files import load_json, read_text

    try:  # bounded: a config.json nested 100,000 deep is not the demo's
        is_demo = load_json(read_text(config), config).get("demo") is True
    except (OSError, ValueError, AttributeError, UserError):
        is_demo = False
    if not is_demo:
        raise UserError(f"{out}: already exists and is not a demo model folder; "
                        "choose another --out")


def _swap_in(tmp: Path, out: Path) -> None:
    """Replace `out` by `tmp` (both in one parent folder), keeping the old one until the end."""
    old = out.parent / f".{out.name}.old"
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    if old.exists():
        shutil.rmtree(old)


def _pick_example(pairs: list[tuple[str, str]]) -> tuple[str, str]:
    """A pair that shows reordering well: a date written out in words, if there is one."""
    for src, tgt in pairs:
        if "," in src and any(c.isdigit() for c in src) and any(c.isalpha() for c in src):
            return src, tgt
    return pairs[0]


def register(sub) -> None:
    """Add `aiayn demo` to the `aiayn` parser."""
    p = sub.add_parser("demo", help="train a small translator on dates & numbers (CPU, minutes)",
                       description="Train a Transformer to translate English dates and numbers "
                       "into German on the CPU, then report test exact match / BLEU, show sample "
                       "translations and a cross-attention heatmap.")
    p.add_argument("--out", default="demo-model", help="model folder to write (default: demo-model)")
    p.add_argument("--minutes", type=float, default=None,
                   help="training time cap in minutes (default: the demo config's, 7; training "
                   "stops sooner once validation is saturated)")
    p.add_argument("--beam", type=beam_size, default=4, help="beam size for the test set (default 4)")
    p.add_argument("--test", type=int, default=None, metavar="N", help="score only N test pairs")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="change the demo recipe, e.g. train.max_tokens=1000")
    p.set_defaults(func=lambda args: run_demo(args.out, minutes=args.minutes, beam=args.beam,
                                              test_limit=args.test, overrides=args.overrides))


def _attention_figure(translator, source: str, path: Path) -> Path:
    from aiayn.viz.attention import plot_attention
    from aiayn.viz.style import save_figure

    src_tokens, tgt_tokens, weights = translator.cross_attention(source)
    layer = weights.shape[0]
    fig = plot_attention(weights[-1], tgt_tokens, src_tokens,
                         q_name="decoder input (German, <s> + output)", k_name="input (English)",
                         title=f"Cross-attention, last layer ({layer}): {source!r}")
    return save_figure(fig, path.with_suffix(""), formats=("png",))[0]


def run_demo(out: str | Path = "demo-model", minutes: float | None = None, beam: int = 4,
             test_limit: int | None = None, overrides: list[str] | None = None) -> int:
    import torch

    from aiayn.tasks import seq2seq

    out = Path(out)
    overrides = list(overrides or [])
    if minutes is not None:
        if not minutes > 0:
            raise UserError(f"--minutes {minutes}: must be positive")
        overrides.append(f"train.max_minutes={float(minutes)}")
    exp = seq2seq.experiment("demo", overrides)
    # One demo writes `out` (and its training folder beside it) at a time (aiayn.folder.lock).
    with writer_lock(out):
        _check_out(out)
        threads = torch.get_num_threads()
        try:  # exp.train.threads for decoding too, not only for training (the Trainer's part)
            torch.set_num_threads(exp.train.threads or threads)
            return _run(exp, out, beam, test_limit)
        finally:
            torch.set_num_threads(threads)


def _run(exp, out: Path, beam: int, test_limit: int | None) -> int:
    from aiayn.tasks import seq2seq

    tmp = out.parent / f".{out.name}.training"
    if tmp.exists():
        shutil.rmtree(tmp)  # left by a demo that was killed
    until = "until validation is saturated, " if exp.train.stop_when else ""
    _say(f"aiayn demo: teaching a Transformer to translate English dates and numbers into German "
         f"(training on the CPU {until}at most {exp.train.max_minutes:g} minutes)")
    try:
        result = seq2seq.train(exp, out=tmp, say=_say, meta={"demo": True})
        if result.interrupted:
            shutil.rmtree(tmp, ignore_errors=True)
            print(f"aiayn: interrupted; {out} left as it was", file=sys.stderr)
            return result.exit_code
        _say(f"trained {result.step} steps in {result.seconds:.0f} s; stopped: {result.why}")
        test = (result.splits.get("test") or [])[:test_limit]  # the pairs training read
        if not test:
            raise UserError("the demo corpus has no test split")
        metrics, hyps, example = _test_and_show(tmp, test, beam, result)
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _say(f"\ntest set ({len(test)} sentences never seen in training, beam {beam}):")
    _say(f"  exact match {metrics['exact_match']:.1f}%   BLEU {metrics['bleu']:.1f}   "
         f"chrF {metrics['chrf']:.1f}")
    _say("\nsample translations:")
    for (src, ref), hyp in list(zip(test, hyps, strict=True))[:N_SAMPLES]:
        mark = "ok" if hyp == ref else f"expected {ref!r}"
        _say(f"  {src!r:48} -> {hyp!r}  [{mark}]")
    _say(f"\nwrote {out}/ (model, tokenizer, checkpoints), {out / 'metrics.json'}, "
         f"{out / 'attention.png'} (cross-attention of {example!r})")
    _say(f"\ntranslate more:\n  aiayn translate --model {out} \"March 5, 2024\" \"four hundred and two\"")
    return 0


def _test_and_show(folder: Path, test, beam: int, result):
    """Score the test split, write metrics.json and attention.png into `folder`."""
    from aiayn.folder.files import atomic_write_text
    from aiayn.tasks.evaluation import evaluate
    from aiayn.tasks.translator import Translator

    translator = Translator.load(folder)
    # workers "auto", as `aiayn eval`
    scores, hyps = evaluate(translator, [s for s, _ in test], [t for _, t in test], beam=beam,
                            workers="auto", rouge=False)
    metrics = {"exact_match": scores["exact_match"], "bleu": scores["bleu"],
               "chrf": scores["chrf"], "train_seconds": round(result.seconds, 1),
               "steps": result.step, "test_sentences": len(test), "beam": beam,
               "decode_seconds": round(scores["seconds"], 2),
               "parameters": translator.model.num_parameters(),
               "bleu_signature": scores["bleu_signature"],
               "chrf_signature": scores["chrf_signature"]}
    atomic_write_text(folder / "metrics.json", json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    example = _pick_example(test)[0]
    _attention_figure(translator, example, folder / "attention.png")
    return metrics, hyps, example
