"""One training loop for every model family.

The family supplies a model, a resumable BatchStream, and a loss function

    loss_fn(model, batch) -> (loss_sum, n_tokens, sums)

where `loss_sum` is a scalar tensor summed over the batch's `n_tokens` units (non-pad target tokens
for translation, examples for a classifier) and `sums` holds other per-unit sums to report
(e.g. {"nll": ..., "correct": ...}).

The GPU runs ahead of the host: nothing in an update waits for it. The loss and the sums stay
tensors on the device, added up there and read once per training-loss line (progress.Window);
the units an update divides its gradients by are host numbers: an int from the loss function,
or, where it returns a device tensor, the count the batch carries from the host (Batch.tgt_count,
counted when collated; checked against the loss's own count at log time); the clipped gradient
norm is read at log time too. Batches are built, padded and pinned a few ahead by a background
thread (stream.Prefetcher, train.prefetch), in the same order, so a resumed run is unchanged;
there too a Batch's lengths are padded up to train.pad_to_multiple (bounded shapes for
train.compile, which compiles each of the model's stacked layers as one region, and for
train.cuda_graphs).
One update sums the losses of `accum_steps` batches and divides
the gradients by their total unit count: the loss is normalised per token (§5.4), whatever the
batching. An optional `evaluate(model) -> dict` runs every `eval_every` steps (in eval mode, under
no_grad, with the RNG state restored afterwards so that evaluating never changes training).

A run stops at max_steps, when max_minutes is spent, or when validation is saturated
(train.stop_when; progress.py). Everything needed to continue exactly is saved in the model folder
(trainer_state.py, checkpoint.py); Ctrl-C or SIGTERM saves the state of the last completed update
and returns with `interrupted=True`. The run itself (its folder checked, its processes joined,
its record, its seed) is started by run.start_run, the same for every task.

Under torchrun the same loop runs data-parallel (see distributed.py): each process takes its share
of every update's batches, DistributedDataParallel sums the gradients, the token count is summed
across processes, and rank 0 alone evaluates, logs and writes the folder.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from aiayn.config.train import TrainConfig
from aiayn.devices import resolve_precision
from aiayn.errors import UserError
from aiayn.folder import load_weights, read_meta
from aiayn.folder.checkpoint import rng_state, set_rng_state
from aiayn.training import distributed
from aiayn.training.averaging import WeightAverage
from aiayn.training.compiled import compile_layers
from aiayn.training.metrics import MetricsLog
from aiayn.training.progress import Progress, StopRule, Window
from aiayn.training.run import Run, TrainResult, folder_run, seed_everything
from aiayn.training.schedule import learning_rate, make_optimizer, set_lr
from aiayn.training.stream import BatchStream, Prefetcher
from aiayn.training.trainer_state import TrainerState

LossFn = Callable[[nn.Module, Any], tuple[Tensor, int | Tensor, dict[str, Any]]]


class Trainer(TrainerState, Progress):
    """The loop; its save and restore are in trainer_state.py, its clock, log lines, evaluations
    and early stop in progress.py.

    `run`: what start_run returned (its folder, this process's place among torchrun's, whether
    it resumes, the experiment to record in config.json), or a bare folder."""

    def __init__(self, model: nn.Module, config: TrainConfig, batches: BatchStream, loss_fn: LossFn,
                 run: Run | str | Path, *, family: str, meta: dict[str, Any] | None = None,
                 evaluate: Callable[[nn.Module], dict[str, Any]] | None = None):
        self.model, self.cfg, self.batches, self.loss_fn = model, config, batches, loss_fn
        self.run = run if isinstance(run, Run) else folder_run(run, config)
        self.out, self.world = self.run.folder, self.run.world
        record = {} if self.run.record is None else {"experiment": self.run.record}
        self.family, self.meta, self.evaluate = family, {**(meta or {}), **record}, evaluate
        self.d_model = getattr(getattr(model, "config", None), "d_model", 512)
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
        # train.stop_when: the early stop on a saturated validation metric (rank 0 judges)
        self.stop_rule = StopRule(config.stop_when, config.stop_patience) \
            if config.stop_when and evaluate is not None else None
        self._saturated_at: int | None = None  # the step whose evaluation met the rule
        self._feed: Prefetcher | None = None  # the batches, built ahead (while fit() runs)
        # train.pad_to_multiple: bounded batch shapes (Batch.padded) for a compiled update
        self.multiple = config.length_multiple(self.device.type)
        self._graphs = config.cuda_graphs
        if self._graphs and self.device.type != "cuda":
            raise UserError(f"train.cuda_graphs=true: CUDA graphs need a CUDA device; this run "
                            f"trains on {self.device} (train.device={config.device})")

    def _earlier_notes(self) -> dict[str, Any]:
        """config.json's keys other than the model's, as the run being resumed left them."""
        try:
            earlier = read_meta(self.out)
        except UserError:  # no readable config.json in the folder: no notes to keep
            return {}
        return {k: v for k, v in earlier.items() if k not in ("family", "model")}

    def fit(self, resume: bool | None = None) -> TrainResult:
        """Train (resume: continue the run in the folder; None: as the Run says) to the end of
        the budget, or until validation is saturated or a signal stops it."""
        cfg = self.cfg
        resume = self.run.resume if resume is None else resume
        # Whatever step below fails (a checkpoint that will not load, a compile, the batch thread),
        # what fit() changed is put back: threads, determinism, the layers' eager forwards, the
        # batch thread, the log, the signal handlers (undone in the reverse order of this list).
        with ExitStack() as undo:
            threads = torch.get_num_threads()
            deterministic = torch.are_deterministic_algorithms_enabled()
            undo.callback(torch.use_deterministic_algorithms, deterministic)
            undo.callback(torch.set_num_threads, threads)
            if cfg.threads:
                torch.set_num_threads(cfg.threads)
            torch.use_deterministic_algorithms(cfg.deterministic)
            self.model.to(self.device)
            seed_everything(cfg.seed + self.world.rank)  # each process its own dropout masks
            state = self._restore() if resume else None
            if resume:  # notes other commands left in config.json (`train auto`'s "auto") stay
                self.meta = {**self._earlier_notes(), **self.meta}
            else:
                self.run.begin_folder()
            if cfg.average_width:
                self.average = WeightAverage(self.model, cfg.average_width)
                if state is not None and "raw_weights" in state:  # the average so far
                    load_weights(self.average.model, self.out / state["weights"])
            log = MetricsLog(self.out, cfg.metrics_format, cfg.tensorboard,
                             resume_step=self.step if resume else None) \
                if self.world.is_main else _NoLog()
            undo.callback(log.close)
            if self.world.active:
                self.net = distributed.wrap(self.net, self.device, self._leaves_parameters_unused())
            # train.compile: the stacked layers compiled one region each (compiled.py); evaluation
            # and the model handed back run eagerly
            if cfg.compile:
                undo.callback(compile_layers(self.model, self._graphs))
            self._feed = Prefetcher(self.batches, self._take, cfg.prefetch,
                                    pin=self.device.type == "cuda")
            undo.callback(self._close_feed)  # the stream left at the last batch taken
            self._mark_boundary(self.elapsed)
            undo.callback(self._restore_signal_handlers, self._install_signal_handlers())
            result = self._loop(log)
            if self.average is not None:  # the model in memory = the one in the folder
                self.average.copy_to_model()
            if self.world.active:  # the folder is complete when any process returns
                torch.distributed.barrier()
            return result

    def _close_feed(self) -> None:
        self._feed.close()
        self._feed = None

    @staticmethod
    def _restore_signal_handlers(previous: dict[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

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
        if self._precision_note:  # auto's choice, or bf16 emulated on this CPU
            self._say(self._precision_note)
        window = Window(time.monotonic())
        t_first = time.monotonic()
        timed_saves = self._final_save_times()
        last: dict[str, Any] = {}
        stopped_by = "max_steps"
        try:
            while self.step < cfg.max_steps:
                reason = self._stop_reason(start)
                if reason is not None:
                    stopped_by = reason
                    break
                sums, units = self._update()
                if cfg.compile and self.step == self._first_step + 1:
                    self._say(f"compiled: the first update took {time.monotonic() - t_first:.1f} s "
                              "(train.compile)")
                elapsed = self._agreed_elapsed if self.world.active else time.monotonic() - start
                self._mark_boundary(elapsed)
                window.add(sums, units)
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
            how = "sigterm" if self._signal == signal.SIGTERM else "interrupt"
            return TrainResult(b["step"], b["tokens"], b["elapsed"], True, how, last, self.out,
                               self._why(how))
        bar.close()
        why = self._why(stopped_by)
        self._say(f"stopped at step {self.step}: {why}")
        return TrainResult(self.step, self.tokens, self._boundary["elapsed"], False, stopped_by,
                           last, self.out, why)

    def _leaves_parameters_unused(self) -> bool:
        """Whether the loss leaves some parameter without a gradient on any process: one
        forward/backward of the next batch, with the stream and the RNG put back afterwards."""
        position, saved = self.batches.state_dict(), rng_state()
        self.model.train()
        batch = next(self.batches)
        if self.device.type == "cuda":
            batch = batch.pin_memory()
        loss, _, _ = self._forward(self._to_device(batch))  # self.net: not DDP yet
        loss.backward()
        unused = any(p.requires_grad and p.grad is None for p in self.model.parameters())
        self.model.zero_grad(set_to_none=True)
        self.batches.load_state_dict(position)
        set_rng_state(saved)
        return bool(distributed.all_sum([unused])[0])

    def _take(self, stream: BatchStream) -> Any:
        """This process's next batch: every world-size-th of the shared stream (called by the
        Prefetcher, on its thread)."""
        if not self.world.active:
            batch = next(stream)
            return self._bounded(batch)
        batch = None
        for rank in range(self.world.size):
            if rank == self.world.rank:
                batch = next(stream)
            else:
                stream.skip()
        return self._bounded(batch)

    def _bounded(self, batch: Any) -> Any:
        """A Batch with its lengths padded up to train.pad_to_multiple (other batches as
        they are)."""
        return batch.padded(self.multiple) if self.multiple > 1 and hasattr(batch, "padded") \
            else batch

    def _forward(self, batch: Any) -> tuple[Tensor, int, dict[str, Any]]:
        """The loss function's (loss, units, sums) of a batch, under the training precision."""
        if self._graphs:  # the replayed graphs write their outputs into the same memory
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None):
            return self.net(batch)

    def _to_device(self, batch: Any) -> Any:
        """A batch (a Batch, a tensor, or a tuple of tensors) on the training device; to a GPU
        without waiting (the Prefetcher pinned it: page-locked memory, an asynchronous copy)."""
        if isinstance(batch, (tuple, list)):
            return type(batch)(self._to_device(b) for b in batch)
        if not hasattr(batch, "to"):
            return batch
        return batch.to(self.device, non_blocking=self.device.type == "cuda")

    def _update(self) -> tuple[dict[str, Any], int]:
        """One optimizer update over accum_steps batches. Returns (sums, units): the loss sum
        ("loss") and the loss function's other sums, tensors left on the device (nothing here
        waits for it), and the units, a host int; both summed over all processes under torchrun
        (the sums on the device, the units and the clock on the host: no GPU wait)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, Any] = {}
        total_n = 0
        for i in range(self.cfg.accum_steps):
            batch, counted = next(self._feed)
            batch = self._to_device(batch)
            last = i == self.cfg.accum_steps - 1  # DDP sums gradients across processes once
            with self.net.no_sync() if self.world.active and not last else nullcontext():
                loss, n, extra = self._forward(batch)
                self.scaler.scale(loss).backward()
            if isinstance(n, Tensor) and counted is not None:  # the host's count, checked later
                extra = {**extra, "units_check": n}
                n = counted
            total_n += int(n)  # a device tensor only where the batch carries no host count
            for k, v in (("loss", loss.detach()), *extra.items()):
                if self._graphs and isinstance(v, Tensor):  # kept past the next replay
                    v = v.clone()
                sums[k] = sums[k] + v if k in sums else v
        if self.world.active:
            sums, total_n = self._sum_over_processes(sums, total_n)
        self._in_update = True
        if total_n > 0:
            self._step(sums, total_n)
        self.step += 1
        self.tokens += total_n
        if self.average is not None:
            self.average.update(self.step)
        self._in_update = False
        if self._pending_interrupt:
            raise KeyboardInterrupt
        return sums, total_n

    def _step(self, sums: dict[str, Any], total_n: int) -> None:
        """The optimizer step on the summed gradients, normalised per unit of the update."""
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        self.scaler.unscale_(self.optimizer)  # (fp16 only) the true gradients, for clipping
        # §5.4: normalise per token over the whole update (DDP averaged the processes' sums)
        torch._foreach_div_(grads, total_n / self.world.size)
        if self.cfg.clip_norm is not None:  # the norm stays a tensor, read at log time
            params = [p for p in self.model.parameters() if p.grad is not None]
            sums["grad_norm"] = nn.utils.clip_grad_norm_(params, self.cfg.clip_norm) * total_n
        clock = self._agreed_elapsed if self.world.active else time.monotonic() - self._start
        set_lr(self.optimizer, learning_rate(self.step + 1, self.cfg, self.d_model, clock))
        self.scaler.step(self.optimizer)  # fp16: skipped when a gradient overflowed
        self.scaler.update()

    def _sum_over_processes(self, sums: dict[str, Any], n: int) -> tuple[dict[str, Any], int]:
        """(sums, units) added up over all processes; rank 0's clock agreed on by all. The
        sums stay device tensors, summed there (read at log time); the units and the clock are
        host numbers, summed on the host (the units divide the gradients before the step)."""
        keys = sorted(sums)
        clock = time.monotonic() - self._start if self.world.is_main else 0.0
        units, self._agreed_elapsed = distributed.all_sum([n, clock])
        summed = distributed.all_sum_tensors([sums[k] for k in keys])
        return dict(zip(keys, summed, strict=True)), int(round(units))

    def _install_signal_handlers(self) -> dict[int, Any]:
        """Ctrl-C (SIGINT) and SIGTERM during an optimizer update wait for the update to finish
        (never a half-updated model); anywhere else they interrupt at once. The state saved is
        the last update's. Returns the handlers replaced."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum, frame):
            self._signal = signum
            if self.world.active:  # acted on by all processes together (see _stop_reason)
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
