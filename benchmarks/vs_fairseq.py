"""Translation side by side: aiayn vs fairseq on the gettext EN->DE corpus (issue 11, part 1).

Both systems train the same model on the same data for the same wall-clock budget and threads, and
are scored the same way. Measured, per system and seed:
  - updates in the budget and training target tokens/s (non-pad target tokens incl. EOS / s);
  - test sacreBLEU and chrF (beam 4, one sacrebleu scorer in this process on both systems'
    detokenized output, the same sentences) at equal updates (the latest checkpoint step both
    reached) and at equal time (the final weights);
  - greedy and beam-4 decoding sentences/s at batch 64: wall clock of translating the whole test
    set (raw text in, detokenized text out, sub-word encode/decode included), model loading
    excluded: `aiayn eval` times it itself; for fairseq a few lines run in its venv time
    `TransformerModel.from_pretrained(...).translate()` (the hub interface, fairseq's own
    SequenceGenerator, length-sorted batches of 64), since fairseq-generate/-interactive report
    only model time or totals including loading; aiayn in one process both in fp32 (as
    fairseq) and in its default precision (`--precision auto`: bf16 autocast where the CPU
    computes bf16); and each system in its best mode: aiayn with `--workers 2` (two decoding
    processes of one thread), in fp32 or `--precision auto`, whichever is faster for the search
    (the BLEU of that output is reported too), fairseq as above.

Precision: each system trains in its default, the best it offers on a CPU. aiayn's
`train.precision=auto` is bf16 autocast on CPUs with AVX512-BF16 or AMX (fp32 elsewhere; the
chosen precision is recorded); fairseq 0.12's `--bf16` needs an XLA device (on the CPU it fails
with "'NoneType' object has no attribute 'xla_device'") and its `--fp16` a GPU, so it trains in
fp32. `--aiayn-precision fp32` trains aiayn in fp32 as well (the same arithmetic on both sides).

Weights: each system's as it saves them. aiayn's checkpoints hold a running average of the
weights (train.average_width, on by default: §6.1's checkpoint averaging, kept during training);
fairseq's hold the last update's (averaging is a separate script there, not part of the
package). `--aiayn-average-width 0` scores aiayn's last-update weights instead (the same weights
on both sides), and with `--updates`, `--peer-average` also scores fairseq's checkpoints averaged
the way aiayn averages (fairseq then saves every 10 updates, and their running average is
rebuilt from those).

Setup (done by the script, idempotent): a venv for fairseq under benchmarks/.peers/ with the CPU
torch 2.13.0 and the PyPI source package fairseq-fixed 0.12.3.1; the corpus from
`aiayn data gettext`; for fairseq a sentencepiece BPE model (8k, joint, on the training split) and
`fairseq-preprocess --joined-dictionary`; aiayn trains its own 8k joint BPE (configs/gettext-small).
Model: d_model 256, 4 heads, d_ff 1024, 3+3 post-norm layers, all embeddings shared; recipe:
dropout 0.1, no attention dropout, label smoothing 0.1, Adam (0.9, 0.98, 1e-9), inverse-sqrt
schedule with 400 warmup updates to 1e-3, clip 1.0, ~2k target tokens per update.
Search for both: beam 4 (or 1), score / length (fairseq --lenpen 1 = aiayn --length-penalty avg
--alpha 1), at most source length + 50 tokens, a sentence done once 4 hypotheses have finished
(fairseq's rule = aiayn --early-stopping first_k; aiayn's default, "exact", searches on while a live
hypothesis could still win, which with this penalty means to the length limit: ~2.6x slower).

    python benchmarks/vs_fairseq.py                        # 12 min of training per system, seed 0
    python benchmarks/vs_fairseq.py --seeds 0 1 --threads 2 --record   # append to RESULTS.md
    python benchmarks/vs_fairseq.py --quick                # smoke test: 1 min each, 100 sentences
    python benchmarks/vs_fairseq.py --updates 800 --seeds 0 1 2 --threads 1   # quality per update
        (every checkpoint scored; with 2+ seeds, also aiayn minus fairseq per seed, with the
        mean's standard error: whether a difference is more than the draw of seeds)
    python benchmarks/vs_fairseq.py --updates 1200 --seeds 0 1 2 --threads 1 --resume  # go on
    python benchmarks/vs_fairseq.py --merge A.json B.json  # one table of several runs' seeds
    python benchmarks/vs_fairseq.py --updates 800 --seeds 0 1 --threads 1 --peer-average  # + fairseq averaged
    python benchmarks/vs_fairseq.py --updates 1200 --seeds 0 --threads 1 --aiayn-precision fp32 \
        --peer-scores runs/vs-fairseq/updates.json --work runs/vs-fairseq-fp32  # aiayn alone

Run it on a quiet machine: with 2 threads and another process busy on a core, fairseq's many small
per-parameter ops (its Adam loop) slow down far more than aiayn's (seen: 3-9 s per update instead
of ~1). Working files go to runs/vs-fairseq/ (replaced), results to runs/vs-fairseq/results.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "gettext-small"  # the built-in config (aiayn/configs/gettext-small.yaml)
VENV = ROOT / "benchmarks" / ".peers" / "fairseq-venv"
VPY = VENV / "bin" / "python"
# fairseq's install_requires without torchaudio (unused for text; no release for torch 2.13, so pip
# would swap torch for an older, CUDA build); fairseq itself then goes in with --no-deps.
DEPS = ["numpy", "cython", "setuptools", "wheel", "sacrebleu", "sentencepiece", "cffi", "regex",
        "hydra-core==1.3.2", "omegaconf==2.3.0", "tqdm", "bitarray", "scikit-learn", "packaging"]
VOCAB, MAX_LEN, AIAYN_MAX_TOKENS, BATCH = 8000, 160, 4000, 64
PEER_AVERAGE_EVERY = 10  # --peer-average: fairseq saves every 10 updates, to be averaged
TIME_TITLE = "Translation: aiayn vs fairseq on gettext EN->DE (`benchmarks/vs_fairseq.py`)"
UPDATES_TITLE = "Translation: aiayn vs fairseq at equal updates (`benchmarks/vs_fairseq.py --updates`)"

SPM_SCRIPT = """
import sys, sentencepiece as spm
data, out, vocab, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spm.SentencePieceTrainer.train(input=[f"{data}/train.src", f"{data}/train.tgt"], model_type="bpe",
    model_prefix=f"{out}/spm", vocab_size=vocab, character_coverage=1.0, num_threads=threads)
