"""Decoding speed: aiayn greedy / beam-4 search vs HF MarianMTModel.generate, same shapes, one run.

Both models have the CPU-sized shape (d_model 256, 4 heads, d_ff 1024, 3+3 layers, vocab 8000) and
random weights; both decode every sentence to exactly N target tokens (EOS is banned before
that: HF gets min_new_tokens = max_new_tokens = N, aiayn a wrapper that masks the EOS logit until
position N and a length limit of N, after which it spends one more step on the final EOS), so
the work is the same. Reported: output tokens/s (B x N per call, beams not
counted), median of repeated calls, and the ratio aiayn / HF.

    python benchmarks/decode_speed.py [--batch 32] [--src-len 20] [--new 30] [--repeats 3]
    python benchmarks/decode_speed.py --device cuda --batch 256      # on a GPU, fp32
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from aiayn import Transformer, TransformerConfig
from aiayn.generation.search import beam_search, greedy_search

PAD, BOS, EOS = 0, 1, 2
SHAPE = dict(d_model=256, n_heads=4, d_ff=1024, n_layers=3, vocab_size=8000)


def marian(cfg: TransformerConfig):
    from transformers import MarianConfig, MarianMTModel

    mc = MarianConfig(vocab_size=cfg.vocab_size, d_model=cfg.d_model, encoder_layers=cfg.n_layers,
                      decoder_layers=cfg.n_layers, encoder_attention_heads=cfg.n_heads,
                      decoder_attention_heads=cfg.n_heads, encoder_ffn_dim=cfg.d_ff,
                      decoder_ffn_dim=cfg.d_ff, activation_function="relu", pad_token_id=PAD,
                      decoder_start_token_id=BOS, eos_token_id=EOS, forced_eos_token_id=None,
                      max_position_embeddings=cfg.max_len, scale_embedding=True,
                      share_encoder_decoder_embeddings=True)
    return MarianMTModel._from_config(mc, attn_implementation="sdpa").eval()


class EosAfter:
    """The model, with EOS banned before `n` target tokens (what HF's min_new_tokens does)."""

    def __init__(self, model: Transformer, n: int):
        self.model, self.n = model, n

    def encode(self, src, src_mask):
        return self.model.encode(src, src_mask)

    def new_cache(self):
        return self.model.new_cache()

    def decode(self, tgt, memory, src_mask, cache):
        logits = self.model.decode(tgt, memory, src_mask, cache)
        if cache.length <= self.n:  # BOS + fewer than n tokens so far
            logits[..., EOS] = float("-inf")
        return logits


def timed(fn, repeats: int, device: str = "cpu") -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if device.startswith("cuda"):  # the GPU's queued work counts too
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--src-len", type=int, default=20)
    p.add_argument("--new", type=int, default=30, help="target tokens per sentence")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N], both models there")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = TransformerConfig(**SHAPE, dropout=0.0, max_len=512)
    ours = Transformer(cfg).eval().to(args.device)
    hf = marian(cfg).to(args.device)
    src = torch.randint(4, cfg.vocab_size, (args.batch, args.src_len)).to(args.device)
    n_tokens = args.batch * args.new
    # aiayn's length limit is src_len + max_extra = N tokens; EOS is banned until then.
    ids = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD, max_extra=args.new - args.src_len)
    banned = EosAfter(ours, args.new)

    def hf_generate(beams: int):
        with torch.no_grad():
            out = hf.generate(input_ids=src, attention_mask=torch.ones_like(src), num_beams=beams,
                              do_sample=False, max_new_tokens=args.new, min_new_tokens=args.new,
                              early_stopping=False, length_penalty=0.6)
        assert out.shape[1] - 1 == args.new, out.shape
        return out

    def aiayn_search(beams: int):
        if beams == 1:
            out = greedy_search(banned, src, **ids)
        else:
            out = beam_search(banned, src, beam=beams, **ids)
        assert all(len(t) == args.new for t in out), [len(t) for t in out]
        return out

    rows = []
    for beams in (1, 4):
        t_ours = timed(lambda b=beams: aiayn_search(b), args.repeats, args.device)
        t_hf = timed(lambda b=beams: hf_generate(b), args.repeats, args.device)
        rows.append((beams, n_tokens / t_ours, n_tokens / t_hf))
    print(f"batch {args.batch}, source {args.src_len} tokens, {args.new} target tokens each, "
          f"torch {torch.__version__}, " + (torch.cuda.get_device_name(args.device)
          if args.device.startswith("cuda") else f"{torch.get_num_threads()} threads") + "\n")
    print("| search | aiayn tok/s | HF Marian generate tok/s | aiayn / HF |")
    print("|---|---:|---:|---:|")
    for beams, ours_tps, hf_tps in rows:
        name = "greedy" if beams == 1 else f"beam {beams}"
        print(f"| {name} | {ours_tps:,.0f} | {hf_tps:,.0f} | {ours_tps / hf_tps:.2f}x |")


if __name__ == "__main__":
    main()
