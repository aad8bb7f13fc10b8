"""One training loop for every model family.

The family supplies a model, a resumable BatchStream, and a loss function

    loss_fn(model, batch) -> (loss_sum, n_tokens, sums)

where `loss_sum` is a scalar tensor summed over the batch's `n_tokens` units (non-pad target tokens
for translation, examples for a classifier) and `sums` holds other per-unit sums to report
(e.g. {"nll": ..., "correct": ...}). One update sums the losses of `accum_steps` batches and divides
the gradients by their total unit count: the loss is normalised per token (§5.4), whatever the
batching. An optional `evaluate(model) -> dict` runs every `eval_every` steps (in eval mode, under
no_grad, with the RNG state restored afterwards so that evaluating never changes training).

Everything needed to continue exactly is saved in the model folder (see checkpoint.py); Ctrl-C
or SIGTERM saves the state of the last completed update and returns with `interrupted=True`.

Under torchrun the same loop runs data-parallel (see distributed.py): each process takes its share
of every update's batches, DistributedDataParallel sums the gradients, the token count is summed
across processes, and rank 0 alone evaluates, logs and writes the folder.
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from aiayn.config import FINAL_CHECKPOINTS, TrainConfig
from aiayn.devices import resolve_precision
from aiayn.errors import UserError, describe_os_error
from aiayn.folder import WEIGHTS_FILE, atomic_write, checkpoint_path, load_weights, save_model
from aiayn.training import distributed
from aiayn.training.averaging import WeightAverage
from aiayn.training.checkpoint import (
    load_train_state,
    mark_started,
    prune_checkpoints,
    rng_state,
    save_train_state,
    set_rng_state,
)
from aiayn.training.metrics import MetricsLog
from aiayn.training.schedule import learning_rate, make_optimizer, set_lr
from aiayn.training.stream import BatchStream

LossFn = Callable[[nn.Module, Any], tuple[Tensor, int, dict[str, Any]]]


@dataclass
class TrainResult:
    step: int
    tokens: int
    seconds: float  # training wall time, resumed runs included
    interrupted: bool = False
    stopped_by: str = ""  # "max_steps", "max_minutes", "interrupt" (Ctrl-C) or "sigterm"
    metrics: dict[str, Any] = field(default_factory=dict)  # the last logged values

    @property
    def exit_code(self) -> int:
        """What a command should exit with: 0, or 128 + the signal that stopped it (130, 143)."""
        if not self.interrupted:
            return 0
        return 128 + (signal.SIGTERM if self.stopped_by == "sigterm" else signal.SIGINT)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, model: nn.Module, config: TrainConfig, batches: BatchStream, loss_fn: LossFn,
                 out_dir: str | Path, *, family: str, meta: dict[str, Any] | None = None,
                 evaluate: Callable[[nn.Module], dict[str, Any]] | None = None):
        self.model, self.cfg, self.batches, self.loss_fn = model, config, batches, loss_fn
        self.out = Path(out_dir)
        self.family, self.meta, self.evaluate = family, dict(meta or {}), evaluate
        self.d_model = getattr(getattr(model, "config", None), "d_model", 512)
        self.world = distributed.setup(config.device)
        self.device = torch.device(distributed.process_device(config.device))
        self.optimizer = make_optimizer(model, config, self.device)
        # Mixed precision: autocast dtype (None = fp32) and, for fp16, a loss scaler.
        self.precision, why = resolve_precision(config.precision, str(self.device))
        self._precision_note = f"precision {self.precision} ({why})" if why != "set" else ""
        self.autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.step = 0
        self.tokens = 0
        self.elapsed = 0.0  # seconds of training before this run (resume)
        self._boundary: dict[str, Any] = {}  # the state after the last completed update
        self._in_update = False
        self._pending_interrupt = False
        self._signal: int | None = None  # the signal that interrupted the run
        self._last_eval = -1
        self._saved_step: int | None = None  # the step of the last complete save
        # What each batch runs through: model + loss as one module (LossModule), under DDP with
        # torchrun.
        self.net: nn.Module = distributed.LossModule(model, loss_fn)
        self._agreed_elapsed = 0.0  # rank 0's clock at the last update (under torchrun)
        self.average: WeightAverage | None = None  # the weights' running average (fit() makes it)

    # -- state -----------------------------------------------------------------------------

    def _mark_boundary(self, elapsed: float) -> None:
        self._boundary = {"step": self.step, "tokens": self.tokens, "elapsed": elapsed,
                          "data": self.batches.state_dict(), "rng": rng_state()}

    def save(self) -> Path:
        """Write the folder: config + weights, numbered weights, then the train state naming them.

        A write that fails (disk full, read-only filesystem) is a UserError naming the step and
        the last saved one, which every file is written atomically to keep intact.
        Under torchrun every process calls it (their RNG states are saved too); rank 0 writes."""
        ranks_rng = distributed.gather(self._boundary["rng"]) if self.world.active else []
        if not self.world.is_main:
            self._saved_step = self._boundary["step"]
            return checkpoint_path(self.out, self._boundary["step"])
        try:
            ckpt = self._save(ranks_rng[1:])
        except Exception as e:
            reason = describe_os_error(e)
            if reason is None:
                raise
            kept = (f"the train state of step {self._saved_step} is intact"
                    if self._saved_step is not None else "nothing had been saved before")
            raise UserError(f"could not save step {self._boundary['step']} in {self.out}: "
                            f"{reason}; {kept}") from None
        self._saved_step = self._boundary["step"]
        return ckpt

    def _save(self, other_ranks_rng: list[dict[str, Any]]) -> Path:
        b = self._boundary
        # config.json + model.safetensors: the weights users get (the running average, if on)
        save_model(self.out, self.family, self._shipped(), self.meta)
        ckpt = checkpoint_path(self.out, b["step"])
        data = (self.out / WEIGHTS_FILE).read_bytes()
        atomic_write(ckpt, lambda tmp: tmp.write_bytes(data))
        state = {"version": 1, "step": b["step"], "tokens": b["tokens"], "elapsed": b["elapsed"],
                 "data": b["data"], "rng": b["rng"], "optimizer": self.optimizer.state_dict(),
                 "weights": str(ckpt.relative_to(self.out)), "train_config": self.cfg.to_dict(),
                 "scaler": self.scaler.state_dict(),
                 "world": {"size": self.world.size, "accum_steps": self.cfg.accum_steps}}
        if self.average is not None:  # the numbered file holds the average: these continue
            state["raw_weights"] = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        if other_ranks_rng:
            state["rng_ranks"] = other_ranks_rng  # ranks 1.. (rank 0's is "rng")
        save_train_state(self.out, state)
        prune_checkpoints(self.out, self.cfg.keep_last_n, protect=ckpt)
        return ckpt

    def _restore(self) -> dict[str, Any]:
        state = load_train_state(self.out)
        if "raw_weights" in state:  # the run averaged: the numbered file holds the average
            self.model.load_state_dict(state["raw_weights"])
        else:
            load_weights(self.model, self.out / state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.batches.load_state_dict(state["data"])
        self.step, self.tokens, self.elapsed = state["step"], state["tokens"], state["elapsed"]
        self._saved_step = self.step
        self._restore_rng(state)
        return state

    def _restore_rng(self, state: dict[str, Any]) -> None:
        """Each process's RNG state as saved. A run resumed with another number of processes
        must keep the batches per update (processes x accum_steps); its ranks other than 0 then
        draw new dropout masks."""
        before = state.get("world") or {"size": 1, "accum_steps": state["train_config"].get(
            "accum_steps", 1)}
        size, accum = int(before["size"]), int(before["accum_steps"])
        if size != self.world.size:
            per_update, now = size * accum, self.world.size * self.cfg.accum_steps
            if per_update != now:
                fit = (f"train.accum_steps={per_update // self.world.size}"
                       if per_update % self.world.size == 0 else
                       f"a number of processes that divides {per_update}")
                raise UserError(f"--resume: the run in {self.out} summed {per_update} batches per "
                                f"update ({size} process(es) x accum_steps {accum}); this one "
                                f"would sum {now} ({self.world.size} x {self.cfg.accum_steps}): "
                                f"use {fit}")
        if self.world.rank == 0:
            set_rng_state(state["rng"])
        elif size == self.world.size and len(state.get("rng_ranks", [])) >= self.world.rank:
            set_rng_state(state["rng_ranks"][self.world.rank - 1])
        else:
            seed_everything(self.cfg.seed + self.world.rank + 1_000_003 * self.step)

    # -- the loop ----------------------------------------------------------------------------

    def fit(self, resume: bool = False) -> TrainResult:
        cfg = self.cfg
        threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.use_deterministic_algorithms(cfg.deterministic)
        self.model.to(self.device)
        seed_everything(cfg.seed + self.world.rank)  # each process its own dropout masks
        state = self._restore() if resume else None
        if not resume and not self.out.is_dir() and self.world.is_main:
            mark_started(self.out)
        if cfg.average_width:
            self.average = WeightAverage(self.model, cfg.average_width)
            if state is not None and "raw_weights" in state:  # the average so far
                load_weights(self.average.model, self.out / state["weights"])
        log = MetricsLog(self.out, cfg.metrics_format, cfg.tensorboard,
                         resume_step=self.step if resume else None) \
            if self.world.is_main else _NoLog()
        if cfg.compile:  # in place: every call of the model runs compiled (state_dict unchanged)
            self.model.compile()
        if self.world.active:
            self.net = distributed.wrap(self.net, self.device, self._leaves_parameters_unused())
        self._mark_boundary(self.elapsed)
        previous = self._install_signal_handlers()
        try:
            result = self._loop(log)
            if self.average is not None:  # the model in memory = the one in the folder
                self.average.copy_to_model()
            if self.world.active:  # the folder is complete when any process returns
                torch.distributed.barrier()
            return result
        finally:
            log.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            torch.set_num_threads(threads)
            torch.use_deterministic_algorithms(deterministic)

    def _loop(self, log: MetricsLog) -> TrainResult:
        cfg = self.cfg
        start = time.monotonic() - self.elapsed
        # On a terminal a live bar; in a log file (not a TTY) plain lines instead of one long
        # line of carriage returns. Under a time budget the bar's total is the steps the budget
        # allows at this run's pace (re-estimated at every step), when fewer than max_steps.
        self._tty = sys.stderr.isatty()
        bar = tqdm(total=None if cfg.max_minutes else cfg.max_steps, initial=self.step,
                   disable=not (cfg.progress and self._tty and self.world.is_main),
                   dynamic_ncols=True, unit="step",
                   leave=False, mininterval=0.5)
        self._start, self._first_step = start, self.step
        if self._precision_note and self.precision != "fp32":
            self._say(self._precision_note)
        window = {"loss": 0.0, "tokens": 0, "sums": {}, "t": time.monotonic()}
        timed_saves = self._final_save_times()
        last: dict[str, Any] = {}
        stopped_by = "max_steps"
        try:
            while self.step < cfg.max_steps:
                if self._out_of_time(start):
                    stopped_by = "max_minutes"
                    break
                loss_sum, n_tok, sums = self._update()
                elapsed = self._agreed_elapsed if self.world.active else time.monotonic() - start
                self._mark_boundary(elapsed)
                window["loss"] += loss_sum
                window["tokens"] += n_tok
                for k, v in sums.items():
                    window["sums"][k] = window["sums"].get(k, 0.0) + v
                if cfg.max_minutes is not None:
                    bar.total = self._expected_steps()
                bar.update(1)
                if self.step % cfg.log_every == 0:
                    last = self._log_train(log, bar, window)
                if cfg.eval_every and self.step % cfg.eval_every == 0:
                    last.update(self._evaluate(log))
                due = bool(timed_saves) and elapsed >= timed_saves[0]
                while timed_saves and elapsed >= timed_saves[0]:
                    timed_saves.pop(0)
                if due or (cfg.save_every and self.step % cfg.save_every == 0):
                    self.save()
            if self._last_eval != self.step:
                last.update(self._evaluate(log))
            self.save()
        except KeyboardInterrupt:
            bar.close()
            self.save()  # the state of the last completed update
            b = self._boundary
            why = "sigterm" if self._signal == signal.SIGTERM else "interrupt"
            return TrainResult(b["step"], b["tokens"], b["elapsed"], True, why, last)
        bar.close()
        b = self._boundary
        return TrainResult(self.step, self.tokens, b["elapsed"], False, stopped_by, last)

    def _leaves_parameters_unused(self) -> bool:
        """Whether the loss leaves some parameter without a gradient on any process: one
        forward/backward of the next batch, with the stream and the RNG put back afterwards."""
        position, saved = self.batches.state_dict(), rng_state()
        self.model.train()
        loss, _, _ = self._forward(self._to_device(next(self.batches)))  # self.net: not DDP yet
        loss.backward()
        unused = any(p.requires_grad and p.grad is None for p in self.model.parameters())
        self.model.zero_grad(set_to_none=True)
        self.batches.load_state_dict(position)
        set_rng_state(saved)
        return bool(distributed.all_sum([unused])[0])

    def _out_of_time(self, start: float) -> bool:
        """Whether the time budget is spent (rank 0's clock, under torchrun). Under torchrun a
        Ctrl-C or SIGTERM that reached any process is acted on here, by all of them at once."""
        over = self.cfg.max_minutes is not None and \
            time.monotonic() - start >= self.cfg.max_minutes * 60
        if not self.world.active:
            return over
        sig = self._signal or 0
        over_main, sigterm, sigint = distributed.all_sum(
            [over and self.world.is_main, sig == signal.SIGTERM, sig == signal.SIGINT])
        if sigterm or sigint:
            self._signal = signal.SIGTERM if sigterm else signal.SIGINT
            raise KeyboardInterrupt
        return bool(over_main)

    def _next_batch(self) -> Any:
        """This process's next batch: every world-size-th of the shared stream."""
        if not self.world.active:
            return next(self.batches)
        batch = None
        for rank in range(self.world.size):
            if rank == self.world.rank:
                batch = next(self.batches)
            else:
                self.batches.skip()
        return batch

    def _forward(self, batch: Any) -> tuple[Tensor, int, dict[str, Any]]:
        """The loss function's (loss, units, sums) of a batch, under the training precision."""
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None):
            return self.net(batch)

    def _to_device(self, batch: Any) -> Any:
        """A batch (a Batch, a tensor, or a tuple of tensors) on the training device; to a GPU
        through page-locked memory, so the copy does not stall the host."""
        if isinstance(batch, (tuple, list)):
            return type(batch)(self._to_device(b) for b in batch)
        if not hasattr(batch, "to"):
            return batch
        if self.device.type != "cuda":
            return batch.to(self.device)
        return batch.pin_memory().to(self.device, non_blocking=True)

    def _update(self) -> tuple[float, int, dict[str, float]]:
        """One optimizer update over accum_steps batches. Returns (loss sum, units, other sums),
        summed over all processes under torchrun."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total_loss, total_n, sums = 0.0, 0, {}
        for i in range(self.cfg.accum_steps):
            batch = self._to_device(self._next_batch())
            last = i == self.cfg.accum_steps - 1  # DDP sums gradients across processes once
            with self.net.no_sync() if self.world.active and not last else nullcontext():
                loss, n, extra = self._forward(batch)
                self.scaler.scale(loss).backward()
            total_loss += float(loss.detach())
            total_n += int(n)
            for k, v in extra.items():
                sums[k] = sums.get(k, 0.0) + float(v)
        if self.world.active:
            total_loss, total_n, sums = self._sum_over_processes(total_loss, total_n, sums)
        params = [p for p in self.model.parameters() if p.grad is not None]
        self._in_update = True
        if total_n > 0:
            self.scaler.unscale_(self.optimizer)  # (fp16 only) the true gradients, for clipping
            per_token = total_n / self.world.size  # DDP averaged the processes' gradient sums
            for p in params:  # §5.4: normalise per token over the whole update
                p.grad.div_(per_token)
            if self.cfg.clip_norm is not None:
                sums["grad_norm"] = float(nn.utils.clip_grad_norm_(params, self.cfg.clip_norm)) * total_n
            clock = self._agreed_elapsed if self.world.active else time.monotonic() - self._start
            set_lr(self.optimizer, learning_rate(self.step + 1, self.cfg, self.d_model, clock))
            self.scaler.step(self.optimizer)  # fp16: skipped when a gradient overflowed
            self.scaler.update()
        self.step += 1
        self.tokens += total_n
        if self.average is not None:
            self.average.update(self.step)
        self._in_update = False
        if self._pending_interrupt:
            raise KeyboardInterrupt
        return total_loss, total_n, sums

    def _sum_over_processes(self, loss: float, n: int, sums: dict[str, float]):
        """(loss, units, sums) added up over all processes; rank 0's clock agreed on by all."""
        keys = sorted(sums)
        clock = time.monotonic() - self._start if self.world.is_main else 0.0
        total = distributed.all_sum([loss, n, *(sums[k] for k in keys), clock])
        self._agreed_elapsed = total[-1]
        return total[0], int(round(total[1])), dict(zip(keys, total[2:-1], strict=True))

    def _log_train(self, log: MetricsLog, bar: tqdm, window: dict[str, Any]) -> dict[str, Any]:
        now = time.monotonic()
        n = max(window["tokens"], 1)
        row = {"loss": window["loss"] / n, "lr": self.optimizer.param_groups[0]["lr"],
               "tokens_per_s": window["tokens"] / max(now - window["t"], 1e-9)}
        row.update({k: v / n for k, v in window["sums"].items()})
        log.log(self.step, row)
        bar.set_postfix(loss=f"{row['loss']:.3f}", lr=f"{row['lr']:.2e}",
                        tok_s=f"{row['tokens_per_s']:.0f}",
                        left=self._time_left().removesuffix(" left"), refresh=False)
        if self.cfg.progress and not self._tty:
            self._say(f"step {self.step} | loss {row['loss']:.4g} | lr {row['lr']:.2e} | "
                      f"{row['tokens_per_s']:,.0f} tok/s | {self._time_left()}")
        window.update(loss=0.0, tokens=0, sums={}, t=now)
        return row

    def _final_save_times(self) -> list[float]:
        """Seconds into the run at which to save, so that the last min(keep_last_n, 5) checkpoints
        lie final_checkpoint_spacing x max_minutes apart at the end of a time budget (§6.1)."""
        cfg = self.cfg
        n = min(cfg.keep_last_n, FINAL_CHECKPOINTS)
        if cfg.max_minutes is None or not cfg.final_checkpoint_spacing or n < 2:
            return []
        budget = cfg.max_minutes * 60
        times = [budget * (1 - cfg.final_checkpoint_spacing * k) for k in range(1, n)]
        return sorted(t for t in times if t > self.elapsed)

    def _pace(self) -> tuple[float, float | None]:
        """(seconds since the run's clock started, steps per second of this run so far: None
        before its first step). The clock includes earlier runs of a resumed one."""
        elapsed = time.monotonic() - getattr(self, "_start", time.monotonic())
        done = self.step - getattr(self, "_first_step", self.step)
        return elapsed, done / max(elapsed - self.elapsed, 1e-9) if done > 0 else None

    def _expected_steps(self) -> int:
        """The step this run will end at: max_steps, or sooner where max_minutes runs out first
        at the pace of this run's steps so far."""
        elapsed, pace = self._pace()
        if self.cfg.max_minutes is None or pace is None:
            return self.cfg.max_steps
        left = max(0.0, self.cfg.max_minutes * 60 - elapsed)
        return min(self.cfg.max_steps, self.step + int(left * pace))

    def _time_left(self) -> str:
        """The time the run still needs: by max_minutes, or by the pace of this run's steps."""
        elapsed, pace = self._pace()
        left = [] if pace is None else [(self.cfg.max_steps - self.step) / pace]
        if self.cfg.max_minutes is not None:
            left.append(self.cfg.max_minutes * 60 - elapsed)
        if not left:
            return "time left unknown"
        seconds = max(0, int(min(left)))
        return f"{seconds // 60}m{seconds % 60:02d}s left"

    def _say(self, line: str) -> None:
        """One plain line on stderr (above the bar on a terminal); rank 0's alone."""
        if self.world.is_main:
            tqdm.write(line, file=sys.stderr)

    def _evaluate(self, log: MetricsLog) -> dict[str, Any]:
        self._last_eval = self.step
        if self.evaluate is None or not self.world.is_main:  # the others wait at the next step
            return {}
        saved = rng_state()
        self.model.eval()
        with torch.no_grad():
            result = self.evaluate(self._shipped())  # the weights the folder holds
        self.model.train()
        set_rng_state(saved)
        log.log(self.step, result)
        if result:  # one line per evaluation, whatever the progress setting
            scores = " | ".join(f"{k.replace('_', ' ')} {v:.4g}" for k, v in result.items()
                                if isinstance(v, (int, float)))
            self._say(f"step {self.step} | {scores} | {self._time_left()}")
        return result

    def _shipped(self) -> nn.Module:
        """The model the folder holds and validation scores: the running average, if on."""
        return self.model if self.average is None else self.average.averaged()

    def _install_signal_handlers(self) -> dict[int, Any]:
        """Ctrl-C (SIGINT) and SIGTERM during an optimizer update wait for the update to finish
        (never a half-updated model); anywhere else they interrupt at once. The state saved is
        the last update's. Returns the handlers replaced."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum, frame):
            self._signal = signum
            if self.world.active:  # acted on by all processes together (see _out_of_time)
                return
            if self._in_update:
                self._pending_interrupt = True
            else:
                raise KeyboardInterrupt

        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}


class _NoLog:
    """The metrics log of a process other than rank 0: nothing is written."""

    def log(self, step: int, values: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


__all__ = ["LossFn", "TrainResult", "Trainer", "seed_everything"]
