"""Data-parallel training over the processes that `torchrun` starts (PyTorch's distributed engine).

    torchrun --nproc_per_node=N -m aiayn train CONFIG ...

starts N copies of the command; each finds RANK, WORLD_SIZE and LOCAL_RANK in its environment and
joins one process group: NCCL on CUDA (one GPU per process, cuda:LOCAL_RANK), gloo on the CPU.
Multi-node runs use torchrun's own flags (--nnodes, --node-rank, --rdzv-endpoint ...); the model
folder must then be on a filesystem that every node sees.

How the work is shared (the paper trained on 8 GPUs, §5.2, summing their batches into one step):
every process walks the same deterministic BatchStream and takes every N-th batch, rank r the r-th
of each group of N. One update of N processes with accum_steps=a therefore sums exactly the batches
one process with accum_steps=N*a sums; DistributedDataParallel sums the gradients across
processes and the Trainer divides them by the global number of target tokens (§5.4: per-token loss),
so both train the same model, up to the order of float additions. Only rank 0 writes the folder
and prints; decisions that end or save a run (a time budget, Ctrl-C, SIGTERM) are taken together,
so no process waits forever for another.
"""

from __future__ import annotations

import atexit
import datetime
import hashlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from aiayn.devices import launched, resolve_device
from aiayn.errors import UserError

# How long a process waits for the others at a collective (e.g. while rank 0 evaluates or saves)
# before giving up; torchrun stops the whole job when one process fails, so this is a last resort.
TIMEOUT = datetime.timedelta(minutes=30)
# Under NCCL, a gloo group over the same processes for the host's own numbers (units per update,
# the clock, stop decisions): summing those through NCCL would copy them to the GPU and read the
# result back, a wait for every kernel queued before it, once per update. None under gloo (its
# default group is already on the host) and before setup().
_HOST_GROUP: list[Any] = [None]


@dataclass(frozen=True)
class World:
    """This process's place among the training processes (rank 0 of 1 without torchrun)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.size > 1


def world() -> World:
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    return World()


def check_gpus_per_node(processes: int, device: str) -> None:
    """One GPU per process (NCCL refuses two processes on one GPU): more processes on this node
    than it has CUDA devices is a one-line error, not CUDA's 'invalid device ordinal'."""
    have = torch.cuda.device_count()
    if processes > have:
        keep = (f" (with train.accum_steps x{processes // have} for the same batch per update)"
                if processes % have == 0 else "")
        raise UserError(f"train.device={device}: torchrun started {processes} processes on this "
                        f"machine but it has {have} CUDA device(s), one per process: use "
                        f"--nproc_per_node={have}{keep}, or train.device=cpu")


def setup(device: str = "auto") -> World:
    """Join the process group torchrun described in the environment (once per process; later
    calls return the same World). Processes other than rank 0 stop printing to stdout."""
    if not launched() or (dist.is_available() and dist.is_initialized()):
        return world()
    if not dist.is_available():
        raise UserError("WORLD_SIZE > 1 but this torch build has no distributed support")
    name = resolve_device(device)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if name.startswith("cuda"):
        check_gpus_per_node(int(os.environ.get("LOCAL_WORLD_SIZE", local_rank + 1)), device)
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if name.startswith("cuda") else "gloo", timeout=TIMEOUT)
    if name.startswith("cuda"):  # every process makes it, in the same order (new_group's rule)
        _HOST_GROUP[0] = dist.new_group(backend="gloo", timeout=TIMEOUT)
    atexit.register(finish)
    here = world()
    if not here.is_main:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the life of the process)
    return here


def process_device(device: str) -> str:
    """The device of this process: under torchrun on CUDA, the GPU of its local rank."""
    name = resolve_device(device)
    here = world()
    if here.active and name == "cuda":
        return f"cuda:{here.local_rank}"
    return name


def silent(*_: Any, **__: Any) -> None:
    """A `say` for processes other than rank 0."""


