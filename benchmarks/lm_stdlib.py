"""Language model: aiayn DecoderLM vs HF GPT2LMHeadModel on python-stdlib, in one run.

Both models have the same shape (a GPT-2 preset), start from the same weights (HF's GPT-2
initialisation, copied into aiayn by aiayn.convert.hf_gpt2), see the same token stream (byte-level
BPE of the python-stdlib train split, the same blocks in the same order) with the same optimizer,
and each trains for the same wall-clock budget. Steps alternate between the two models, so load
from other processes hits both alike. Reported: training tokens/s, validation loss and bits per
byte after the budget, and greedy KV-cache generation tokens/s at batch 1 and 8 (aiayn's
generation loop vs HF `generate`).

    python benchmarks/lm_stdlib.py                          # GPT-2-small shape, 5 minutes each
    python benchmarks/lm_stdlib.py --shape gpt2-mini --minutes 1

Fairness: residual and embedding dropout as set by --dropout for both; no attention-probability
dropout for either (GPT-2 has 0.1 there, which would force PyTorch's unfused attention kernel on
both). The loss is the same function of each model's logits. AdamW (fused when available) with the
same hyper-parameters, linear warmup then a constant rate, gradient clipping at 1.0.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch.nn.functional as F
import transformers
from torch import nn

from aiayn.config import DECODER_LM_PRESETS
from aiayn.convert.hf_gpt2 import from_hf
from aiayn.data.stdlib_corpus import python_stdlib
from aiayn.data.tokenizer import Tokenizer
from aiayn.generation.lm import generate
from aiayn.tasks.language_model import block_batches, doc_tokens, score_documents


class HFLogits(nn.Module):
    """HF GPT-2 seen as tokens -> logits, for the shared loss and scoring code."""

    def __init__(self, hf: nn.Module):
        super().__init__()
        self.hf = hf

    def forward(self, tokens, cache=None):
        return self.hf(input_ids=tokens, use_cache=False).logits


def hf_config(shape: dict, vocab_size: int, dropout: float) -> transformers.GPT2Config:
    return transformers.GPT2Config(
        vocab_size=vocab_size, n_positions=shape["max_len"], n_embd=shape["d_model"],
        n_layer=shape["n_layers"], n_head=shape["n_heads"], n_inner=shape["d_ff"],
        activation_function="gelu_new", resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=0.0,
        layer_norm_epsilon=shape["layer_norm_eps"], bos_token_id=None, eos_token_id=None,
        pad_token_id=0, tie_word_embeddings=True)


def optimizer(model: nn.Module, lr: float) -> torch.optim.Optimizer:
    """AdamW, decay on matrices only (chosen by shape, so both models group alike)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), eps=1e-8, fused=True)
    except (RuntimeError, TypeError):  # no fused kernel for this device / build
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), eps=1e-8)


class Run:
    """One model's training state: its own batch stream (same seed), optimizer and clock."""

    def __init__(self, name: str, model: nn.Module, stream, lr: float, warmup: int):
        self.name, self.model, self.stream = name, model, stream
        self.opt, self.lr, self.warmup = optimizer(model, lr), lr, warmup
        self.steps, self.tokens, self.seconds = 0, 0, 0.0

    def step(self) -> float:
        batch = next(self.stream)
        start = time.perf_counter()
        self.model.train()
        for g in self.opt.param_groups:
            g["lr"] = self.lr * min(1.0, (self.steps + 1) / self.warmup)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        logits = self.model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.seconds += time.perf_counter() - start
        self.steps += 1
        self.tokens += targets.numel()
        return loss.detach().item()


def train_both(runs: list[Run], budget_s: float, log_every: int) -> None:
    """Alternate steps (order flipped each round) until each run has spent its budget."""
    rnd = 0
    while any(r.seconds < budget_s for r in runs):
        for r in runs if rnd % 2 == 0 else runs[::-1]:
            if r.seconds < budget_s:
                loss = r.step()
                if r.steps % log_every == 0:
                    print(f"  {r.name:5s} step {r.steps:5d}  loss {loss:.3f}  "
                          f"{r.tokens / r.seconds:,.0f} tok/s", flush=True)
        rnd += 1


