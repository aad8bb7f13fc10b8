"""Training throughput: aiayn vs torch.nn.Transformer vs HF MarianMTModel, same shapes, one run.

Each model does forward + backward + Adam step on the same random batches (B sentences of T source
and T target tokens), with label-smoothed cross-entropy over the vocabulary. Reported: target
tokens/s, the ratio to the best peer, and model FLOPs utilisation (MFU) against an fp32 matmul peak
measured in the same run.

    python benchmarks/train_throughput.py                 # both configs, writes a markdown table
    python benchmarks/train_throughput.py --configs small --steps 10
    python benchmarks/train_throughput.py --processes 2   # + every model data-parallel (DDP)
    python benchmarks/train_throughput.py --bf16          # + every model under bf16 autocast
    python benchmarks/train_throughput.py --device cuda --bf16 --batch 256 --tokens 64   # a GPU
    python benchmarks/train_throughput.py --device cuda --bf16 --compile --systems aiayn \
        --configs base --batch 512 --tokens 64          # the GPU's MFU at 32k tokens per step

With --bf16 every model also trains under CPU bf16 autocast (what train.precision=bf16 does for
aiayn; the same torch.autocast around the peers' forward and loss), its MFU against a bf16 matmul
peak measured in the same run; HF Marian then also runs with its eager (matmul) attention, its
faster attention under CPU bf16.

With --processes N every model also trains as N processes of 1 thread under PyTorch's
DistributedDataParallel (gloo), each on 1/N of the same global batch: what `torchrun
--nproc_per_node=N -m aiayn train` does, given to the peers too, so that each system's best mode
on this machine (one process with all threads, or N processes) is compared with the others'.

Fairness: all three use residual dropout 0.1 and no attention-probability or activation dropout
(the paper's recipe; tensor2tensor's base config), so all may use PyTorch's fused SDPA kernels.
torch.nn.Transformer ties attention dropout to its `dropout` argument, so the peer sets the
attention / activation dropout modules to 0 after construction (a "tuned" nn.Transformer).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F
from torch import nn

from aiayn import Transformer, TransformerConfig
from aiayn.masks import causal_mask
from aiayn.nn import sinusoidal_positions

CONFIGS = {
    # The CPU-sized config.
    "small": dict(d_model=256, n_heads=4, d_ff=1024, n_layers=3, vocab_size=8000),
    # The paper's base model (Table 3) with a 37k shared vocabulary.
    "base": dict(d_model=512, n_heads=8, d_ff=2048, n_layers=6, vocab_size=37000),
}
PAD = 0


class TorchTransformerMT(nn.Module):
    """The same model built on torch.nn.Transformer: shared scaled embeddings, sinusoids, tied output."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.register_buffer("pe", sinusoidal_positions(cfg.max_len, cfg.d_model), persistent=False)
        self.core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.n_layers, cfg.d_ff,
                                   dropout=cfg.dropout, batch_first=True)
        for m in self.core.modules():  # tuned: no attention or activation dropout (see docstring)
            if isinstance(m, nn.MultiheadAttention):
                m.dropout = 0.0
            if isinstance(m, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
                m.dropout.p = 0.0
        self.drop = nn.Dropout(cfg.dropout)

    def _emb(self, ids):
        return self.drop(self.embed(ids) * math.sqrt(self.cfg.d_model) + self.pe[: ids.shape[1]])

    def forward(self, src, tgt):
        t = tgt.shape[1]
        h = self.core(self._emb(src), self._emb(tgt), tgt_mask=~causal_mask(t)[0, 0],
                      src_key_padding_mask=src == PAD, memory_key_padding_mask=src == PAD,
                      tgt_is_causal=True)
        return F.linear(h, self.embed.weight)


class MarianMT(nn.Module):
    ATTENTION = "sdpa"

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        from transformers import MarianConfig, MarianMTModel

        mc = MarianConfig(vocab_size=cfg.vocab_size, d_model=cfg.d_model, encoder_layers=cfg.n_layers,
                          decoder_layers=cfg.n_layers, encoder_attention_heads=cfg.n_heads,
                          decoder_attention_heads=cfg.n_heads, encoder_ffn_dim=cfg.d_ff,
                          decoder_ffn_dim=cfg.d_ff, dropout=cfg.dropout, attention_dropout=0.0,
                          activation_dropout=0.0, activation_function="relu", pad_token_id=PAD,
                          decoder_start_token_id=1, eos_token_id=2, max_position_embeddings=cfg.max_len,
                          scale_embedding=True, share_encoder_decoder_embeddings=True)
        self.model = MarianMTModel._from_config(mc, attn_implementation=self.ATTENTION)

    def forward(self, src, tgt):
        return self.model(input_ids=src, attention_mask=(src != PAD).long(),
                          decoder_input_ids=tgt).logits


class Aiayn(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.model = Transformer(cfg)

    def forward(self, src, tgt):
        return self.model(src, tgt)


def sync(device: str) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so a clock reads its end."""
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def matmul_peak(seconds: float = 2.0, n: int = 2048, dtype: torch.dtype = torch.float32,
                device: str = "cpu") -> float:
    """Matmul FLOP/s on this machine in `dtype`, now (best of repeated n x n products)."""
    n = 8192 if device.startswith("cuda") else n  # a GPU needs large products to reach its peak
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    sync(device)
    best, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        a @ b
        sync(device)
        best = max(best, 2 * n**3 / (time.perf_counter() - t0))
    return best


def model_flops(cfg: TransformerConfig, batch: int, t: int) -> float:
    """Training FLOPs per step (forward + backward = 3 x forward) of the encoder-decoder's matmuls."""
    d, f, n, v = cfg.d_model, cfg.d_ff, cfg.n_layers, cfg.vocab_size
    tokens = batch * t
    enc = n * (4 * d * d + 2 * d * f) * 2 * tokens + n * 2 * 2 * batch * t * t * d
    dec = n * (8 * d * d + 2 * d * f) * 2 * tokens + n * 2 * 2 * batch * (t * t + t * t) * d
    out = 2 * d * v * tokens
    return 3.0 * (enc + dec + out)


def make_batches(cfg: TransformerConfig, n: int, batch: int, t: int, seed: int = 0,
                 device: str = "cpu"):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src = torch.randint(4, cfg.vocab_size, (batch, t), generator=g)
        tgt = torch.randint(4, cfg.vocab_size, (batch, t + 1), generator=g)
        lens = torch.randint(t // 2, t + 1, (batch,), generator=g)  # realistic padding
        src[torch.arange(t)[None, :] >= lens[:, None]] = PAD
        out.append(tuple(x.to(device) for x in (src, tgt[:, :-1], tgt[:, 1:])))
    return out


def forward_loss(model: nn.Module, src, tgt_in, tgt_out, bf16: bool):
    """The step's forward: the model under autocast, then label-smoothed cross-entropy in fp32."""
    with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(src, tgt_in)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=PAD, label_smoothing=0.1)


# --compile-loss: the forward and the loss compiled as one graph (the 37k-way softmax fused)
compiled_forward_loss = torch.compile(forward_loss)


def time_training(model: nn.Module, batches, warmup: int, bf16: bool = False,
                  whole: bool = False) -> list[float]:
    """Step times; `whole`: the model's forward and the loss run as one compiled function."""
    device = str(batches[0][0].device)
    # On a GPU every system gets PyTorch's fused Adam (aiayn's trainer takes it there too).
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                           fused=device.startswith("cuda") or None)
    model.train()
    times = []
    for i, (src, tgt_in, tgt_out) in enumerate(batches):
        sync(device)
        t0 = time.perf_counter()
        loss = (compiled_forward_loss if whole else forward_loss)(model, src, tgt_in, tgt_out, bf16)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


class MarianEager(MarianMT):
    """HF Marian with its explicit matmul attention: under CPU bf16 autocast faster than its SDPA
    (the CPU's bf16 flash backward is slow), so the peer's best bf16 mode."""

    ATTENTION = "eager"


EAGER = "HF Marian (eager attention)"
BUILDERS = {"aiayn": Aiayn, "torch.nn.Transformer": TorchTransformerMT, "HF Marian": MarianMT,
            EAGER: MarianEager}


def _ddp_worker(rank: int, world: int, name: str, label: str, steps: int, warmup: int,
                batch: int, t: int, out: str) -> None:
    """One process of a data-parallel run: 1 thread, gloo, its share of the global batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    cfg = TransformerConfig(**CONFIGS[name], dropout=0.1, max_len=512)
    torch.manual_seed(0)
    model = DistributedDataParallel(BUILDERS[label](cfg))
    times = time_training(model, make_batches(cfg, steps + warmup, batch // world, t, seed=rank),
                          warmup)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


def time_ddp(name: str, label: str, world: int, steps: int, warmup: int, batch: int,
             t: int) -> list[float]:
    """Step times of `world` processes training `label` together (rank 0's clock)."""
    import torch.multiprocessing as mp

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(29500 + os.getpid() % 1000)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "times.json")
        mp.spawn(_ddp_worker, args=(world, name, label, steps, warmup, batch, t, out),
                 nprocs=world)
        with open(out) as f:
            return json.load(f)


def graph_breaks() -> int:
    """Graph breaks torch.compile has counted in this process so far."""
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values())