sp = spm.SentencePieceProcessor(model_file=f"{out}/spm.model")
for name in ("train.src", "train.tgt", "valid.src", "valid.tgt", "test.src", "test.tgt"):
    lines = open(f"{data}/{name}", encoding="utf-8").read().split("\\n")[:-1]
    with open(f"{out}/{name}", "w", encoding="utf-8") as f:
        f.writelines(" ".join(p) + "\\n" for p in sp.encode(lines, out_type=str))
"""
DECODE_SCRIPT = """
import json, sys, time
from fairseq.models.transformer import TransformerModel
ckpt, data_bin, spm_model, src, hyp, beam, batch = sys.argv[1:8]
model = TransformerModel.from_pretrained(str(__import__("pathlib").Path(ckpt).parent),
    checkpoint_file=ckpt.rsplit("/", 1)[1], data_name_or_path=data_bin, bpe="sentencepiece",
    sentencepiece_model=spm_model).eval()
model.cfg.dataset.batch_size, model.cfg.dataset.max_tokens = int(batch), None
lines = open(src, encoding="utf-8").read().split("\\n")[:-1]
start = time.perf_counter()
out = model.translate(lines, beam=int(beam), lenpen=1.0, max_len_a=1, max_len_b=50)
seconds = time.perf_counter() - start
open(hyp, "w", encoding="utf-8").writelines(o + "\\n" for o in out)
print(json.dumps({"seconds": seconds}))
"""
# log p(reference | source) summed over each test reference's pieces and </s> (nats), teacher
# forced, as aiayn's Translator.score; both cut to MAX_LEN pieces
SCORE_SCRIPT = """
import json, sys, torch
from fairseq.models.transformer import TransformerModel
ckpt, data_bin, spm_model, src, ref, max_len = sys.argv[1:7]
hub = TransformerModel.from_pretrained(str(__import__("pathlib").Path(ckpt).parent),
    checkpoint_file=ckpt.rsplit("/", 1)[1], data_name_or_path=data_bin, bpe="sentencepiece",
    sentencepiece_model=spm_model).eval()
model, n = hub.models[0], int(max_len)
read = lambda path: open(path, encoding="utf-8").read().split("\\n")[:-1]
out = []
with torch.no_grad():
    for s, r in zip(read(src), read(ref)):
        s_ids = torch.cat([hub.encode(s)[:-1][:n - 1], hub.encode(s)[-1:]]).unsqueeze(0)
        t_ids = torch.cat([hub.encode(r)[:-1][:n - 1], hub.encode(r)[-1:]])
        prev = torch.cat([t_ids[-1:], t_ids[:-1]]).unsqueeze(0)  # fairseq starts with </s>
        logits, _ = model(s_ids, torch.tensor([s_ids.size(1)]), prev)
        logp = torch.log_softmax(logits[0].float(), dim=-1)
        out.append(float(logp.gather(-1, t_ids.unsqueeze(-1)).sum()))
print(json.dumps({"logprob": out}))
"""
# fairseq's checkpoints every `every` updates, averaged with aiayn's running average
# (training/averaging.py: the power-function EMA) sampled every `every` updates, in one pass: avg_s =
# beta * avg_(s-every) + (1 - beta) * theta_s with beta = ((s - every) / s) ** (gamma + 1), the
# product of the per-update betas over those `every` updates; written at each step in `steps` as
# OUT/checkpoint_avg_STEP.pt.
AVERAGE_SCRIPT = """
import sys, torch
from pathlib import Path
save_dir, every, gamma, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4])
steps = [int(s) for s in sys.argv[5].split(",")]
avg = None
for s in range(every, max(steps) + 1, every):
    state = torch.load(next(Path(save_dir).glob(f"checkpoint_*_{s}.pt")), map_location="cpu",
                       weights_only=False)  # fairseq's own files, written by this run
    beta = ((s - every) / s) ** (gamma + 1)
    now = {k: v.double() if v.is_floating_point() else v for k, v in state["model"].items()}
    avg = now if avg is None else {k: beta * avg[k] + (1 - beta) * v if v.is_floating_point() else v
                                   for k, v in now.items()}
    if s in steps:
        state["model"] = {k: v.float() if v.is_floating_point() else v for k, v in avg.items()}
        torch.save(state, out / f"checkpoint_avg_{s}.pt")
"""
AIAYN_SCORE_SCRIPT = """
import json, sys
from aiayn.tasks.seq2seq import Translator
model, src, ref = sys.argv[1:4]
read = lambda path: open(path, encoding="utf-8").read().split("\\n")[:-1]
scores = Translator.load(model).score(read(src), read(ref))
print(json.dumps({"logprob": [s["logprob"] for s in scores]}))
"""


def run(cmd: list, env: dict | None = None, log: Path | None = None) -> str:
    """Run a command; returns its stdout. With `log`, stderr and then stdout are kept in that file
    (else stderr goes to the terminal). Exits with the output's tail on failure."""
    cmd = [str(c) for c in cmd]
    print("$ " + shlex.join("<script>" if "\n" in c else c for c in cmd), flush=True)
    with log.open("w") if log else open(os.devnull, "w") as err:
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=err if log else None,
                              text=True)
        err.write(done.stdout)
    if done.returncode:
        tail = log.read_text(errors="replace")[-3000:] if log else done.stdout[-3000:]
        sys.exit(f"failed ({done.returncode}): {cmd[0]} ...\n{tail}")
    return done.stdout


