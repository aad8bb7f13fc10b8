"""Training at the speed of the GPU (issue 38): `aiayn train` beside the bare loop it could be.

Three systems, one run, one device, the same model size:

  aiayn train   the real path: the CLI on a real corpus (data.corpus=dates-numbers, generated),
                through the Trainer, its batch thread, the §5.1 token buckets and the loss;
  bare loop     the ceiling: the same Transformer and label-smoothed loss compiled together
                (torch.compile), random batches of one fixed shape holding as many target tokens
                as the real path's batches, fused Adam; nothing else (its loss covers every
                position, padding masked: one shape; aiayn's model projects the non-pad ones
                only, so on a CPU the real path may beat it);
  nn.Transformer  a plain torch.nn.Transformer loop (the peer every PyTorch user has), the same
                dimensions, F.cross_entropy with label smoothing, fused Adam, eager.

For each: target tokens/s (non-pad target tokens, what §5.4 normalises by), MFU (6 x parameters
x tokens/s against the matmul peak measured in the same run, in the training dtype), the first
update's time (compilation included, where compiled) and the device memory peak (GPU only).
The real path's clock: from the end of its `--warmup`-th update to the end of its last, with the
device synchronised at those two points only.

    python benchmarks/train_gpu.py                           # one GPU: the base config, bf16
    python benchmarks/train_gpu.py --config demo --steps 200 # the 0.9M-parameter demo
    python benchmarks/train_gpu.py --device cpu --quick      # a smoke run on the CPU (seconds)
    python benchmarks/train_gpu.py --profile out/profile.txt # where each system's host time goes

--profile records PROFILED updates after the warmup of each system with torch.profiler (host
and, on a GPU, device activity) and writes their tables (operators by host time, kernel launches
per update) to the file: the diagnosis of a host-bound update. The profiler slows what it
watches: the tokens/s of such a run are not for the record.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_throughput import TorchTransformerMT, matmul_peak, sync  # noqa: E402

from aiayn import Transformer  # noqa: E402
from aiayn.cli import main as aiayn_main  # noqa: E402
from aiayn.training.losses import smoothed_cross_entropy  # noqa: E402
from aiayn.training.trainer import Trainer  # noqa: E402

PAD = 0
PROFILED = 5  # updates recorded by --profile, right after the warmup


class Profile:
    """--profile: torch.profiler over updates warmup+1 .. warmup+PROFILED of one system, its
    tables appended to the file (nothing, without --profile)."""

    def __init__(self, args, name: str):
        self.args, self.name, self.prof = args, name, None

    def after(self, done: int) -> None:
        """Called after each update, with the number of updates done."""
        if not self.args.profile:
            return
        if done == self.args.warmup:
            from torch.profiler import ProfilerActivity, profile
            gpu = self.args.device.startswith("cuda")
            self.prof = profile(activities=[ProfilerActivity.CPU,
                                            *([ProfilerActivity.CUDA] if gpu else [])])
            self.prof.__enter__()
            self.t0 = time.perf_counter()
        elif done == self.args.warmup + PROFILED and self.prof is not None:
            sync(self.args.device)
            wall = (time.perf_counter() - self.t0) / PROFILED
            self.prof.__exit__(None, None, None)
            events = self.prof.key_averages()
            launches = sum(e.count for e in events if "LaunchKernel" in e.key) / PROFILED
            threads: dict[int, float] = {}  # host time in top-level operators, per thread
            for e in self.prof.events():
                if e.cpu_parent is None and e.device_type.name == "CPU":
                    threads[e.thread] = threads.get(e.thread, 0.0) + e.cpu_time_total / 1e3
            busy = ", ".join(f"{ms / PROFILED:.1f} ms" for ms in sorted(threads.values())[::-1])
            with open(self.args.profile, "a", encoding="utf-8") as f:
                f.write(f"\n== {self.name}: {PROFILED} updates, {wall * 1000:.1f} ms each "
                        f"(profiled), {launches:.0f} kernel launches per update; host time in "
                        f"top-level operators per update, by thread: {busy}\n")
                f.write(events.table(sort_by="self_cpu_time_total", row_limit=35,
                                     max_name_column_width=60))
            self.prof = None


def real_path(args, folder: str) -> dict:
    """`aiayn train` in this process, its updates timed from inside (Trainer._update wrapped)."""
    marks: list[tuple[float, int]] = []
    seen: dict = {}
    update = Trainer._update
    profiled = Profile(args, "aiayn train")

    def timed(self):
        if not marks:
            sync(args.device)
            seen.update(model=self.model, start=time.perf_counter())
        result = update(self)
        step = len(marks) + 1
        if step in (1, args.warmup, args.steps):  # the only waits added to the loop
            sync(args.device)
        marks.append((time.perf_counter(), result[1]))
        profiled.after(len(marks))
        return result

    overrides = [f"train.device={args.device}", f"train.precision={args.precision}",
                 f"train.max_steps={args.steps}", f"train.log_every={args.steps}",
                 "train.eval_every=0", "train.save_every=0", "train.stop_when=null",
                 "train.max_minutes=null", "train.progress=false", "train.tensorboard=false",
                 f"train.compile={str(args.compile).lower()}", *args.set]
    if args.config != "demo":
        overrides += ["data.corpus=dates-numbers", "data.train_src=null", "data.train_tgt=null",
                      f"data.vocab_size={args.vocab}"]
    Trainer._update = timed
    reset_memory(args.device)
    try:
        aiayn_main(["train", args.config, "--out", folder, *overrides])
    finally:
        Trainer._update = update
    if len(marks) < args.steps:
        raise SystemExit(f"aiayn train stopped after {len(marks)} of {args.steps} updates")
    tokens = sum(n for _, n in marks[args.warmup:])
    seconds = marks[-1][0] - marks[args.warmup - 1][0]
    model = seen["model"]
    return {"system": "aiayn train", "tokens_per_s": tokens / seconds,
            "first_update_s": marks[0][0] - seen["start"], "params": n_params(model),
            "tokens_per_update": tokens / (args.steps - args.warmup), "config": model.config,
            "memory_gib": memory_peak(args.device)}


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def reset_memory(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)


def memory_peak(device: str) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.startswith("cuda") else None


def random_batches(cfg, n: int, batch: int, t: int, device: str, seed: int = 0):
    """`n` batches (B, T) of random ids, the targets' tails padded (lengths T/2..T)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src = torch.randint(4, cfg.vocab_size, (batch, t), generator=g)
        tgt = torch.randint(4, cfg.vocab_size, (batch, t + 1), generator=g)
        lens = torch.randint(t // 2, t + 1, (batch,), generator=g)
        src[torch.arange(t)[None, :] >= lens[:, None]] = PAD
        tgt[:, 1:][torch.arange(t)[None, :] >= lens[:, None]] = PAD
        out.append(tuple(x.to(device) for x in (src, tgt[:, :-1], tgt[:, 1:])))
    return out


def aiayn_loss(model, src, tgt_in, tgt_out):
    """The trainer's loss on every position, padding masked: one graph, one shape."""
    loss, _, _ = smoothed_cross_entropy(model(src, tgt_in), tgt_out, 0.1)
    return loss.masked_fill(tgt_out == PAD, 0.0).sum()


def torch_loss(model, src, tgt_in, tgt_out):
    logits = model(src, tgt_in)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=PAD, label_smoothing=0.1, reduction="sum")


