"""Why aiayn trains in bf16 on CPUs that compute it, and why its CPU attention takes two matmuls
over short sequences: the three measurements behind those defaults, in one run.

1. Matmul throughput, fp32 against bf16, at the shapes of the CPU-sized translation model
   (~2k tokens x d_model 256, d_ff 1024, an 8k vocabulary).
2. Attention forward + backward (4 heads of 64, ~2k query positions per call, half the rows
   padded), for sequence lengths 16..256: PyTorch's fused SDPA kernel in fp32, the same kernel in
   bf16, and the matmul path (aiayn.nn.attention._matmul_attention: two bmm, softmax in fp32) in
   fp32 and bf16.
3. One training step of the CPU-sized Transformer (d_model 256, 3+3 layers, vocabulary 8000) on
   a batch of ~160 sentences of up to 13 tokens, label-smoothed loss, Adam, clipping: fp32 against
   bf16 autocast (train.precision=bf16), with the loss of the first step in both.

    python benchmarks/cpu_bf16.py --threads 2

Medians of interleaved repeats. bf16 is only fast where the CPU multiplies it in hardware
(AVX512-BF16 or AMX: aiayn.devices.cpu_has_bf16); elsewhere torch emulates it.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from aiayn import Transformer, TransformerConfig
from aiayn.data.batching import Batch
from aiayn.devices import cpu_has_bf16
from aiayn.masks import padding_mask
from aiayn.nn.attention import _matmul_attention
from aiayn.tasks.seq2seq_loss import seq2seq_loss


def median_ms(fn, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def matmuls(repeats: int) -> list[str]:
    rows = ["| product (M x K x N) | fp32 GFLOP/s | bf16 GFLOP/s | bf16 / fp32 |", "|---|---:|---:|---:|"]
    for m, k, n in ((2048, 256, 1024), (2048, 1024, 256), (2048, 256, 8000), (2048, 8000, 256)):
        rate = {}
        for dtype in (torch.float32, torch.bfloat16):
            a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
            rate[dtype] = 2 * m * k * n / median_ms(lambda a=a, b=b: a @ b, repeats) / 1e6
        rows.append(f"| {m} x {k} x {n} | {rate[torch.float32]:.0f} | {rate[torch.bfloat16]:.0f} | "
                    f"{rate[torch.bfloat16] / rate[torch.float32]:.2f}x |")
    return rows


def attention(repeats: int) -> list[str]:
    heads, dim = 4, 64
    rows = ["| T_q = T_k | fused fp32 (ms) | fused bf16 | matmul fp32 | matmul bf16 |",
            "|---:|---:|---:|---:|---:|"]
    for t in (16, 32, 64, 128, 256):
        batch = max(2, 2048 // t)
        keys = torch.ones(batch, t, dtype=torch.long)
        keys[::2, t * 3 // 4:] = 0
        mask = padding_mask(keys, 0)
        cells = []
        for path in ("fused", "matmul"):
            for dtype in (torch.float32, torch.bfloat16):
                q, k, v = (torch.randn(batch, heads, t, dim, dtype=dtype, requires_grad=True)
                           for _ in range(3))
                grad = torch.randn(batch, heads, t, dim, dtype=dtype)

                def step(q=q, k=k, v=v, grad=grad, path=path, mask=mask):
                    if path == "fused":
                        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                    else:
                        out = _matmul_attention(q, k, v, mask)
                    out.backward(grad)

                cells.append(median_ms(step, repeats))
        rows.append(f"| {t} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return rows


def training_step(repeats: int) -> list[str]:
    cfg = TransformerConfig.preset("small")
    g = torch.Generator().manual_seed(0)
    n, s = 160, 13
    src, tgt = (torch.randint(4, cfg.vocab_size, (n, s + 1), generator=g) for _ in range(2))
    for ids in (src, tgt):
        lengths = torch.randint(5, s + 2, (n,), generator=g)
        ids[torch.arange(s + 1)[None, :] >= lengths[:, None]] = 0

    batch = Batch(src[:, :-1], tgt[:, :-1], tgt[:, 1:])
    loss_fn = seq2seq_loss(0.1)
    rows = ["| precision | step (ms) | target tokens/s | first loss |", "|---|---:|---:|---:|"]
    results = {}
    for dtype in (None, torch.bfloat16):
        torch.manual_seed(0)
        model = Transformer(cfg).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
        first = []

        def step(model=model, opt=opt, dtype=dtype, first=first):
            with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                loss, units, _ = loss_fn(model, batch)
            (loss / units).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            first.append(float(loss.detach()) / units)

        results[dtype] = (median_ms(step, repeats), first[0])
    tokens = batch.n_tgt_tokens
    for dtype, (ms, loss) in results.items():
        rows.append(f"| {'bf16 autocast' if dtype else 'fp32'} | {ms:.0f} | "
                    f"{tokens / ms * 1e3:,.0f} | {loss:.4f} |")
    speedup = results[None][0] / results[torch.bfloat16][0]
    rows.append(f"\nbf16 / fp32 step speed: {speedup:.2f}x ({tokens} target tokens per step)")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeats", type=int, default=10)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}, CPU computes bf16: {cpu_has_bf16()}\n")
    for title, part in (("Matmuls", matmuls), ("Attention, forward + backward", attention),
                        ("Training step, CPU-sized Transformer", training_step)):
        print(f"{title}\n\n" + "\n".join(part(args.repeats)) + "\n", flush=True)


if __name__ == "__main__":
    main()
