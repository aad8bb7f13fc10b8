"""Training, for every model family: one Trainer, its losses, schedules, checkpoints and logs.

    run.py          start_run(exp, resume, out, say) -> Run: the one start of every task's run
                    (folder check, torchrun, the experiment record, resume check, seed); TrainResult
    trainer.py      Trainer(model, TrainConfig, BatchStream, loss_fn, run, family=...).fit(): the loop
    trainer_state.py  its save and restore;  progress.py  its clock, log lines, early stop
    stream.py       BatchStream: resumable epoch/position over a deterministic batch plan
    losses.py       §5.4 label-smoothed cross-entropy, summed over non-pad tokens
    schedule.py     §5.3 Adam(0.9, 0.98, 1e-9) and the warmup schedule ("noam"), constant, cosine
    checkpoint.py   train_state.pt, numbered checkpoints, §6.1 averaging
    metrics.py      metrics.jsonl / .csv and TensorBoard scalars
    experiment.py   the one experiment loader: a config (file, built-in name or preset) +
                    key=value overrides + a task's defaults -> typed configs
The tasks that use them (translation, language models, ...) live in aiayn.tasks.
"""

from aiayn.training.losses import label_smoothed_nll
from aiayn.training.run import Run, TrainResult, seed_everything, start_run
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer

__all__ = ["BatchStream", "Run", "TrainResult", "Trainer", "label_smoothed_nll", "seed_everything",
           "start_run"]