def loop(name: str, model, loss_fn, batches, tokens: int, args, compiled: bool) -> dict:
    """forward + loss, backward, Adam; the first step timed alone (compilation), the steps after
    `warmup` by the clock, the device synchronised at its two ends. `tokens`: the target tokens
    of the timed steps, counted on the host."""
    device = args.device
    model.to(device).train()
    step_fn = torch.compile(loss_fn) if compiled else loss_fn
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                           **({"fused": True} if device.startswith("cuda") else {"foreach": True}))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    reset_memory(device)
    profiled = Profile(args, name)
    t0 = start = time.perf_counter()
    first = 0.0
    for i, (src, tgt_in, tgt_out) in enumerate(batches):
        with torch.autocast(torch.device(device).type, dtype=dtype, enabled=dtype is not None):
            loss = step_fn(model, src, tgt_in, tgt_out)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i == 0:
            sync(device)
            first = time.perf_counter() - t0
        if i == args.warmup - 1:
            sync(device)
            start = time.perf_counter()
        profiled.after(i + 1)
    sync(device)
    seconds = time.perf_counter() - start
    return {"system": name, "tokens_per_s": tokens / seconds, "first_update_s": first,
            "params": n_params(model), "memory_gib": memory_peak(device)}


def peers(args, real: dict) -> list[dict]:
    """The bare compiled loop and nn.Transformer on random batches holding about as many target
    tokens per step as the real path's updates."""
    cfg = real["config"]
    t = args.tokens
    batch = max(1, round(real["tokens_per_update"] / (0.75 * t)))  # lengths T/2..T: ~0.75 T
    cpu_batches = random_batches(cfg, args.steps, batch, t, "cpu")
    batches = [tuple(x.to(args.device) for x in b) for b in cpu_batches]
    counted = sum(int((b[2] != PAD).sum()) for b in cpu_batches[args.warmup:])  # on the host
    torch.manual_seed(0)
    rows = [loop("bare loop", Transformer(cfg), aiayn_loss, batches, counted, args, args.compile)]
    torch.manual_seed(0)
    rows.append(loop("nn.Transformer", TorchTransformerMT(cfg), torch_loss, batches, counted, args,
                     False))
    for row in rows:
        row["shape"] = f"{batch} x {t}"
    return rows


