"""Decoding speed against fairseq with the SAME weights: fairseq's trained model, copied into aiayn.

`vs_fairseq.py` times each system on its own model, so a model with longer outputs decodes
slower whatever the search code does (the two seeds gave 0.82x and 1.22x at beam 4). Here
fairseq's final checkpoint of a `vs_fairseq.py` run is loaded by fairseq and copied into aiayn's
Transformer (benchmarks/fairseq_parity.py's mapping: ids 0/1 swapped, fairseq's sinusoid table,
decoding started from </s> as fairseq does), and both search the same token ids of the test set
with the same rules: batch 64 in length order, beam 4 (and greedy), score / length, stop a
sentence at 4 finished hypotheses, at most source length + 50 tokens, padding never emitted.
It reports sentences/s of each (median of interleaved repeats, and the spread) and how many
outputs are identical (float rounding may flip a near-tie). aiayn is timed in one process (the
threads shared by its operations, as fairseq's are) and in --workers processes of one thread
each (`aiayn translate` / `eval`'s default, `--workers auto`, is one per thread); the two give
the same outputs (checked).

    python benchmarks/vs_fairseq.py --seeds 0           # once: trains the models it reads
    python benchmarks/decode_vs_fairseq.py --seed 0 --repeats 3 [--record]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fairseq_parity import fairseq_name  # noqa: E402
from vs_fairseq import (  # noqa: E402
    BATCH,
    ROOT,
    VPY,
    ensure_venv,
    prepare_data,
    thread_env,
)

FAIRSEQ_SIDE = """
import json, sys, time, numpy as np, torch
from fairseq.models.transformer import TransformerModel
ckpt, data_bin, spm_model, src, beam, batch, dump = sys.argv[1:8]
torch.set_num_threads(int(sys.argv[8]))
hub = TransformerModel.from_pretrained(str(__import__("pathlib").Path(ckpt).parent),
    checkpoint_file=ckpt.rsplit("/", 1)[1], data_name_or_path=data_bin, bpe="sentencepiece",
    sentencepiece_model=spm_model).eval()
hub.cfg.dataset.batch_size, hub.cfg.dataset.max_tokens = int(batch), None
ids = [hub.encode(line) for line in open(src, encoding="utf-8").read().split("\\n")[:-1]]
if dump != "-":  # the weights, shapes and source ids, for the aiayn side
    a = hub.models[0].args if getattr(hub.models[0], "args", None) else hub.cfg.model
    np.savez(dump, **{k: v.numpy() for k, v in hub.models[0].state_dict().items()},
             __src=np.array(json.dumps([x.tolist() for x in ids])),
             __dims=np.array(json.dumps({"d_model": a.encoder_embed_dim, "heads": a.encoder_attention_heads,
                 "ffn": a.encoder_ffn_embed_dim, "layers": a.encoder_layers,
                 "dec_layers": a.decoder_layers, "max": a.max_source_positions})))
hub.generate(ids[:64], beam=int(beam), lenpen=1.0, max_len_a=1, max_len_b=50)  # warm-up
start = time.perf_counter()
out = hub.generate(ids, beam=int(beam), lenpen=1.0, max_len_a=1, max_len_b=50)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "out": [o[0]["tokens"].tolist() for o in out]}))
"""


def speed_cells(speeds: dict[str, list[float]]) -> str:
    """{"aiayn": [...], "fairseq": [...]} sentences/s of repeats -> the table cells "median
    (min-max) | median (min-max) | ratio of the medians"."""
    med = {s: statistics.median(v) for s, v in speeds.items()}
    cells = [f"{med[s]:,.1f} ({min(v):,.1f}-{max(v):,.1f})" for s, v in speeds.items()]
    return f"{cells[0]} | {cells[1]} | {med['aiayn'] / med['fairseq']:.2f}x"


def fairseq_table(n: int, d: int) -> torch.Tensor:
    """fairseq's SinusoidalPositionalEmbedding rows for positions 2 .. n + 1 (pad index 1 + 1)."""
    half = d // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
    pos = torch.arange(2, 2 + n, dtype=torch.float)[:, None] * freq[None]
    return torch.cat([torch.sin(pos), torch.cos(pos)], 1)


def aiayn_model(ref: dict):
    """fairseq's weights in aiayn's Transformer; returns (model, fairseq id -> aiayn id)."""
    from aiayn.config import TransformerConfig
    from aiayn.models import Transformer

    dims = json.loads(str(ref["__dims"]))
    emb = torch.from_numpy(ref["encoder.embed_tokens.weight"])
    v = emb.shape[0]
    perm = torch.arange(v)
    perm[0], perm[1] = 1, 0  # fairseq <s> 0, <pad> 1; aiayn <pad> 0, <s> 1 (an involution)
    cfg = TransformerConfig(vocab_size=v, d_model=dims["d_model"], n_heads=dims["heads"],
                            d_ff=dims["ffn"], n_layers=dims["layers"],
                            n_decoder_layers=dims["dec_layers"], dropout=0.0,
                            max_len=dims["max"])
    model = Transformer(cfg).eval()
    model.src_embed.positions.table = fairseq_table(dims["max"] + 60, dims["d_model"])
    ours = torch.empty_like(emb)
    ours[perm] = emb
    state = {k: ours if "embed.tokens" in k or k == "output.weight"
             else torch.from_numpy(ref[fairseq_name(k)]) for k in model.state_dict()}
    model.load_state_dict(state)
    return model, perm


