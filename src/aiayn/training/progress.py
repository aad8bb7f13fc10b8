"""What a Trainer reports, and when it stops early (mixed into Trainer).

The run's clock (rank 0's, under torchrun) gives the pace, the steps a time budget allows and
the time left; the training-loss line and one line per evaluation go to stderr and the metrics
log. A run stops before its next update when max_steps is reached, when max_minutes is spent,
or when validation is saturated: train.stop_when ("valid_exact_match>=100") held at
train.stop_patience evaluations in a row (StopRule). Rank 0 decides the last two, on its clock
and its evaluation, and every process learns the decision at the same update (_stop_reason).
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import torch
from tqdm.auto import tqdm

from aiayn.config.train import parse_stop_when
from aiayn.folder.checkpoint import rng_state, set_rng_state
from aiayn.training import distributed
from aiayn.training.metrics import MetricsLog


class Window:
    """The updates since the last training-loss line: their units (a host int) and their sums
    (loss and the loss function's others), each kept where it was computed. A tensor stays on
    its device, added up there (float64; float32 on MPS, which has none) without the host
    waiting for it; read() brings them all to the host at once, at log time.

    `units_check`: the units the loss function counted on the device where the trainer divided
    by the batch's host count instead; read() raises when the two differ."""

    def __init__(self, t: float):
        self.reset(t)

    def reset(self, t: float) -> None:
        self.t, self.units = t, 0
        self._host: dict[str, float] = {}
        self._device: dict[str, torch.Tensor] = {}

    def add(self, sums: dict[str, Any], units: int) -> None:
        self.units += units
        for k, v in sums.items():
            if not isinstance(v, torch.Tensor):
                self._host[k] = self._host.get(k, 0.0) + v
            elif k in self._device:
                self._device[k].add_(v.detach())
            else:
                dtype = torch.float32 if v.device.type == "mps" else torch.float64
                self._device[k] = v.detach().to(dtype, copy=True)

    def read(self) -> dict[str, float]:
        """The sums as Python numbers (one copy to the host per device)."""
        out = dict(self._host)
        by_device: dict[torch.device, list[str]] = {}
        for k, v in self._device.items():
            by_device.setdefault(v.device, []).append(k)
        for keys in by_device.values():
            values = torch.stack([self._device[k] for k in keys]).tolist()
            for k, v in zip(keys, values, strict=True):
                out[k] = out.get(k, 0.0) + v
        counted = out.pop("units_check", None)
        if counted is not None and round(counted) != self.units:
            raise RuntimeError(f"the loss function counted {round(counted)} units in the last "
                               f"updates, their batches {self.units} (Batch.tgt_count): the "
                               "loss must count the batch's non-pad target tokens")
        return out


class StopRule:
    """train.stop_when: a condition on a validation metric ("valid_exact_match>=100") that must
    hold at `patience` evaluations in a row before the run stops."""

    def __init__(self, when: str, patience: int):
        self.when, self.patience = when, patience
        self.metric, self.op, self.target = parse_stop_when(when)
        self.streak = 0  # evaluations in a row (the last ones) that met the condition
        self.value: float | None = None  # the metric at the last evaluation

    def update(self, scores: dict[str, Any]) -> bool:
        """Count one evaluation's scores; True when the condition has now held `patience` times
        in a row. A KeyError when the scores lack the metric."""
        self.value = float(scores[self.metric])
        met = self.value >= self.target if self.op == ">=" else self.value <= self.target
        self.streak = self.streak + 1 if met else 0
        return self.streak >= self.patience

    def why(self) -> str:
        return (f"{self.metric} {self.value:.4g} {self.op} {self.target:g} at {self.streak} "
                "evaluations in a row (train.stop_when)")


class Progress:
    """The Trainer's clock, log lines, evaluations and early stop. Uses the Trainer's cfg, run
    (world), step, elapsed, optimizer, model, evaluate, stop_rule and _signal."""

    def _stop_reason(self, start: float) -> str | None:
        """Why the run stops before its next update: "max_minutes" (the time budget is spent),
        "saturated" (the evaluation at this step met train.stop_when for the stop_patience-th
        time in a row), or None. Under torchrun rank 0 decides both, on its clock and its
        evaluation, and all processes learn it here, so that all stop after the same update;
        a Ctrl-C or SIGTERM that reached any process is acted on here, by all of them at once."""
        over = self.cfg.max_minutes is not None and \
            time.monotonic() - start >= self.cfg.max_minutes * 60
        saturated = self._saturated_at == self.step
        if self.world.active:
            sig = self._signal or 0
            over, saturated, sigterm, sigint = distributed.all_sum(
                [over and self.world.is_main, saturated and self.world.is_main,
                 sig == signal.SIGTERM, sig == signal.SIGINT])
            if sigterm or sigint:
                self._signal = signal.SIGTERM if sigterm else signal.SIGINT
                raise KeyboardInterrupt
        return "max_minutes" if over else "saturated" if saturated else None

    def _why(self, stopped_by: str) -> str:
        """Why the run stopped, in words, for its last line."""
        rule, cfg = self.stop_rule, self.cfg
        if stopped_by == "saturated":
            return rule.why() if rule is not None and rule.value is not None else \
                f"train.stop_when={cfg.stop_when!r} met"
        if stopped_by == "max_minutes":
            return f"train.max_minutes={cfg.max_minutes:g} spent"
        if stopped_by == "max_steps":
            return f"train.max_steps={cfg.max_steps} reached"
        return "stopped by SIGTERM" if stopped_by == "sigterm" else "interrupted (Ctrl-C)"

    def _log_train(self, log: MetricsLog, bar: tqdm, window: Window) -> dict[str, Any]:
        """The training-loss line: the window's sums, read now (the one wait for the device in
        log_every updates), per unit."""
        now = time.monotonic()
        n = max(window.units, 1)
        sums = window.read()
        row = {"loss": sums.pop("loss", 0.0) / n, "lr": self.optimizer.param_groups[0]["lr"],
               "tokens_per_s": window.units / max(now - window.t, 1e-9)}
        row.update({k: v / n for k, v in sums.items()})
        log.log(self.step, row)
        bar.set_postfix(loss=f"{row['loss']:.3f}", lr=f"{row['lr']:.2e}",
                        tok_s=f"{row['tokens_per_s']:.0f}",
                        left=self._time_left().removesuffix(" left"), refresh=False)
        if self.cfg.progress and not self._tty:
            self._say(f"step {self.step} | loss {row['loss']:.4g} | lr {row['lr']:.2e} | "
                      f"{row['tokens_per_s']:,.0f} tok/s | {self._time_left()}")
        window.reset(now)
        return row

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
        if self.stop_rule is not None:
            self._judge(result)
        return result

    def _judge(self, scores: dict[str, Any]) -> None:
        """Feed an evaluation to the stop rule (rank 0); a metric the evaluation does not report
        turns the rule off with a warning, rather than ending a run that trains well."""
        try:
            if self.stop_rule.update(scores):
                self._saturated_at = self.step
        except KeyError:
            self._say(f"warning: train.stop_when={self.cfg.stop_when!r}: the evaluation reports "
                      f"no {self.stop_rule.metric!r} (it reports {', '.join(sorted(scores)) or 'nothing'}); "
                      "the run goes on to its budget")
            self.stop_rule = None


__all__ = ["Progress", "StopRule", "Window"]
