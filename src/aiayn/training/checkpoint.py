"""Moved to aiayn.folder.checkpoint (training state, numbered checkpoints, averaging); kept as an
alias until every import names the new path."""

from __future__ import annotations

from aiayn.folder.checkpoint import (
    COPIED_BY_AVERAGE,
    MAX_AVERAGED_SPAN,
    STARTED_MARKER,
    TRAIN_STATE_FILE,
    average_checkpoints,
    average_state_dicts,
    averaging_warning,
    check_out_folder,
    load_train_state,
    mark_started,
    prune_checkpoints,
    rng_state,
    running_average_note,
    save_checkpoint_weights,
    save_train_state,
    set_rng_state,
)
from aiayn.folder.checkpoint import _never_checkpointed as _never_checkpointed

__all__ = ["COPIED_BY_AVERAGE", "MAX_AVERAGED_SPAN", "STARTED_MARKER", "TRAIN_STATE_FILE",
           "average_checkpoints", "average_state_dicts", "averaging_warning", "check_out_folder",
           "load_train_state", "mark_started", "prune_checkpoints", "rng_state",
           "running_average_note", "save_checkpoint_weights", "save_train_state", "set_rng_state"]