def aiayn_decode(model, src: list[list[int]], beam: int, workers: int = 1) -> list[list[int]]:
    """aiayn's search on the ids (aiayn numbering), batch 64 in length order, fairseq's rules;
    workers > 1: that many forked processes decode alternate batches (`aiayn eval --workers`)."""
    from aiayn.data.batching import pad_ids
    from aiayn.data.special import EOS, PAD
    from aiayn.generation.search import GenerationConfig, search
    from aiayn.generation.workers import map_batches

    config = GenerationConfig(beam=beam, alpha=1.0, length_penalty="avg", bos_id=EOS,
                              eos_id=EOS, pad_id=PAD, max_extra=50, early_stopping="first_k")
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    batches = [order[start:start + BATCH] for start in range(0, len(order), BATCH)]

    def one(rows: list[int]) -> list[list[int]]:
        with torch.no_grad():
            return search(model, pad_ids([src[i] for i in rows]), config)

    out: list[list[int]] = [[] for _ in src]
    for rows, tokens in zip(batches, map_batches(one, batches, workers), strict=True):
        for i, t in zip(rows, tokens, strict=True):
            out[i] = t
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="whose fairseq model (default 0)")
    parser.add_argument("--work", default="runs/vs-fairseq", help="vs_fairseq.py's folder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2,
                        help="aiayn is also timed with this many decoding processes, one thread "
                             "each (default 2; 1: one process only)")
    parser.add_argument("--record", action="store_true", help="append to benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    ensure_venv()
    work = Path(args.work).resolve()
    ckpt = work / f"fairseq-s{args.seed}" / "checkpoint_last.pt"
    if not ckpt.is_file():
        raise SystemExit(f"{ckpt}: not found; run benchmarks/vs_fairseq.py --seeds {args.seed}")
    data = prepare_data(work, None, args.threads)
    torch.set_num_threads(args.threads)

    def fairseq(beam: int, dump: str = "-") -> tuple[float, list[list[int]]]:
        cmd = [str(VPY), "-c", FAIRSEQ_SIDE, str(ckpt), str(data["bin"]), str(data["spm"]),
               str(data["src"]), str(beam), str(BATCH), dump, str(args.threads)]
        out = subprocess.run(cmd, env=thread_env(args.threads), capture_output=True, text=True,
                             check=True).stdout
        result = json.loads(out[out.index("{"):])
        return result["seconds"], result["out"]

    with tempfile.TemporaryDirectory() as tmp:
        dump = str(Path(tmp) / "fairseq.npz")
        fairseq(1, dump)
        ref = dict(np.load(dump))
    model, perm = aiayn_model(ref)
    src = [[int(perm[t]) for t in row] for row in json.loads(str(ref["__src"]))]
    aiayn_decode(model, src[:64], 4)  # warm-up
    modes = {"1 process": 1, **({f"{args.workers} workers": args.workers} if args.workers > 1 else {})}
    lines = ["| search | aiayn mode | aiayn sent/s (median, spread) | fairseq sent/s (median, "
             "spread) | aiayn / fairseq | identical outputs |", "|---|---|---:|---:|---:|---:|"]
    for beam in (1, 4):
        times: dict[str, list[float]] = {**{m: [] for m in modes}, "fairseq": []}
        outs = {}
        for _ in range(args.repeats):  # interleaved: every mode once per round
            for mode, workers in modes.items():
                start = time.perf_counter()
                outs[mode] = aiayn_decode(model, src, beam, workers)
                times[mode].append(time.perf_counter() - start)
            seconds, theirs = fairseq(beam)
            times["fairseq"].append(seconds)
        theirs = [[int(perm[t]) for t in row if int(perm[t]) != 2] for row in theirs]  # no </s>
        name = "greedy" if beam == 1 else f"beam {beam}"
        for mode in modes:
            if outs[mode] != outs["1 process"]:
                raise SystemExit(f"{name}: aiayn's {mode} output differs from one process's")
            same = sum(a == b for a, b in zip(outs[mode], theirs, strict=True))
            speed = {"aiayn": [len(src) / t for t in times[mode]],
                     "fairseq": [len(src) / t for t in times["fairseq"]]}
            lines.append(f"| {name} | {mode} | {speed_cells(speed)} | {same}/{len(src)} |")
            print(lines[-1], flush=True)
    text = "\n".join(lines)
    command = "python benchmarks/decode_vs_fairseq.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"\n{text}\n\n{len(src)} test sentences, {args.threads} thread(s), batch {BATCH}.")
    if args.record:
        with (ROOT / "benchmarks" / "RESULTS.md").open("a", encoding="utf-8") as f:
            f.write("\n## Decoding speed against fairseq with the same weights "
                    f"(`benchmarks/decode_vs_fairseq.py`)\n\n{datetime.date.today().isoformat()}; "
                    f"fairseq's seed-{args.seed} model from vs_fairseq.py, copied into aiayn; "
                    f"{len(src)} test sentences, batch {BATCH}, {args.threads} thread(s), "
                    f"2-core CPU machine.\n\n    {command}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
