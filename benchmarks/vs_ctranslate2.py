"""Decoding speed against CTranslate2 (OpenNMT's C++ engine) with the SAME weights, in one run.

Every system decodes the same test sentences of one aiayn translation folder, each in its own
process (a fresh interpreter per measurement, so no system warms another's caches), the systems
interleaved within each of --repeats rounds; reported are the median and the spread (min-max)
of each, its ratio to CTranslate2 fp32 in the same layout, and the BLEU of its output:

- aiayn, as users run it: `aiayn eval --json` (its decode time; the default mode is
  `--workers auto`, one process per CPU thread), in fp32 and in each reduced precision its
  `--precision` offers; also `--engine ctranslate2` (aiayn's command line and search rules,
  CTranslate2 decoding the folder's export, in aiayn's search (§6.1: GNMT penalty, exact stop,
  input + 50) and in CTranslate2's own ("ct2-search": `--length-penalty avg --alpha 1.0
  --early-stopping first_k`, its |Y|^1 penalty and patience 1), which shows what the wrapping
  costs beside CTranslate2 called directly);
- CTranslate2 called directly, as its users call it: `ctranslate2.Translator(dir,
  compute_type, inter_threads, intra_threads).translate_batch(tokens, beam_size,
  max_batch_size)` with its defaults otherwise (length_penalty 1, patience 1, at most 256
  tokens), on the folder's export (`aiayn export ctranslate2`), tokenization and
  detokenization (aiayn's tokenizer) inside the timed part as they are in aiayn's.

Greedy and beam 4; --batch 64 sentences per batch (throughput, sentences/s) and batch 1
(latency, ms per sentence, over the first --latency-sentences sentences).

    python benchmarks/vs_ctranslate2.py --model runs/gettext-small --repeats 3
    python benchmarks/vs_ctranslate2.py --train-minutes 10      # trains gettext-small first
    python benchmarks/vs_ctranslate2.py --model M --sentences 50 --latency-sentences 5 \\
        --repeats 1 --searches greedy --systems "aiayn fp32" "ctranslate2 fp32 2x1"  # a check

Needs the ct2 extra (`pip install aiayn[ct2]`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SEARCHES = {"greedy": 1, "beam4": 4}
CT2_SEARCH = ["--length-penalty", "avg", "--alpha", "1.0", "--early-stopping", "first_k"]


def systems(threads: int) -> dict[str, list[str]]:
    """Name -> how it runs: ["aiayn", eval flags...] or ["ct2", compute type, inter, intra]."""
    out = {
        "aiayn fp32": ["aiayn"],  # the default mode: --workers auto, fp32
        "aiayn fp32 workers 1": ["aiayn", "--workers", "1"],
        "aiayn bf16": ["aiayn", "--precision", "bf16"],
    }
    if "int8" in _precisions():
        out["aiayn int8"] = ["aiayn", "--precision", "int8"]
    # aiayn's own engine in CTranslate2's search (|Y|^1 penalty, stop at K finished): the same
    # work as CTranslate2 called directly, so the ratio measures the engines alone (aiayn's §6.1
    # exact stop runs some sentences longer)
    out["aiayn fp32 ct2-search"] = ["aiayn", *CT2_SEARCH]
    if "int8" in _precisions():
        out["aiayn int8 ct2-search"] = ["aiayn", "--precision", "int8", *CT2_SEARCH]
    out.update({
        "aiayn --engine ctranslate2 fp32": ["aiayn", "--engine", "ctranslate2"],
        "aiayn --engine ctranslate2 fp32 first_k": ["aiayn", "--engine", "ctranslate2",
                                                    "--early-stopping", "first_k"],
        # CTranslate2's own search (|Y|^1 length penalty, stop at K finished) through aiayn's
        # command line: what aiayn's wrapping costs, beside CTranslate2 called directly
        "aiayn --engine ctranslate2 fp32 ct2-search": ["aiayn", "--engine", "ctranslate2", *CT2_SEARCH],
        "aiayn --engine ctranslate2 int8 ct2-search": ["aiayn", "--engine", "ctranslate2", *CT2_SEARCH,
                                                       "--ct2-compute-type", "int8"],
        f"ctranslate2 fp32 {threads}x1": ["ct2", "float32", str(threads), "1"],
        f"ctranslate2 fp32 1x{threads}": ["ct2", "float32", "1", str(threads)],
        f"ctranslate2 int8 {threads}x1": ["ct2", "int8", str(threads), "1"],
    })
    return out


def _precisions() -> list[str]:
    """The --precision choices of this aiayn's `eval`."""
    help_text = subprocess.run([sys.executable, "-m", "aiayn", "eval", "--help"],
                               capture_output=True, text=True).stdout
    start = help_text.find("--precision {")
    return help_text[start + 13:help_text.find("}", start)].split(",") if start >= 0 else []


