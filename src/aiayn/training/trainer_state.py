"""What a Trainer keeps in its folder, and how a run continues from it (mixed into Trainer).

After every update the Trainer marks a boundary: the step, token count, clock, data position and
RNG states that a run continuing from here needs. save() writes that boundary (config.json and
the weights users get, the numbered checkpoint, then train_state.pt naming it: see checkpoint.py
for the layout and the write order); _restore() reads it back into the model, optimizer, loss
scaler, batch stream and RNGs, so that a resumed run continues exactly as if never stopped.
Under torchrun every process takes part (their RNG states are saved too); rank 0 writes.

§6.1 averages the last checkpoints of a run: with a time budget, the last ones are written
final_checkpoint_spacing x max_minutes apart before its end (_final_save_times).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from aiayn.config.train import FINAL_CHECKPOINTS
from aiayn.errors import UserError, describe_os_error
from aiayn.folder.checkpoint import (
    load_train_state,
    prune_checkpoints,
    rng_state,
    save_train_state,
    set_rng_state,
)
from aiayn.folder.files import WEIGHTS_FILE, atomic_write
from aiayn.folder.format import checkpoint_path
from aiayn.folder.weights import load_weights, save_model
from aiayn.training import distributed
from aiayn.training.run import seed_everything


class TrainerState:
    """The Trainer's save and restore. Uses the Trainer's model, optimizer, scaler, batches
    (and _feed, their Prefetcher), cfg, run (folder and world), family, meta, average, stop_rule and step / tokens / elapsed."""

    def _mark_boundary(self, elapsed: float) -> None:
        # The data position of the last batch taken (the Prefetcher's, which builds ahead)
        position = (self._feed or self.batches).state_dict()
        self._boundary = {"step": self.step, "tokens": self.tokens, "elapsed": elapsed,
                          "data": position, "rng": rng_state()}

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
        if self.stop_rule is not None:  # a resumed run goes on counting (train.stop_when)
            state["stop_streak"] = {"when": self.cfg.stop_when, "streak": self.stop_rule.streak}
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
        # The evaluations in a row that met train.stop_when before the stop, when the condition
        # is the same; the next evaluation extends the count or resets it.
        streak = state.get("stop_streak") or {}
        if self.stop_rule is not None and streak.get("when") == self.cfg.stop_when:
            self.stop_rule.streak = int(streak["streak"])
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

    def _shipped(self) -> nn.Module:
        """The model the folder holds and validation scores: the running average, if on."""
        return self.model if self.average is None else self.average.averaged()


__all__ = ["TrainerState"]