def thread_env(threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
    # torch >= 2.6 loads with weights_only=True; fairseq checkpoints hold argparse/omegaconf objects
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    return env


def ensure_venv() -> float:
    """Build (or reuse) the fairseq venv; returns the seconds the build took (0 if reused)."""
    check = [str(VPY), "-c", "import torch, fairseq, sentencepiece; assert torch.__version__."
             "startswith('2.13.0'), torch.__version__"]
    if VPY.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return 0.0
    start = time.monotonic()
    shutil.rmtree(VENV, ignore_errors=True)
    run([sys.executable, "-m", "venv", VENV])
    pip = [VPY, "-m", "pip", "install", "-q"]
    run([*pip, "torch==2.13.0"])  # the exact pin: an unpinned torch pulls GBs of CUDA libraries
    run([*pip, *DEPS])
    # C++/Cython extensions are built against the torch installed above
    run([*pip, "--no-build-isolation", "--no-deps", "fairseq-fixed==0.12.3.1"])
    run(check)
    return time.monotonic() - start


def prepare_data(work: Path, test_lines: int | None, threads: int) -> dict:
    """The corpus (aiayn's format), its sentencepiece encoding and fairseq's binarized copy."""
    raw, pieces, data_bin = work / "data", work / "spm", work / "data-bin"
    if not (data_bin / "dict.src.txt").exists():
        shutil.rmtree(work, ignore_errors=True)
        run(["aiayn", "data", "gettext", "--lang", "de", "--out", raw])
        pieces.mkdir(parents=True)
        run([VPY, "-c", SPM_SCRIPT, raw, pieces, VOCAB, threads], log=work / "spm.log")
        run([VENV / "bin" / "fairseq-preprocess", "--source-lang", "src", "--target-lang", "tgt",
             "--trainpref", pieces / "train", "--validpref", pieces / "valid",
             "--joined-dictionary", "--destdir", data_bin, "--workers", threads],
            log=work / "preprocess.log")
    src, ref = raw / "test.src", raw / "test.tgt"
    if test_lines:  # --quick: the first N test sentences
        for name in ("src", "tgt"):
            lines = (raw / f"test.{name}").read_text(encoding="utf-8").splitlines(True)
            (work / f"test-head.{name}").write_text("".join(lines[:test_lines]), encoding="utf-8")
        src, ref = work / "test-head.src", work / "test-head.tgt"
    n_test = len(src.read_text(encoding="utf-8").splitlines())
    return {"raw": raw, "bin": data_bin, "spm": pieces / "spm.model", "src": src, "ref": ref,
            "n_test": n_test, "fairseq_max_tokens": fairseq_max_tokens(pieces)}


def fairseq_max_tokens(pieces: Path) -> int:
    """fairseq's --max-tokens giving the batches of aiayn's train.max_tokens (~2k target tokens).

    Both pack length-sorted pairs greedily, but aiayn while (longest source + longest target + 1)
    x sentences <= max_tokens (the source without EOS, the target with it), fairseq while
    max(longest source, longest target) x sentences <= max_tokens (both with EOS). Packing the
    training split's lengths both ways, this is the smallest fairseq budget that gives no more
    batches per epoch than aiayn's (so the same sentences and target tokens per update on
    average; 2340 for 4000 here)."""
    src = (pieces / "train.src").read_text(encoding="utf-8").splitlines()
    tgt = (pieces / "train.tgt").read_text(encoding="utf-8").splitlines()
    pairs = sorted((len(s.split()), len(t.split())) for s, t in zip(src, tgt, strict=True))

    def n_batches(cost, budget: int) -> int:
        count, size, longest = 1, 0, (0, 0)
        for s, t in pairs:
            new = (max(longest[0], s), max(longest[1], t))
            if size and cost(*new) * (size + 1) > budget:
                count, size, new = count + 1, 0, (s, t)
            size, longest = size + 1, new
        return count

    target = n_batches(lambda s, t: s + t + 1, AIAYN_MAX_TOKENS)
    low, high = 1, AIAYN_MAX_TOKENS
    while low < high:  # fewer batches as the budget grows
        mid = (low + high) // 2
        if n_batches(lambda s, t: max(s, t) + 1, mid) <= target:
            high = mid
        else:
            low = mid + 1
    return low


def train_aiayn(out: Path, data: dict, seed: int, args) -> dict:
    recipe = {"model.preset": "small", "model.dropout": 0.1, "model.attn_dropout": 0.0,
              "model.norm_first": "false", "model.max_len": MAX_LEN, "data.corpus": "null",
              "data.corpus_dir": data["raw"], "data.vocab_size": VOCAB,
              "train.max_tokens": AIAYN_MAX_TOKENS, "train.lr": 1e-3, "train.warmup_steps": 400,
              "train.adam_beta1": 0.9, "train.adam_beta2": 0.98, "train.adam_eps": 1e-9,
              "train.label_smoothing": 0.1, "train.clip_norm": 1.0, "train.seed": seed,
              "train.max_minutes": "null" if args.updates else args.minutes,
              "train.max_steps": args.updates or 100000, "train.threads": args.threads,
              "train.eval_every": 0, "train.save_every": args.save_every,
              "train.keep_last_n": 100000, "train.progress": "false", "train.tensorboard": "false",
              "train.precision": args.aiayn_precision}
    if args.aiayn_average_width is not None:
        recipe["train.average_width"] = args.aiayn_average_width
    run(["aiayn", "train", CONFIG, *(f"{k}={v}" for k, v in recipe.items()), "--out", out,
         *(["--resume"] if args.resume else [])],  # --resume: exact, as one longer run
        env=thread_env(args.threads), log=out.with_suffix(".log"))
    import torch  # only to read the documented train_state.pt (step, tokens, elapsed)

    state = torch.load(out / "train_state.pt", map_location="cpu", weights_only=True)
    from aiayn.devices import resolve_precision  # what the trainer chose on this CPU

    return {"updates": state["step"], "tokens": state["tokens"], "seconds": state["elapsed"],
            "precision": resolve_precision(args.aiayn_precision, "cpu")[0]}


def train_fairseq(out: Path, data: dict, seed: int, args) -> dict:
    log = out.with_suffix(".log")
    arch = []
    for side in ("encoder", "decoder"):
        arch += [f"--{side}-embed-dim", 256, f"--{side}-ffn-embed-dim", 1024,
                 f"--{side}-attention-heads", 4, f"--{side}-layers", 3]
    recipe = [  # the same recipe as train_aiayn's, in fairseq's flags
        "--share-all-embeddings", "--dropout", 0.1, "--attention-dropout", 0,
        "--activation-dropout", 0, "--max-source-positions", MAX_LEN,
        "--max-target-positions", MAX_LEN, "--criterion", "label_smoothed_cross_entropy",
        "--label-smoothing", 0.1, "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)",
        "--adam-eps", 1e-9, "--weight-decay", 0, "--lr", 1e-3, "--lr-scheduler", "inverse_sqrt",
        "--warmup-updates", 400, "--clip-norm", 1.0, "--seed", seed,
        # batches as aiayn's (see fairseq_max_tokens); no rounding of batch sizes to multiples of 8
        "--max-tokens", data["fairseq_max_tokens"], "--required-batch-size-multiple", 1]
    # fairseq restores --save-dir's checkpoint_last.pt when there is one (--resume): model,
    # optimizer, schedule and its place in the epoch.
    run([VENV / "bin" / "fairseq-train", data["bin"], "--task", "translation",
         "--arch", "transformer", *arch, *recipe, "--cpu", "--num-workers", 0,  # no loader process
         *(["--max-update", args.updates] if args.updates else
           ["--stop-time-hours", args.minutes / 60]),
         "--disable-validation", "--save-dir", out,
         "--save-interval-updates", PEER_AVERAGE_EVERY if args.peer_average else args.save_every,
         "--no-epoch-checkpoints",
         "--log-format", "json", "--log-interval", 50],
        env=thread_env(args.threads), log=log)
    updates = tokens = seconds = 0
    for line in log.read_text().splitlines():  # end-of-epoch records (the last one partial)
        if "| train |" in line:
            stats = json.loads(line[line.index("{"):])
            n = int(stats["train_num_updates"])
            tokens += float(stats["train_wpb"]) * (n - updates)
            # "wall": seconds since the trainer started (fairseq rounds it to whole seconds)
            updates, seconds = n, float(stats["train_wall"])
    return {"updates": updates, "tokens": round(tokens), "seconds": seconds}


def aiayn_step_model(run_dir: Path, step: int, final: int) -> Path:
    """A model folder holding the weights of numbered checkpoint `step` (the layout of
    folder/checkpoint.py: checkpoints/step_XXXXXXXX.safetensors), via `aiayn average --last 1`."""
    if step == final:
        return run_dir
    staging = run_dir.with_name(f"{run_dir.name}-ckpt{step}")
    out = run_dir.with_name(f"{run_dir.name}-step{step}")
    for folder in (staging, out):
        shutil.rmtree(folder, ignore_errors=True)
    (staging / "checkpoints").mkdir(parents=True)
    for item in run_dir.iterdir():  # config, tokenizer; not the training state
        if item.is_file() and item.name not in ("train_state.pt", "model.safetensors"):
            shutil.copy2(item, staging / item.name)
    name = f"step_{step:08d}.safetensors"
    os.link(run_dir / "checkpoints" / name, staging / "checkpoints" / name)
    run(["aiayn", "average", "--model", staging, "--last", 1, "--out", out])
    shutil.rmtree(staging)
    return out


def fairseq_step_model(save_dir: Path, step: int, final: int) -> Path:
    if step == final:
        return save_dir / "checkpoint_last.pt"
    return next(save_dir.glob(f"checkpoint_*_{step}.pt"))


def decode(system: str, model: Path, data: dict, beam: int, hyp: Path, threads: int,
           workers: int = 1, precision: str = "fp32") -> float:
    """Translate the test set (batch 64); returns the wall-clock seconds of decoding alone.
    workers: aiayn's decoding processes (`aiayn eval --workers`), one thread each;
    precision: aiayn's `--precision`."""
    if system == "aiayn":
        out = run(["aiayn", "eval", "--model", model, "--src", data["src"], "--ref", data["ref"],
                   "--beam", beam, "--length-penalty", "avg", "--alpha", 1.0, "--batch-size", BATCH,
                   "--early-stopping", "first_k",  # fairseq's rule: a sentence stops at K finished
                   "--workers", workers, "--precision", precision, "--json", "--hyp", hyp],
                  env=thread_env(threads), log=hyp.with_suffix(".log"))
    else:
        out = run([VPY, "-c", DECODE_SCRIPT, model.resolve(), data["bin"].resolve(), data["spm"],
                   data["src"], hyp, beam, BATCH], env=thread_env(threads),
                  log=hyp.with_suffix(".log"))
    return float(json.loads(out[out.index("{"):])["seconds"])


def reference_nll(system: str, model: Path, data: dict, threads: int, log: Path) -> float:
    """-log p(reference | source) per test sentence in nats, averaged: what training taught the
    model, apart from search, and comparable across the two tokenizers (it is the probability
    of the whole reference string, however it is cut into pieces)."""
    if system == "aiayn":
        cmd = [sys.executable, "-c", AIAYN_SCORE_SCRIPT, model, data["src"], data["ref"]]
    else:
        cmd = [VPY, "-c", SCORE_SCRIPT, model.resolve(), data["bin"].resolve(), data["spm"],
               data["src"], data["ref"], MAX_LEN]
    out = run(cmd, env=thread_env(threads), log=log)
    logprob = json.loads(out[out.index("{"):])["logprob"]
    return round(-sum(logprob) / len(logprob), 2)


def score(hyp: Path, ref: Path) -> dict:
    """sacreBLEU and chrF of detokenized hypotheses, one scorer for both systems."""
    hyps = hyp.read_text(encoding="utf-8").splitlines()
    refs = ref.read_text(encoding="utf-8").splitlines()
    assert len(hyps) == len(refs), (hyp, len(hyps), len(refs))
    return score_lines(hyps, refs)


def score_lines(hyps: list[str], refs: list[str]) -> dict:
    """score's figures of hypotheses and references given as lines."""
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    return {"bleu": round(bleu.corpus_score(hyps, [refs]).score, 2),
            "chrf": round(chrf.corpus_score(hyps, [refs]).score, 2),
            "hyp_words": round(sum(len(h.split()) for h in hyps) / max(len(hyps), 1), 2),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}


def run_seed(work: Path, data: dict, seed: int, args) -> dict:
    """Train both systems, then score and time them; returns {system: results}."""
    dirs = {"aiayn": work / f"aiayn-s{seed}", "fairseq": work / f"fairseq-s{seed}"}
    for path in dirs.values():
        shutil.rmtree(path, ignore_errors=True)
    res = {"aiayn": train_aiayn(dirs["aiayn"], data, seed, args),
           "fairseq": train_fairseq(dirs["fairseq"], data, seed, args)}
    common = min(r["updates"] for r in res.values()) // args.save_every * args.save_every
    for system, r in res.items():
        r["tokens_per_s"] = round(r["tokens"] / r["seconds"], 1)
        models = {"final": (dirs[system], r["updates"])}
        if common:
            models["equal_updates"] = (dirs[system], common)
        for when, (folder, step) in models.items():
            model = (aiayn_step_model if system == "aiayn" else fairseq_step_model)(
                folder, step, r["updates"])
            for beam in ([4, 1] if when == "final" else [4]):
                hyp = work / f"{system}-s{seed}-{when}-beam{beam}.hyp"
                seconds = decode(system, model, data, beam, hyp, args.threads)
                if beam == 4:
                    r[when] = {"step": step, **score(hyp, data["ref"]),
                               "ref_nll": reference_nll(system, model, data, args.threads,
                                                          hyp.with_suffix(".nll.log"))}
                if when == "final":
                    r[f"beam{beam}_sentences_per_s"] = round(data["n_test"] / seconds, 1)
                    # each system in its best mode: aiayn's worker processes in fp32 or
                    # under its auto precision (bf16 where the CPU computes it), whichever is
                    # faster for this search (on the 2-core test machine greedy's small
                    # products gain nothing from bf16, beam 4's do); fairseq's hub interface
                    # decodes in one process, in fp32
                    best, best_hyp, auto = seconds, hyp, seconds
                    if system == "aiayn":
                        timed = {}
                        for precision in ("fp32", "auto"):
                            path = hyp.with_suffix(f".best-{precision}.hyp")
                            timed[precision] = (decode(system, model, data, beam, path,
                                                       args.threads, args.workers, precision),
                                                path)
                        fastest = min(timed, key=lambda k: timed[k][0])
                        (best, best_hyp), r[f"beam{beam}_best_precision"] = timed[fastest], fastest
                        # one process as fairseq's, in aiayn's default precision
                        auto = decode(system, model, data, beam, hyp.with_suffix(".auto.hyp"),
                                      args.threads, 1, "auto")
                    r[f"beam{beam}_best_sentences_per_s"] = round(data["n_test"] / best, 1)
                    r[f"beam{beam}_auto_sentences_per_s"] = round(data["n_test"] / auto, 1)
                    if beam == 4:
                        r["best_bleu"] = score(best_hyp, data["ref"])["bleu"]
    return res


def run_updates(work: Path, data: dict, seed: int, args, scored: dict | None = None) -> dict:
    """Quality at equal updates alone (--updates N): both systems train to N updates at the same
    time, --threads each (speed is not measured, so they may share the machine); then every
    checkpoint (each --save-every updates) is scored as run_seed scores: beam 4, score / length,
    fairseq's stopping rule, BLEU, chrF, words per translation and reference NLL.
    With args.resume, the runs in `work` continue to N updates and the steps in `scored`
    ({system: {step: scores}}, from the earlier run) are kept, not scored again.
    Returns {system: {step: scores}}."""
    from concurrent.futures import ThreadPoolExecutor

    dirs = {"aiayn": work / f"aiayn-s{seed}", "fairseq": work / f"fairseq-s{seed}"}
    scored = scored or {}
    if args.peer_scores:  # fairseq's checkpoints were scored in an earlier run: aiayn alone
        peer = read_updates(Path(args.peer_scores)).get(seed, {}).get("fairseq", {})
        missing = [s for s in range(args.save_every, args.updates + 1, args.save_every)
                   if s not in peer]
        if missing:
            sys.exit(f"--peer-scores {args.peer_scores}: seed {seed} has no fairseq scores "
                     f"for steps {missing}")
        scored = {**scored, "fairseq": peer}
        del dirs["fairseq"]
    for path in dirs.values():
        if args.resume and not path.is_dir():
            sys.exit(f"--resume: {path} does not exist (run --updates without --resume first)")
        if not args.resume:
            shutil.rmtree(path, ignore_errors=True)
    trainers = {"aiayn": train_aiayn, "fairseq": train_fairseq}
    with ThreadPoolExecutor(2) as pool:  # two subprocesses side by side
        jobs = {system: pool.submit(trainers[system], folder, data, seed, args)
                for system, folder in dirs.items()}
        trained = {system: job.result() for system, job in jobs.items()}
    res = {}
    if "fairseq" not in dirs:
        res["fairseq"] = {step: r for step, r in scored["fairseq"].items() if step <= args.updates}
    for system, folder in dirs.items():
        final, res[system] = trained[system]["updates"], {}
        for step in range(args.save_every, final + 1, args.save_every):
            if step in scored.get(system, {}):
                res[system][step] = scored[system][step]
                continue
            model = (aiayn_step_model if system == "aiayn" else fairseq_step_model)(
                folder, step, final)
            hyp = work / f"{system}-s{seed}-step{step}-beam4.hyp"
            decode(system, model, data, 4, hyp, args.threads)
            res[system][step] = {**score(hyp, data["ref"]), "ref_nll": reference_nll(
                system, model, data, args.threads, hyp.with_suffix(".nll.log"))}
            print(f"seed {seed} {system} step {step}: {res[system][step]['bleu']} BLEU, "
                  f"{res[system][step]['chrf']} chrF", flush=True)
    if args.peer_average and "fairseq" in dirs:
        res["fairseq_averaged"] = peer_averaged(work, data, seed, dirs["fairseq"],
                                                trained["fairseq"]["updates"], args)
    return res


def aiayn_average_width(args) -> float:
    """The width of aiayn's running average in this run: --aiayn-average-width or its default."""
    from aiayn.config import TrainConfig

    width = args.aiayn_average_width
    return TrainConfig().average_width if width is None else width


def weights_note(args) -> str:
    width = aiayn_average_width(args)
    return (f"the running average (train.average_width={width})" if width else
            "the last update's (train.average_width=0)")


def peer_averaged(work: Path, data: dict, seed: int, folder: Path, final: int, args) -> dict:
    """fairseq's weights averaged as aiayn averages its own (the same power-function EMA,
    sampled every PEER_AVERAGE_EVERY updates), scored at each --save-every step: whether the
    averaging, not the updates, makes a difference. {step: scores}."""
    from aiayn.training.averaging import gamma_for

    width = aiayn_average_width(args)
    if not width:
        sys.exit("--peer-average: aiayn's average width is 0 (nothing to compare with)")
    out, res = work / f"fairseq-s{seed}-averaged", {}
    out.mkdir(exist_ok=True)
    steps = range(args.save_every, final + 1, args.save_every)
    run([VPY, "-c", AVERAGE_SCRIPT, folder, PEER_AVERAGE_EVERY, gamma_for(width), out,
         ",".join(map(str, steps))], env=thread_env(args.threads))
    for step in steps:
        model = out / f"checkpoint_avg_{step}.pt"
        hyp = work / f"fairseq-averaged-s{seed}-step{step}-beam4.hyp"
        decode("fairseq", model, data, 4, hyp, args.threads)
        res[step] = {**score(hyp, data["ref"]), "ref_nll": reference_nll(
            "fairseq", model, data, args.threads, hyp.with_suffix(".nll.log"))}
        model.unlink()
        print(f"seed {seed} fairseq averaged step {step}: {res[step]['bleu']} BLEU, "
              f"{res[step]['chrf']} chrF", flush=True)
    return res


def read_updates(path: Path) -> dict:
    """An --updates run's JSON file -> {seed: {system: {step: scores}}}."""
    return {int(seed): {system: {int(step): r for step, r in steps.items()}
                        for system, steps in systems.items()}
            for seed, systems in json.loads(path.read_text())["results"].items()}


def merge(paths: list[Path], record_it: bool) -> dict:
    """One table of the seeds of several earlier runs' JSON files, all --updates runs or all
    wall-clock runs (a later file's seed replaces an earlier file's)."""
    kinds = {"updates" in json.loads(p.read_text()) for p in paths}
    if len(kinds) > 1:
        sys.exit("--merge: give only --updates runs' files or only wall-clock runs' files")
    command = "python benchmarks/vs_fairseq.py " + shlex.join(sys.argv[1:])
    updates = kinds == {True}
    results = {}
    for path in paths:
        results.update(read_updates(path) if updates else
                       {int(seed): r for seed, r in json.loads(path.read_text())["results"].items()})
    text = (updates_table if updates else table)(dict(sorted(results.items())))
    print(text)
    if record_it:
        record(UPDATES_TITLE if updates else TIME_TITLE, "", command, text)
    return {"updates" if updates else "results": results}


def updates_table(results: dict) -> str:
    """Markdown for --updates: per checkpoint step, each seed's and the mean's BLEU / chrF /
    reference NLL / words per translation for both systems, and the ratios of BLEU and chrF."""
    seeds = list(results)
    steps = sorted(set.intersection(*(set(results[s][k]) for s in seeds
                                      for k in ("aiayn", "fairseq"))))
    # --peer-average: fairseq's checkpoints averaged as aiayn's weights are, and aiayn against it
    averaged = all("fairseq_averaged" in results[s] for s in seeds)
    if averaged:
        steps = [t for t in steps if all(t in results[s]["fairseq_averaged"] for s in seeds)]
    lines = ["| updates | seed | aiayn BLEU / chrF | fairseq BLEU / chrF | BLEU ratio | chrF ratio "
             "| ref. NLL aiayn / fairseq | words aiayn / fairseq |"
             + (" fairseq averaged BLEU / chrF / ref. NLL | aiayn / it (BLEU / chrF) |"
                if averaged else ""),
             "|---:|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if averaged else "")]
    for step in steps:
        for seed in seeds + (["mean"] if len(seeds) > 1 else []):
            cell = {}
            for system in ("aiayn", "fairseq"):
                rows = [results[s][system][step] for s in (seeds if seed == "mean" else [seed])]
                cell[system] = {key: statistics.mean(r[key] for r in rows)
                                for key in ("bleu", "chrf", "ref_nll", "hyp_words")}
            a, f = cell["aiayn"], cell["fairseq"]
            name = f"**{seed}**" if seed == "mean" else str(seed)
            ratio = {k: f"{a[k] / f[k]:.2f}x" if f[k] else "n/a" for k in ("bleu", "chrf")}
            lines.append(f"| {step} | {name} | {a['bleu']:.1f} / {a['chrf']:.1f} | "
                         f"{f['bleu']:.1f} / {f['chrf']:.1f} | {ratio['bleu']} | "
                         f"{ratio['chrf']} | {a['ref_nll']:.1f} / {f['ref_nll']:.1f} "
                         f"| {a['hyp_words']:.1f} / {f['hyp_words']:.1f} |")
            if averaged:
                rows = [results[s]["fairseq_averaged"][step]
                        for s in (seeds if seed == "mean" else [seed])]
                v = {k: statistics.mean(r[k] for r in rows) for k in ("bleu", "chrf", "ref_nll")}
                lines[-1] += (f" {v['bleu']:.1f} / {v['chrf']:.1f} / {v['ref_nll']:.1f} | "
                              f"{a['bleu'] / v['bleu']:.2f}x / {a['chrf'] / v['chrf']:.2f}x |")
    if len(seeds) > 1:
        lines += ["", differences_table(results, steps)]
    return "\n".join(lines)


def differences_table(results: dict, steps: list[int]) -> str:
    """Markdown: per checkpoint step, aiayn minus fairseq for each seed, then their mean and the
    standard error of that mean (the seed spread: is a difference more than the draw of seeds?).
    Reference NLL: lower is better, so a negative difference favours aiayn."""
    seeds = list(results)
    lines = [f"aiayn minus fairseq per seed ({', '.join(map(str, seeds))}): mean (standard error)",
             "", "| updates | BLEU | chrF | ref. NLL (nats/sentence) |", "|---:|---|---|---|"]
    for step in steps:
        cells = []
        for key in ("bleu", "chrf", "ref_nll"):
            diff = [results[s]["aiayn"][step][key] - results[s]["fairseq"][step][key]
                    for s in seeds]
            error = statistics.stdev(diff) / math.sqrt(len(diff))
            cells.append(", ".join(f"{d:+.2f}" for d in diff)
                         + f": {statistics.mean(diff):+.2f} ({error:.2f})")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


ROWS = [  # (label, how to read it from one system's results)
    ("updates", lambda r: r["updates"]),
    ("training target tokens/s", lambda r: r["tokens_per_s"]),
    ("BLEU at equal updates", lambda r: r.get("equal_updates", {}).get("bleu")),
    ("chrF at equal updates", lambda r: r.get("equal_updates", {}).get("chrf")),
    ("reference NLL at equal updates (nats/sentence)",
     lambda r: r.get("equal_updates", {}).get("ref_nll")),
    ("BLEU at equal time (final)", lambda r: r["final"]["bleu"]),
    ("chrF at equal time (final)", lambda r: r["final"]["chrf"]),
    ("reference NLL at equal time (nats/sentence)", lambda r: r["final"]["ref_nll"]),
    ("greedy decoding sentences/s", lambda r: r["beam1_sentences_per_s"]),
    ("beam-4 decoding sentences/s", lambda r: r["beam4_sentences_per_s"]),
    ("greedy sentences/s, one process (aiayn --precision auto)",
     lambda r: r.get("beam1_auto_sentences_per_s")),
    ("beam-4 sentences/s, one process (aiayn --precision auto)",
     lambda r: r.get("beam4_auto_sentences_per_s")),
    ("greedy sentences/s, best mode (aiayn --workers, fp32 or --precision auto)",
     lambda r: r.get("beam1_best_sentences_per_s")),
    ("beam-4 sentences/s, best mode (aiayn --workers, fp32 or --precision auto)",
     lambda r: r.get("beam4_best_sentences_per_s")),
    ("BLEU of the best-mode beam-4 output", lambda r: r.get("best_bleu")),
    ("words per beam-4 translation (final)", lambda r: r["final"]["hyp_words"]),
]


def table(results: dict) -> str:
    """Markdown: one row per seed and measure, with aiayn / fairseq; a mean over seeds if > 1."""
    lines = ["| seed | measure | aiayn | fairseq | aiayn / fairseq |", "|---|---|---:|---:|---:|"]
    seeds = list(results)
    for seed in seeds + (["mean"] if len(seeds) > 1 else []):
        for label, get in ROWS:
            if seed == "mean":
                values = [[get(results[s][k]) for s in seeds] for k in ("aiayn", "fairseq")]
                a, f = (None if None in v else sum(v) / len(v) for v in values)
            else:
                a, f = get(results[seed]["aiayn"]), get(results[seed]["fairseq"])
                if label.endswith("equal updates") and a is not None:
                    label += f" ({results[seed]['aiayn']['equal_updates']['step']})"
                if "best mode" in label:  # name the precision that was faster, if recorded
                    chosen = results[seed]["aiayn"].get(
                        f"beam{1 if label.startswith('greedy') else 4}_best_precision")
                    label += f": {chosen}" if chosen else ""
            ratio = f"{a / f:.2f}x" if a is not None and f else "n/a"
            lines.append(f"| {seed} | {label} | {fmt(a)} | {fmt(f)} | {ratio} |")
    return "\n".join(lines)


def fmt(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def record(title: str, about: str, command: str, text: str) -> None:
    """Append a section to benchmarks/RESULTS.md: its title, a line about the run, the command
    and the table."""
    with (ROOT / "benchmarks" / "RESULTS.md").open("a", encoding="utf-8") as f:
        f.write(f"\n## {title}\n\n{datetime.date.today().isoformat()}{about}\n\n"
                f"    {command}\n\n{text}\n")


DECODE_MODES = {  # --decode-only's aiayn modes: (worker processes, --precision)
    "aiayn 1 process fp32": (1, "fp32"), "aiayn 2 workers fp32": (2, "fp32"),
    "aiayn 2 workers bf16 (--precision auto)": (2, "auto")}


def decode_only(work: Path, data: dict, seeds: list[int], repeats: int, threads: int) -> str:
    """Decoding speed alone, on the models a full run left in `work` (final checkpoints): aiayn
    in each of DECODE_MODES and fairseq, interleaved, `repeats` times, for greedy and beam 4
    (aiayn's workers one thread each). -> a markdown table of the median
    sentences/s (and the spread) per mode, and its ratio to fairseq's median."""
    lines = ["| seed | search | mode | sentences/s (median, spread) | / fairseq |",
             "|---|---|---|---:|---:|"]
    for seed in seeds:
        models = {"aiayn": work / f"aiayn-s{seed}",
                  "fairseq": work / f"fairseq-s{seed}" / "checkpoint_last.pt"}
        for path in models.values():
            if not path.exists():
                raise SystemExit(f"{path}: not found; run the full benchmark first (without "
                                 "--decode-only) to train the models")
        modes = {**{name: ("aiayn", *how) for name, how in DECODE_MODES.items()},
                 "fairseq": ("fairseq", 1, "fp32")}
        for beam in (1, 4):
            speeds = {name: [] for name in modes}
            for _ in range(repeats):
                for name, (system, workers, precision) in modes.items():
                    hyp = work / f"{system}-s{seed}-decode-beam{beam}.hyp"
                    seconds = decode(system, models[system], data, beam, hyp, threads, workers,
                                     precision)
                    speeds[name].append(data["n_test"] / seconds)
            search = "greedy" if beam == 1 else f"beam {beam}"
            peer = statistics.median(speeds["fairseq"])
            for name, values in speeds.items():
                med = statistics.median(values)
                lines.append(f"| {seed} | {search} | {name} | {med:,.1f} ({min(values):,.1f}-"
                             f"{max(values):,.1f}) | {med / peer:.2f}x |")
                print(lines[-1], flush=True)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float,
                        help="training budget per system (default 12; 1 with --quick)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for both (default 2)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--save-every", type=int,
                        help="checkpoint interval in updates (default 200; 20 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny budget, the first 100 test sentences")
    parser.add_argument("--work", default="runs/vs-fairseq", help="working folder (runs replaced)")
    parser.add_argument("--json", default=None, help="results file (default WORK/results.json)")
    parser.add_argument("--record", action="store_true",
                        help="append the table to benchmarks/RESULTS.md")
    parser.add_argument("--decode-only", action="store_true",
                        help="time decoding alone on the models of an earlier full run in WORK "
                        "(fairseq and aiayn in 1 process fp32, 2 workers fp32 and 2 workers "
                        "bf16, interleaved, --repeats times)")
    parser.add_argument("--repeats", type=int, default=3, help="with --decode-only (default 3)")
    parser.add_argument("--aiayn-precision", default="auto", choices=("auto", "fp32", "bf16"),
                        help="aiayn's train.precision (default auto: bf16 on CPUs that compute "
                        "it); fairseq trains in fp32 on a CPU")
    parser.add_argument("--aiayn-average-width", type=float, default=None,
                        help="aiayn's train.average_width (default: aiayn's own, 0.02; 0 = the "
                        "last update's weights, as fairseq's)")
    parser.add_argument("--peer-average", action="store_true",
                        help="with --updates: fairseq also saves every 10 updates, and its "
                        "weights averaged as aiayn's are (the same running average, sampled "
                        "every 10 updates) are scored at every checkpoint too")
    parser.add_argument("--updates", type=int, default=None,
                        help="quality at equal updates alone: both systems train to this many "
                        "updates side by side (--threads each, no time budget) and every "
                        "checkpoint is scored; no speed is measured")
    parser.add_argument("--workers", type=int, default=2,
                        help="aiayn's decoding processes for the best-mode rows (default 2)")
    parser.add_argument("--merge", nargs="+", metavar="JSON", default=None,
                        help="print (and with --record, append) one table of the seeds of "
                        "earlier runs' JSON files (all --updates runs, or all wall-clock runs); "
                        "nothing is trained")
    parser.add_argument("--resume", action="store_true",
                        help="with --updates: continue the runs of an earlier --updates run in "
                        "WORK to this many updates (as one longer run: aiayn resumes its "
                        "training state, fairseq its checkpoint_last.pt); the checkpoints "
                        "already in --json (default WORK/updates.json) are not scored again")
    parser.add_argument("--peer-scores", metavar="JSON", default=None,
                        help="with --updates: train aiayn alone and take fairseq's scores per "
                        "checkpoint from this earlier --updates run's JSON file (same seeds, "
                        "same machine's test set), e.g. to compare another aiayn setting")
    args = parser.parse_args(argv)
    if args.peer_scores and (not args.updates or args.resume):
        parser.error("--peer-scores goes with --updates N (and without --resume)")
    if args.peer_average and (not args.updates or args.resume or args.peer_scores):
        parser.error("--peer-average goes with --updates N (without --resume or --peer-scores)")
    if args.merge:
        return merge([Path(p) for p in args.merge], args.record)
    if args.resume and not args.updates:
        parser.error("--resume continues an --updates run: give --updates N")
    args.minutes = args.minutes or (1.0 if args.quick else 12.0)
    args.save_every = args.save_every or (20 if args.quick else 200)
    if args.peer_average and args.save_every % PEER_AVERAGE_EVERY:
        parser.error(f"--peer-average: --save-every must be a multiple of {PEER_AVERAGE_EVERY}")
    argv = sys.argv[1:] if argv is None else argv
    command = "python benchmarks/vs_fairseq.py " + shlex.join(argv)
    work = Path(args.work).resolve()

    build = ensure_venv()
    print(f"fairseq venv: {f'built in {build:.0f} s' if build else 'reused'} ({VENV})", flush=True)
    data = prepare_data(work, 100 if args.quick else None, args.threads)
    print(f"batches: aiayn train.max_tokens={AIAYN_MAX_TOKENS} (src + tgt) = fairseq --max-tokens "
          f"{data['fairseq_max_tokens']} (max(src, tgt)); test: {data['n_test']} sentences",
          flush=True)
    if args.decode_only:
        text = decode_only(work, data, args.seeds, args.repeats, args.threads)
        text += (f"\n\n{data['n_test']} test sentences, batch {BATCH}, {args.threads} thread(s); "
                 "beam 4 with score / length and fairseq's stopping rule on both sides.")
        print("\n" + text)
        if args.record:
            record("Decoding speed: aiayn vs fairseq on the gettext models "
                   "(`benchmarks/vs_fairseq.py --decode-only`)", "", command, text)
        return {"decode_only": text}
    if args.updates:
        out = Path(args.json) if args.json else work / "updates.json"
        before = read_updates(out) if args.resume and out.is_file() else {}
        results = {}
        for seed in args.seeds:
            results[seed] = run_updates(work, data, seed, args, before.get(seed))
            text = updates_table(results)  # after each seed: a long run shows what it has
            print("\n" + text, flush=True)
        text += (f"\n\nBeam 4, batch {BATCH}, score / length, fairseq's stopping rule; "
                 f"{data['n_test']} test sentences. Training precision: aiayn "
                 f"train.precision={args.aiayn_precision}, fairseq fp32; {args.threads} "
                 "thread(s) each, " + (f"fairseq's scores from {args.peer_scores}."
                                       if args.peer_scores else "both systems at once.")
                 + f" aiayn's weights: {weights_note(args)}.")
        out.write_text(json.dumps({"command": command, "updates": args.updates,
                                   "results": results}, indent=2) + "\n")
        if args.record:
            record(UPDATES_TITLE, "", command, text)
        return {"updates": results}
    results = {seed: run_seed(work, data, seed, args) for seed in args.seeds}
    text = table(results)
    final = results[args.seeds[0]]["aiayn"]["final"]
    text += (f"\n\nBLEU: `{final['bleu_signature']}`; chrF: `{final['chrf_signature']}`. "
             f"Beam 4 and greedy, batch {BATCH}, score / length, max source length + 50. "
             f"Training precision: aiayn "
             f"{', '.join(sorted({r['aiayn']['precision'] for r in results.values()}))}"
             f" (train.precision={args.aiayn_precision}), fairseq fp32. aiayn's weights: "
             f"{weights_note(args)}.")
    print("\n" + text)
    report = {"command": command, "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "minutes": args.minutes, "threads": args.threads, "test_sentences": data["n_test"],
              "aiayn_max_tokens": AIAYN_MAX_TOKENS,
              "fairseq_max_tokens": data["fairseq_max_tokens"],
              "venv_build_seconds": round(build), "results": results}
    out = Path(args.json) if args.json else work / "results.json"
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"results: {out}")
    if args.record:
        record(TIME_TITLE, f"; {args.minutes:g} min of training per system, "
               f"{args.threads} thread(s), 2-core CPU machine.", command, text)
    return report


if __name__ == "__main__":
    main()