def time_generation(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_generation(ours, hf, prompts: torch.Tensor, new_tokens: int, repeats: int):
    """Greedy decoding of new_tokens tokens for each prompt row; (ours tok/s, HF tok/s)."""
    ours.eval()
    hf.eval()
    mask = torch.ones_like(prompts)
    with torch.no_grad():
        t_ours = time_generation(lambda: generate(ours, prompts, new_tokens, temperature=0), repeats)
        t_hf = time_generation(lambda: hf.generate(
            prompts, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
            do_sample=False, pad_token_id=0), repeats)
    n = prompts.shape[0] * new_tokens
    return n / t_ours, n / t_hf


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="gpt2-small", choices=sorted(DECODER_LM_PRESETS))
    p.add_argument("--minutes", type=float, default=5.0, help="training budget per model")
    p.add_argument("--vocab", type=int, default=8192, help="byte-level BPE vocabulary")
    p.add_argument("--max-bytes", type=int, default=4_000_000, help="python-stdlib cap")
    p.add_argument("--block-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="sequences per step")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--eval-tokens", type=int, default=50_000)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--gen-tokens", type=int, default=64)
    p.add_argument("--gen-repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = python_stdlib(max_bytes=args.max_bytes)
    tok = Tokenizer.train([t for _, t in corpus["train"]], args.vocab, "byte_bpe")
    stream = torch.cat(doc_tokens(tok, corpus["train"]))
    shape = DECODER_LM_PRESETS[args.shape]
    torch.manual_seed(args.seed)
    hf = transformers.GPT2LMHeadModel(hf_config(shape, tok.vocab_size, args.dropout))
    ours = from_hf(hf)  # the same initial weights
    hf_model = HFLogits(hf)
    n_params = ours.num_parameters()
    print(f"{args.shape}: {n_params / 1e6:.1f}M parameters, vocabulary {tok.vocab_size}, "
          f"{stream.numel():,} training tokens; {torch.get_num_threads()} threads; "
          f"{args.minutes} min per model", flush=True)
    runs = [Run(name, model, block_batches(stream, args.block_len, args.batch, args.seed),
                args.lr, args.warmup) for name, model in (("aiayn", ours), ("hf", hf_model))]
    train_both(runs, args.minutes * 60, args.log_every)

    results = {}
    for r in runs:
        r.model.eval()
        with torch.no_grad():
            results[r.name] = score_documents(r.model, tok, corpus["valid"], args.block_len,
                                              args.eval_tokens)
    valid = torch.cat(doc_tokens(tok, corpus["valid"]))
    gen = {}
    for b in (1, 8):
        starts = range(0, b * args.prompt_len * 7, args.prompt_len * 7)
        prompts = torch.stack([valid[s:s + args.prompt_len] for s in starts])
        gen[b] = bench_generation(ours, hf, prompts, args.gen_tokens, args.gen_repeats)
    with torch.no_grad():  # the check that the two decode the same way: copy HF's trained weights
        prompts = valid[None, :args.prompt_len]
        same = torch.equal(generate(from_hf(hf), prompts, 20, temperature=0),
                           hf.generate(prompts, attention_mask=torch.ones_like(prompts),
                                       max_new_tokens=20, do_sample=False, pad_token_id=0))
    report(args, runs, results, gen, same, n_params, tok.vocab_size)


def report(args, runs, results, gen, same, n_params, vocab) -> None:
    a, h = runs
    ra, rh = results["aiayn"], results["hf"]
    tps_a, tps_h = a.tokens / a.seconds, h.tokens / h.seconds
    cpu = platform.processor() or platform.machine()
    print(f"\n{args.shape} shape ({n_params / 1e6:.1f}M parameters, vocabulary {vocab}), block "
          f"{args.block_len} x batch {args.batch}, {args.minutes} min of training each, "
          f"{torch.get_num_threads()} threads ({cpu}), torch {torch.__version__}, "
          f"transformers {transformers.__version__}\n")
    rows = [
        ("training tokens/s", f"{tps_a:,.0f}", f"{tps_h:,.0f}", f"{tps_a / tps_h:.2f}x"),
        ("steps in the budget", f"{a.steps}", f"{h.steps}", f"{a.steps / max(h.steps, 1):.2f}x"),
        ("validation loss (nats/token)", f"{ra['loss']:.4f}", f"{rh['loss']:.4f}",
         f"{ra['loss'] - rh['loss']:+.4f}"),
        ("validation bits/byte", f"{ra['bits_per_byte']:.4f}", f"{rh['bits_per_byte']:.4f}",
         f"{ra['bits_per_byte'] - rh['bits_per_byte']:+.4f}"),
        ("generate tokens/s, batch 1", f"{gen[1][0]:,.1f}", f"{gen[1][1]:,.1f}",
         f"{gen[1][0] / gen[1][1]:.2f}x"),
        ("generate tokens/s, batch 8", f"{gen[8][0]:,.1f}", f"{gen[8][1]:,.1f}",
         f"{gen[8][0] / gen[8][1]:.2f}x"),
    ]
    print("| | aiayn DecoderLM | HF GPT2LMHeadModel | aiayn vs HF |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nvalidation: {ra['tokens']:,} tokens of python-stdlib's valid split; generation: "
          f"greedy, {args.prompt_len}-token prompts + {args.gen_tokens} new tokens, median of "
          f"{args.gen_repeats}; same greedy tokens as HF with HF's trained weights copied: "
          f"{'yes' if same else 'NO'}")
    checks = [("training tokens/s >= 1.3x HF", tps_a >= 1.3 * tps_h),
              ("validation loss <= HF", ra["loss"] <= rh["loss"]),
              ("generation tokens/s >= HF at batch 1 and 8", all(g[0] >= g[1] for g in gen.values())),
              ("same greedy continuation as HF on copied weights", same)]
    for name, ok in checks:
        print(f"- {'PASS' if ok else 'FAIL'}: {name}")


if __name__ == "__main__":
    main()