def _collective_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) \
        if dist.get_backend() == "nccl" else torch.device("cpu")


def all_sum(values: Sequence[float]) -> list[float]:
    """The element-wise sum of host numbers `values` over all processes (float64; the values
    themselves on one process). Under NCCL it goes through the host group: no GPU wait."""
    if not world().active:
        return [float(v) for v in values]
    group = _HOST_GROUP[0]
    device = torch.device("cpu") if group is not None else _collective_device()
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    dist.all_reduce(t, group=group)
    return t.tolist()


def all_sum_tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    """The element-wise sum over all processes of `values` (0-dim tensors on this process's
    device, or numbers), as 0-dim float64 tensors on that device, not read: NCCL queues the sum
    on the GPU's stream and the host goes on (the trainer reads them at log time)."""
    if not values:
        return []
    device = next((v.device for v in values if isinstance(v, torch.Tensor)),
                  _collective_device())
    t = torch.stack([v.detach().to(device, torch.float64) if isinstance(v, torch.Tensor)
                     else torch.tensor(float(v), dtype=torch.float64, device=device)
                     for v in values])
    if world().active:
        dist.all_reduce(t)
    return list(t.unbind())


def gather(obj: Any) -> list[Any]:
    """Every process's `obj`, in rank order (Python objects sent between this job's own
    processes; nothing read from a file)."""
    here = world()
    if not here.active:
        return [obj]
    out: list[Any] = [None] * here.size
    dist.all_gather_object(out, obj)
    return out


def check_same(text: str, what: str) -> None:
    """A UserError when `text` differs between processes (e.g. each read different data)."""
    here = world()
    if not here.active:
        return
    digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")
    t = torch.tensor([digest], dtype=torch.int64, device=_collective_device())
    everyone = [torch.zeros_like(t) for _ in range(here.size)]
    dist.all_gather(everyone, t)
    for rank, other in enumerate(everyone):
        if int(other) != digest:
            raise UserError(f"{what} differs between rank {here.rank} and rank {rank}: every "
                            "process must see the same data and settings")


class LossModule(nn.Module):
    """A model with its loss function as one module, so that the whole loss (which may call the
    model's methods, e.g. classify() or its masked-LM head) runs inside DDP's forward."""

    def __init__(self, model: nn.Module, loss_fn: Callable[[nn.Module, Any], Any]):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, batch: Any) -> Any:
        return self.loss_fn(self.model, batch)


def wrap(step: LossModule, device: torch.device, unused_parameters: bool = False) -> nn.Module:
    """DistributedDataParallel over a LossModule: calling it with a batch gives the loss
    function's (loss, units, sums), and its backward sums the gradients across processes.

    The buffers are constants (sinusoids, masks), so they are not re-synchronised every step.
    DDP's buckets (25 MB) are all-reduced while the backward goes on; the gradients are views of
    them (gradient_as_bucket_view: no copy in or out, no second copy in memory).
    `unused_parameters`: the loss leaves some parameters without a gradient (e.g. the masked-LM
    head while a classifier is fine-tuned); DDP then looks for them after every forward."""
    ddp = nn.parallel.DistributedDataParallel
    # torch 2.13 renamed broadcast_buffers (kept for older releases)
    no_sync = "forward_sync_buffers" if "forward_sync_buffers" in \
        inspect.signature(ddp.__init__).parameters else "broadcast_buffers"
    ids = [device.index] if device.type == "cuda" else None
    return ddp(step, device_ids=ids, find_unused_parameters=unused_parameters,
               gradient_as_bucket_view=True, **{no_sync: False})


def finish() -> None:
    """Leave the process group (at the end of a command run under torchrun)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()  # the host group too
    _HOST_GROUP[0] = None


__all__ = ["LossModule", "World", "all_sum", "all_sum_tensors", "check_gpus_per_node", "check_same", "finish", "gather", "launched",
           "process_device", "setup", "silent", "world", "wrap"]