def run_aiayn(model: str, src: str, ref: str, flags: list[str], beam: int, batch: int) -> dict:
    if beam == 1:  # greedy has no length penalty or stopping rule (aiayn refuses them there)
        flags = [f for i, f in enumerate(flags) if f not in CT2_SEARCH
                 and not (i and flags[i - 1] in CT2_SEARCH[::2])]
    argv = [sys.executable, "-m", "aiayn", "eval", "--model", model, "--src", src, "--ref", ref,
            "--json", "--beam", str(beam), "--batch-size", str(batch), "--device", "cpu", *flags]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr.strip()}")
    out = json.loads(done.stdout)
    return dict(seconds=out["seconds"], bleu=out["bleu"])


CT2_SIDE = """
import json, sys, time
import ctranslate2, sacrebleu
from aiayn.convert.ctranslate2_dir import engine_dir
from aiayn.convert.ctranslate2 import vocabulary
from aiayn.tasks.seq2seq import Translator
model, src, ref, compute, inter, intra, beam, batch = sys.argv[1:9]
aiayn = Translator.load(model)  # its tokenizer: the subwords of the export's vocabulary
words = vocabulary(aiayn.tokenizer, aiayn.model.config.vocab_size)
ids = {w: i for i, w in enumerate(words)}
eos_drop = bool(aiayn.meta.get("source_eos"))  # the directory's add_source_eos puts it back
t = ctranslate2.Translator(str(engine_dir(model)), device="cpu", compute_type=compute,
                           inter_threads=int(inter), intra_threads=int(intra))
sources = open(src, encoding="utf-8").read().split("\\n")[:-1]
refs = open(ref, encoding="utf-8").read().split("\\n")[:-1]
start = time.perf_counter()
tokens = []
for s in sources:
    x = aiayn.encode_source(s)
    tokens.append([words[i] for i in (x[:-1] if eos_drop else x)])
results = t.translate_batch(tokens, beam_size=int(beam), max_batch_size=int(batch))
hyps = [aiayn.tokenizer.decode([ids[w] for w in r.hypotheses[0] if w in ids]) for r in results]
seconds = time.perf_counter() - start
print(json.dumps(dict(seconds=seconds, bleu=sacrebleu.corpus_bleu(hyps, [refs]).score)))
"""


