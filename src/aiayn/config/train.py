"""How to train: TrainConfig, the one typed config of every model family's run (one Trainer for
all), with the paper's defaults (§5.3-§5.4), and the values its checks allow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from aiayn.config.base import Config, _fail
from aiayn.devices import check_device_name

LR_SCHEDULES = ("noam", "constant", "cosine")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
MAX_AVERAGE_WIDTH = 12 ** -0.5  # train.average_width of an average over the whole run
FINAL_CHECKPOINTS = 5  # §6.1 averages the last 5 checkpoints (aiayn average --last 5)
METRICS_FORMATS = ("jsonl", "csv")
# train.stop_when: METRIC>=VALUE or METRIC<=VALUE, e.g. "valid_exact_match>=100"
_STOP_WHEN = re.compile(r"^\s*(\w+)\s*(>=|<=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


def parse_stop_when(text: str) -> tuple[str, str, float]:
    """(metric, ">=" or "<=", value) of a train.stop_when condition ("valid_exact_match>=100")."""
    match = _STOP_WHEN.match(text)
    if match is None:
        _fail("stop_when", text, "must read METRIC>=VALUE or METRIC<=VALUE, e.g. "
              "'valid_exact_match>=100' (a validation metric the run logs)")
    return match[1], match[2], float(match[3])


@dataclass
class TrainConfig(Config):
    """How to train any model family (one Trainer for all). Defaults follow §5.3-§5.4.

    Steps are optimizer updates; with accum_steps > 1 one step sums the gradients of that many
    batches (the paper's ~25k-token batches on fewer tokens per batch).
    """

    # §5.3: lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) ("noam"). `lr`, when set, is
    # the peak (reached at step = warmup_steps) and rescales the shape; `lr_scale` multiplies it.
    # "constant": linear warmup to `lr`, then flat. "cosine": linear warmup, cosine decay to 0 at
    # max_steps. Both need `lr`.
    lr_schedule: str = field(default="noam", metadata={"help": "noam (§5.3) | constant | cosine"})
    lr: float | None = field(default=None, metadata={
        "help": "peak learning rate (noam: None = d_model^-0.5 warmup^-0.5)"})
    lr_scale: float = field(default=1.0, metadata={"help": "multiplies the whole schedule"})
    # "cosine" ends at min_lr (nanoGPT uses lr / 10). With max_minutes, the cosine runs on
    # whichever is further along, steps or time, so a time budget ends at min_lr, not mid-decay.
    min_lr: float = field(default=0.0, metadata={"help": "floor of the cosine decay"})
    warmup_steps: int = field(default=4000, metadata={"help": "§5.3: warmup_steps = 4000"})
    adam_beta1: float = field(default=0.9, metadata={
        "help": "§5.3: Adam with beta1 = 0.9, beta2 = 0.98, eps = 1e-9"})
    adam_beta2: float = field(default=0.98, metadata={"help": "§5.3"})
    adam_eps: float = field(default=1e-9, metadata={"help": "§5.3"})
    weight_decay: float = field(default=0.0, metadata={
        "help": "not in the paper; AdamW-style decoupled decay when > 0"})
    # Which parameters decay: matrices always, biases and LayerNorm gains never; embeddings
    # only with this set (nanoGPT decays every matrix, embeddings included).
    decay_embeddings: bool = field(default=False, metadata={
        "help": "weight_decay on the embeddings too (as nanoGPT)"})
    max_steps: int = field(default=100_000, metadata={
        "help": "§5.2: base model trained for 100k steps"})
    max_minutes: float | None = field(default=None, metadata={
        "help": "wall-clock budget for the whole run (resumes included)"})
    max_tokens: int = field(default=25_000, metadata={
        "help": "tokens per batch (translation: source + target, §5.1 ~25k each; LM: context)"})
    accum_steps: int = field(default=1, metadata={"help": "batches summed into one update"})
    clip_norm: float | None = field(default=None, metadata={
        "help": "not in the paper; gradient norm clipping when set"})
    label_smoothing: float = field(default=0.1, metadata={"help": "§5.4: eps_ls = 0.1"})
    # Not in the paper: R-Drop (Liang et al. 2021; tasks/seq2seq_loss.py), translation only
    rdrop: float = field(default=0.0, metadata={
        "help": "R-Drop's alpha: each batch read twice under two dropout masks, plus alpha/4 x "
                "their symmetric KL per token (~2x an update's compute); 0 = off; seq2seq only"})
    seed: int = field(default=0, metadata={"help": "initialisation, shuffling, dropout"})
    deterministic: bool = field(default=False, metadata={
        "help": "torch.use_deterministic_algorithms: bitwise-reproducible runs"})
    threads: int | None = field(default=None, metadata={
        "help": "torch.set_num_threads; None leaves torch's default"})
    # Mixed precision (not in the paper, which trained in fp32): autocast to bf16 or fp16 for the
    # matmuls; the loss and softmax stay fp32; fp16 adds loss scaling (GradScaler). "auto": bf16
    # on GPUs that compute it and on CPUs with AVX512-BF16 or AMX, else fp32 (resolve_precision).
    precision: str = field(default="auto", metadata={
        "help": "auto | fp32 | bf16 | fp16 (autocast; fp16 with loss scaling)"})
    device: str = field(default="auto", metadata={
        "help": "auto (CUDA when present, else MPS, else CPU), cpu, cuda, cuda:N, mps"})
    # torch.compile of each stacked layer, one region each (training/compiled.py; dynamic
    # shapes: one graph for the batches' varying sizes); the first update, which compiles, is
    # timed in the log.
    compile: bool = field(default=False, metadata={
        "help": "torch.compile the model's layers for training; slower to start"})
    # Bounded shapes: batch lengths padded up to a multiple (Batch.padded; the loss then masks
    # the padding rather than projecting the non-pad rows alone), so that CUDA graphs record a
    # few graphs, one per shape.
    pad_to_multiple: int | str = field(default="auto", metadata={
        "help": "pad source and target lengths up to a multiple of this; auto: 8 on CUDA "
                "under train.cuda_graphs, else 1 (no padding: the least work)"})
    cuda_graphs: bool = field(default=False, metadata={
        "help": "replay each update's kernels as CUDA graphs (torch.compile mode "
                "reduce-overhead): for small models on a GPU; needs train.compile"})
    # Batches are built (padded, and pinned for a GPU) on a background thread this many ahead
    # of the update that takes them, in the same order (training/stream.py: Prefetcher).
    prefetch: int = field(default=2, metadata={
        "help": "batches built ahead on a background thread; 0: each on the main thread when "
                "the update needs it"})
    log_every: int = field(default=50, metadata={
        "help": "steps between training-loss lines (metrics.jsonl, console)"})
    eval_every: int = field(default=1000, metadata={"help": "0: only at the end"})
    # Stop early once validation is saturated: the condition held at stop_patience evaluations
    # in a row (the demo: exact match 100% twice). The time and step budgets stay the caps.
    stop_when: str | None = field(default=None, metadata={
        "help": "stop once a validation metric meets this at stop_patience evaluations in a row, "
                "e.g. 'valid_exact_match>=100' (quote it on a command line); None: run the budget"})
    stop_patience: int = field(default=2, metadata={
        "help": "evaluations in a row that must meet stop_when"})
    save_every: int = field(default=1000, metadata={"help": "0: only at the end (and on Ctrl-C)"})
    keep_last_n: int = field(default=5, metadata={
        "help": "numbered checkpoints kept for averaging (§6.1 averages the last 5)"})
    # With max_minutes, the last min(keep_last_n, 5) checkpoints are also written this fraction of
    # the budget apart before its end, ready for `aiayn average` (§6.1: the last 5, written at
    # 10-minute intervals of a 12-hour run, 1.4%); 0 = only save_every.
    final_checkpoint_spacing: float = field(default=0.014, metadata={
        "help": "fraction of max_minutes between the last checkpoints"})
    # §6.1's averaging kept during training (training/averaging.py): checkpoints, the folder and
    # validation scores hold a running average of the weights whose window is this fraction of
    # the run (the standard deviation of a power-function EMA, Karras et al. 2024); 0 = the last
    # update's weights, as the paper's single checkpoint. Costs one more copy of the weights in
    # memory and one in train_state.pt.
    average_width: float = field(default=0.02, metadata={
        "help": "relative width of the weights' running average; 0 = off"})
    metrics_format: str = field(default="jsonl", metadata={"help": "jsonl | csv"})
    tensorboard: bool = field(default=True, metadata={
        "help": "scalars in DIR/tb (tensorboard --logdir DIR/tb)"})
    progress: bool = field(default=True, metadata={
        "help": "a progress bar on a terminal, plain lines in a log file"})

    def __post_init__(self) -> None:
        self._check_types()
        if self.lr_schedule not in LR_SCHEDULES:
            _fail("lr_schedule", self.lr_schedule, f"must be one of {', '.join(LR_SCHEDULES)}")
        if self.lr_schedule != "noam" and self.lr is None:
            _fail("lr", None, f"lr_schedule={self.lr_schedule!r} needs a peak lr")
        for name in ("lr", "lr_scale", "adam_eps", "max_minutes", "clip_norm"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                _fail(name, value, "must be positive")
        for name in ("max_steps", "max_tokens", "accum_steps", "log_every", "keep_last_n"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "must be a positive integer")
        for name in ("warmup_steps", "eval_every", "save_every", "seed", "prefetch"):
            if getattr(self, name) < 0:
                _fail(name, getattr(self, name), "must be a non-negative integer")
        if self.lr_schedule == "noam" and self.warmup_steps == 0:
            _fail("warmup_steps", 0, "the noam schedule needs warmup_steps >= 1")
        if self.threads is not None and self.threads <= 0:
            _fail("threads", self.threads, "must be a positive integer")
        for name in ("adam_beta1", "adam_beta2", "label_smoothing"):
            if not 0.0 <= getattr(self, name) < 1.0:
                _fail(name, getattr(self, name), "must be in [0, 1)")
        if not (self.average_width == 0 or 0 < self.average_width < MAX_AVERAGE_WIDTH):
            _fail("average_width", self.average_width,
                  f"must be 0 (off) or in (0, {MAX_AVERAGE_WIDTH:.4f}) (1/sqrt(12): the whole run)")
        timed = max(min(self.keep_last_n, FINAL_CHECKPOINTS), 1)
        if not 0.0 <= self.final_checkpoint_spacing < 1.0 / timed:
            _fail("final_checkpoint_spacing", self.final_checkpoint_spacing,
                  f"must be in [0, 1/min(keep_last_n, {FINAL_CHECKPOINTS})) = [0, {1.0 / timed:.3g})")
        if self.rdrop < 0:
            _fail("rdrop", self.rdrop, "must be non-negative")
        if self.weight_decay < 0:
            _fail("weight_decay", self.weight_decay, "must be non-negative")
        if self.min_lr < 0:
            _fail("min_lr", self.min_lr, "must be non-negative")
        if self.min_lr > 0 and self.lr_schedule != "cosine":
            _fail("min_lr", self.min_lr, f"is the floor of the cosine schedule; lr_schedule="
                  f"{self.lr_schedule!r} has none")
        if self.lr is not None and self.min_lr > self.lr * self.lr_scale:
            _fail("min_lr", self.min_lr, f"must not exceed the peak lr ({self.lr * self.lr_scale:g})")
        check_device_name(self.device)
        if self.precision not in PRECISIONS:
            _fail("precision", self.precision, f"must be one of {', '.join(PRECISIONS)}")
        if self.metrics_format not in METRICS_FORMATS:
            _fail("metrics_format", self.metrics_format, f"must be one of {', '.join(METRICS_FORMATS)}")
        if self.stop_when is not None:
            parse_stop_when(self.stop_when)
        if self.stop_patience <= 0:
            _fail("stop_patience", self.stop_patience, "must be a positive integer")
        if self.pad_to_multiple != "auto" and (not isinstance(self.pad_to_multiple, int)
                                               or self.pad_to_multiple <= 0):
            _fail("pad_to_multiple", self.pad_to_multiple, "must be a positive integer or auto")
        if self.cuda_graphs and not self.compile:
            _fail("cuda_graphs", True, "CUDA graphs replay a compiled update: set "
                  "train.compile=true too")

    def length_multiple(self, device: str) -> int:
        """What train.pad_to_multiple pads batch lengths to a multiple of, on this device."""
        if self.pad_to_multiple == "auto":
            return 8 if self.cuda_graphs and device.startswith("cuda") else 1
        return self.pad_to_multiple


__all__ = ["FINAL_CHECKPOINTS", "LR_SCHEDULES", "MAX_AVERAGE_WIDTH", "METRICS_FORMATS",
           "PRECISIONS", "TrainConfig", "parse_stop_when"]