def report(rows: list[dict], peak: float) -> str:
    lines = ["| system | target tokens/s | MFU | first update (s) | memory peak (GiB) |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        r["mfu"] = 6 * r["params"] * r["tokens_per_s"] / peak
        mem = "n/a" if r["memory_gib"] is None else f"{r['memory_gib']:.2f}"
        lines.append(f"| {r['system']} | {r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% | "
                     f"{r['first_update_s']:.1f} | {mem} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--config", default=None, help="the recipe aiayn trains (default: "
                    "transformer-base; --quick: demo)")
    ap.add_argument("--precision", default=None, help="bf16 on a GPU, fp32 on the CPU")
    ap.add_argument("--steps", type=int, default=None, help="updates per system (default 60)")
    ap.add_argument("--warmup", type=int, default=None, help="updates not timed (default 10)")
    ap.add_argument("--vocab", type=int, default=8000, help="data.vocab_size of the real path")
    ap.add_argument("--tokens", type=int, default=32, help="T of the peers' (B, T) batches")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                    help="torch.compile (default: on a GPU, not --quick)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads and "
                    "train.threads; on a shared machine more threads wait for busy cores)")
    ap.add_argument("--quick", action="store_true", help="a few updates of the demo: a smoke run")
    ap.add_argument("--set", nargs="*", default=[], help="more aiayn train overrides")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--profile", default=None, help="append torch.profiler tables of each "
                    "system's updates after the warmup to this file (slows them)")
    args = ap.parse_args(argv)
    gpu = args.device.startswith("cuda")
    args.config = args.config or ("demo" if args.quick else "transformer-base")
    args.precision = args.precision or ("bf16" if gpu else "fp32")
    args.steps = args.steps or (6 if args.quick else 60)
    args.warmup = args.warmup or (2 if args.quick else 10)
    args.compile = (gpu and not args.quick) if args.compile is None else args.compile
    if args.profile:  # the profiled updates come after the warmup
        args.steps = max(args.steps, args.warmup + PROFILED)
    if args.quick:
        args.tokens = min(args.tokens, 16)
    torch.set_num_threads(args.threads)
    args.set = [f"train.threads={args.threads}", *args.set]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision, torch.float32)
    peak = matmul_peak(0.5 if args.quick else 2.0, 512 if args.quick else 2048, dtype, args.device)
    name = torch.cuda.get_device_name(args.device) if gpu else "CPU"
    print(f"{name} | torch {torch.__version__} | {args.precision} matmul peak "
          f"{peak / 1e12:.2f} TFLOP/s | {args.config}, {args.steps} updates ({args.warmup} "
          f"untimed) | compile {args.compile} | {args.threads} CPU thread(s)", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        real = real_path(args, folder)
    rows = [real, *peers(args, real)]
    print(report(rows, peak))
    ratio = real["tokens_per_s"] / rows[1]["tokens_per_s"]
    print(f"aiayn train / bare loop: {ratio:.2f}x | aiayn train {real['tokens_per_update']:,.0f} "
          f"target tokens per update, the peers {rows[1]['shape']} (B x T)")
    if args.json:
        keep = [{k: v for k, v in r.items() if k != "config"} for r in rows]
        Path(args.json).write_text(json.dumps({"peak_flops": peak, "rows": keep}, indent=1))
    return rows


if __name__ == "__main__":
    main()
