"""Batches decoded by several CPU processes at once (data-parallel inference on one machine).

A decoding step multiplies small matrices (a few dozen rows against d_model x d_model, and the
output projection): two threads share one such product poorly, while two processes of one thread
each decode whole batches side by side and never meet. Measured on the project's 2-core machine
(gettext test set, greedy and beam 4, batch 64): 2 processes x 1 thread decoded 1.2-1.6x as many
sentences per second as 1 process x 2 threads (benchmarks/RESULTS.md, "Decoding in worker
processes").

The workers are forked from the caller, so they share its model without copying or pickling it,
and each takes every N-th batch: length-sorted batches then spread evenly. Each batch is decoded
exactly as it would be in one process, so the outputs are the same (tested).
Fork is CPU-only here: a CUDA context cannot cross a fork, and a GPU decodes a batch in parallel
anyway.

Each worker runs one thread (see map_batches). workers="auto" (the CLI's default): on a Linux
CPU, one process per CPU thread torch would use (at most one per batch); elsewhere one process.
It is the layout CTranslate2 documents for CPU throughput (docs/parallel.md:
`inter_threads=4, intra_threads=1`, "4 workers each using 1 intra-op thread"), with processes
instead of threads because Python's steps hold the GIL.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from aiayn.errors import ConfigError, UserError

B = TypeVar("B")


def resolve_workers(workers: int | str, device: torch.device | str) -> int:
    """workers as given (checked), or for "auto" the number of decoding processes to use: the
    CPU threads torch would use on a Linux CPU, 1 on a GPU or elsewhere. map_batches uses no
    more processes than there are batches."""
    if workers == "auto":
        linux_cpu = torch.device(device).type == "cpu" and sys.platform.startswith("linux")
        fork = "fork" in multiprocessing.get_all_start_methods()
        return max(1, torch.get_num_threads()) if linux_cpu and fork else 1
    check_workers(workers, device)
    return workers


def check_workers(workers: int, device: torch.device | str) -> None:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers={workers!r}: must be a positive integer or 'auto'")
    if workers > 1 and torch.device(device).type != "cpu":
        raise ConfigError(f"workers={workers}: decoding in worker processes is for the CPU; "
                          f"on {torch.device(device).type} use one process (workers=1)")
    if workers > 1 and "fork" not in multiprocessing.get_all_start_methods():
        raise ConfigError(f"workers={workers}: this platform cannot fork processes; use workers=1")


def map_batches(fn: Callable[[B], Any], batches: Sequence[B], workers: int = 1) -> list[Any]:
    """[fn(b) for b in batches], in order; with workers > 1 in that many forked processes (batch
    i in process i % workers), one CPU thread each.

    One thread, because a forked child cannot run a parallel region of the OpenMP runtime the
    parent has already used (GNU libgomp's pool does not survive fork: the child hangs; tested),
    the reason PyTorch's DataLoader workers run one thread too."""
    workers = min(workers, len(batches))
    if workers <= 1:
        return [fn(b) for b in batches]
    ctx = multiprocessing.get_context("fork")
    procs, conns = [], []
    try:
        for w in range(workers):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_work, args=(fn, batches, w, workers, send),
                               daemon=True, name=f"aiayn-decode-{w}")
            proc.start()
            send.close()  # the child's end: EOF here once the child is gone
            procs.append(proc)
            conns.append(recv)
        results: list[Any] = [None] * len(batches)
        for w, conn in enumerate(conns):
            try:
                status, payload = conn.recv()
            except EOFError:
                procs[w].join(timeout=5)
                raise UserError(f"decoding worker {w} died (exit code {procs[w].exitcode}); "
                                "try workers=1") from None
            if status != "ok":
                raise UserError(f"decoding worker {w} failed: {payload}")
            for i, out in zip(range(w, len(batches), workers), payload, strict=True):
                results[i] = out
        return results
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()


def _work(fn, batches, w: int, n: int, conn) -> None:
    """One worker: its share of the batches, sent back in one message (or the error's text)."""
    try:
        torch.set_num_threads(1)  # see map_batches
        conn.send(("ok", [fn(batches[i]) for i in range(w, len(batches), n)]))
    except BaseException as e:  # KeyboardInterrupt too: the parent reports and cleans up
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()
        os._exit(0)  # no atexit handlers or finalizers of the parent's state in a fork


__all__ = ["check_workers", "map_batches", "resolve_workers"]