def run(name: str, steps: int, warmup: int, batch: int, t: int, rounds: int,
        compile_too: bool = False, processes: int = 1, bf16: bool = False,
        device: str = "cpu", systems: list[str] | None = None,
        compile_loss: bool = False) -> list[dict]:
    cfg = TransformerConfig(**CONFIGS[name], dropout=0.1, max_len=512)
    batches = make_batches(cfg, steps + warmup, batch, t, device=device)
    builders = {k: v for k, v in BUILDERS.items()
                if (bf16 or k != EAGER) and (systems is None or k in systems)}  # eager: bf16
    models = {}
    for label, build in builders.items():
        torch.manual_seed(0)
        models[label] = build(cfg).to(device)
        if compile_too:  # what train.compile=true does: the model compiled in place
            torch.manual_seed(0)
            models[f"{label} + compile"] = build(cfg).to(device)
            models[f"{label} + compile"].compile()
        if compile_loss:  # the model and the loss compiled as one function
            torch.manual_seed(0)
            models[f"{label} + compile with loss"] = build(cfg).to(device)
    ddp = {f"{label} ({processes} processes)": label for label in builders} if processes > 1 else {}
    half = {f"{label} + bf16": label for label in models} if bf16 else {}
    times: dict[str, list[float]] = {k: [] for k in [*models, *ddp, *half]}
    for _ in range(rounds):  # interleave rounds so drifts in machine load hit all models alike
        for label, model in models.items():
            times[label] += time_training(model, batches, warmup, whole="with loss" in label)
        for label, base in half.items():
            times[label] += time_training(models[base], batches, warmup, bf16=True,
                                          whole="with loss" in label)
        for label, base in ddp.items():
            times[label] += time_ddp(name, base, processes, steps, warmup, batch, t)
    peak = matmul_peak(device=device)
    peak_bf16 = matmul_peak(dtype=torch.bfloat16, device=device) if bf16 else None
    flops = model_flops(cfg, batch, t)
    rows = []
    for label, ts in times.items():
        step = statistics.median(ts)
        params = models[ddp.get(label, half.get(label, label))].parameters()
        top = peak_bf16 if label in half else peak
        rows.append(dict(config=name, model=label, step_s=step, tok_s=batch * t / step,
                         mfu=flops / step / top, peak=top, params=sum(p.numel() for p in params)))
    best_peer = max((r["tok_s"] for r in rows if not r["model"].startswith("aiayn")),
                    default=float("nan"))  # nan: --systems named no peer
    for r in rows:
        r["vs_best_peer"] = r["tok_s"] / best_peer
    if compile_too or compile_loss:
        print(f"torch.compile graph breaks so far: {graph_breaks()}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| config | model | params | step (s) | target tok/s | vs best peer | MFU |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['config']} | {r['model']} | {r['params'] / 1e6:.1f}M | {r['step_s']:.3f} | "
                     f"{r['tok_s']:,.0f} | {r['vs_best_peer']:.2f}x | {100 * r['mfu']:.0f}% |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    p.add_argument("--steps", type=int, default=8, help="timed steps per round")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--tokens", type=int, default=32, help="tokens per sentence (source and target)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--compile", action="store_true",
                   help="also every model under torch.compile (compiled during the warmup steps)")
    p.add_argument("--compile-loss", action="store_true",
                   help="also every model with its forward and the loss compiled as one function")
    p.add_argument("--bf16", action="store_true",
                   help="also every model under bf16 autocast (train.precision=bf16)")
    p.add_argument("--processes", type=int, default=1,
                   help="also every model as this many DDP processes of 1 thread (gloo)")
    p.add_argument("--systems", nargs="+", default=None, choices=list(BUILDERS),
                   help="train only these (default: aiayn and every peer)")
    p.add_argument("--device", default="cpu",
                   help="cpu (default) or cuda[:N]: where every model trains (fp32 matmuls in "
                        "full precision on a GPU too: no TF32)")
    args = p.parse_args()
    if args.device != "cpu" and args.processes > 1:
        p.error("--processes runs gloo processes on the CPU; on a GPU use --processes 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    for name in args.configs:
        rows += run(name, args.steps, args.warmup, args.batch, args.tokens, args.rounds,
                    args.compile, args.processes, args.bf16, args.device, args.systems,
                    args.compile_loss)
        print(table(rows), flush=True)
    for name in args.configs:
        mine = [r for r in rows if r["config"] == name]
        ours = max((r for r in mine if r["model"].startswith("aiayn")), key=lambda r: r["tok_s"])
        peers = [r for r in mine if not r["model"].startswith("aiayn")]
        if not peers:
            print(f"{name}: best mode: {ours['model']} {ours['tok_s']:,.0f} tok/s, "
                  f"MFU {100 * ours['mfu']:.0f}%")
            continue
        peer = max(peers, key=lambda r: r["tok_s"])
        print(f"{name}: best modes: {ours['model']} {ours['tok_s']:,.0f} tok/s vs {peer['model']} "
              f"{peer['tok_s']:,.0f} tok/s = {ours['tok_s'] / peer['tok_s']:.2f}x")
    where = (torch.cuda.get_device_name(args.device) if args.device.startswith("cuda")
             else f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    print(f"\ntorch {torch.__version__}, {where}; "
          f"fp32 matmul peak {rows[0]['peak'] / 1e9:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
