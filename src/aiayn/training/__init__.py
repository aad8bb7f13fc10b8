"""Training, for every model family: one Trainer, its losses, schedules, checkpoints and logs.

    trainer.py      Trainer(model, TrainConfig, BatchStream, loss_fn, out_dir, family=...).fit()
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
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer, TrainResult, seed_everything

__all__ = ["BatchStream", "TrainResult", "Trainer", "label_smoothed_nll", "seed_everything"]