def run_ct2(model: str, src: str, ref: str, spec: list[str], beam: int, batch: int) -> dict:
    compute, inter, intra = spec
    env = {**os.environ, "OMP_NUM_THREADS": intra}
    done = subprocess.run([sys.executable, "-c", CT2_SIDE, model, src, ref, compute, inter,
                           intra, str(beam), str(batch)], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"CTranslate2 ({' '.join(spec)}) failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def prepare(args) -> tuple[str, Path, Path]:
    """The model folder (trained first with --train-minutes) and the test files (--sentences)."""
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        model = str(work / "gettext-small")
        if not (Path(model) / "config.json").exists():
            subprocess.run([sys.executable, "-m", "aiayn", "train", "gettext-small", "--out",
                            model, f"train.max_minutes={args.train_minutes}",
                            "train.progress=false"], check=True)
    from aiayn.convert.ctranslate2_dir import engine_dir

    engine_dir(model)  # the folder's CTranslate2 export (aiayn export ctranslate2's), once
    if args.src:
        return model, Path(args.src), Path(args.ref)
    data = work / "data"
    if not (data / "test.src").exists():
        subprocess.run([sys.executable, "-m", "aiayn", "data", "gettext", "--lang", "de",
                        "--out", str(data)], check=True)
    return model, data / "test.src", data / "test.tgt"


def subset(path: Path, n: int, tmp: Path) -> str:
    out = tmp / f"{path.stem}.{n}{path.suffix}"
    out.write_text("".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[:n]),
                   encoding="utf-8")
    return str(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="an aiayn translation folder (default: train gettext-small)")
    p.add_argument("--train-minutes", type=float, default=10.0,
                   help="without --model: train gettext-small this long first (default 10)")
    p.add_argument("--work", default="runs/vs-ctranslate2", help="model and data (default %(default)s)")
    p.add_argument("--src", help="source sentences, one a line (default: gettext's test split)")
    p.add_argument("--ref", help="their references (with --src)")
    p.add_argument("--sentences", type=int, default=1000, help="test sentences (default 1,000)")
    p.add_argument("--latency-sentences", type=int, default=100,
                   help="of those, decoded one at a time for the latency (default 100)")
    p.add_argument("--batch", type=int, default=64, help="sentences per batch (default 64)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--searches", nargs="+", default=list(SEARCHES), choices=list(SEARCHES))
    p.add_argument("--systems", nargs="+", default=None, help="a subset of the systems, by name")
    p.add_argument("--json", help="also write the measurements here")
    args = p.parse_args()

    if bool(args.src) != bool(args.ref):
        p.error("--src and --ref go together")
    threads = os.cpu_count() or 1
    table = systems(threads)
    if args.systems:
        unknown = [s for s in args.systems if s not in table]
        if unknown:
            p.error(f"unknown systems {unknown}; known: {list(table)}")
        table = {k: table[k] for k in args.systems}
    model, src, ref = prepare(args)
    results: dict[tuple[str, str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = {args.batch: (subset(src, args.sentences, Path(tmp)),
                              subset(ref, args.sentences, Path(tmp))),
                 1: (subset(src, args.latency_sentences, Path(tmp)),
                     subset(ref, args.latency_sentences, Path(tmp)))}
        for r in range(args.repeats):  # interleaved: a drift in load hits every system alike
            for search in args.searches:
                for batch, (s, f) in files.items():
                    for name, spec in table.items():
                        run = run_aiayn if spec[0] == "aiayn" else run_ct2
                        out = run(model, s, f, spec[1:], SEARCHES[search], batch)
                        results.setdefault((name, search, batch), []).append(out)
                        print(f"round {r + 1}: {name}, {search}, batch {batch}: "
                              f"{out['seconds']:.2f} s, BLEU {out['bleu']:.2f}", flush=True)
    rows = report(results, files_n={args.batch: args.sentences, 1: args.latency_sentences},
                  threads=threads)
    print(f"\n{model}; {args.sentences:,} test sentences of {src} (batch {args.batch}) and the "
          f"first {args.latency_sentences} one at a time; {args.repeats} interleaved rounds; "
          f"{threads} threads, {_cpu()}, python {platform.python_version()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


def report(results: dict, files_n: dict[int, int], threads: int) -> list[dict]:
    """Print the table (medians, spread, ratio to CTranslate2 fp32 of the same search and
    batch in its best layout) and return its rows."""
    rows = []
    for (name, search, batch), outs in results.items():
        secs = sorted(o["seconds"] for o in outs)
        n = files_n[batch]
        rows.append(dict(system=name, search=search, batch=batch, sentences=n,
                         median_s=statistics.median(secs), min_s=secs[0], max_s=secs[-1],
                         bleu=statistics.median(o["bleu"] for o in outs)))
    for r in rows:
        peers = [q for q in rows if q["search"] == r["search"] and q["batch"] == r["batch"]
                 and q["system"].startswith("ctranslate2 fp32")]
        best = min((q["median_s"] for q in peers), default=None)
        r["vs_ct2_fp32"] = best / r["median_s"] if best else None
    print("\n| search | batch | system | sentences/s (min-max) | ms/sentence | vs CTranslate2 "
          "fp32 (best layout) | BLEU |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (r["search"], -r["batch"])):
        n = r["sentences"]
        ratio = f"{r['vs_ct2_fp32']:.2f}x" if r["vs_ct2_fp32"] else "-"
        print(f"| {r['search']} | {r['batch']} | {r['system']} | {n / r['median_s']:.1f} "
              f"({n / r['max_s']:.1f}-{n / r['min_s']:.1f}) | "
              f"{1000 * r['median_s'] / n:.1f} | {ratio} | {r['bleu']:.2f} |")
    return rows


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
