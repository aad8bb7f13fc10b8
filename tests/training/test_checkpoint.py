"""Train state, numbered checkpoints and §6.1 averaging."""

import json
import random

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from aiayn import Transformer, preset
from aiayn.errors import UserError
from aiayn.folder.checkpoint import (
    average_checkpoints,
    average_state_dicts,
    load_train_state,
    prune_checkpoints,
    rng_state,
    save_train_state,
    set_rng_state,
)
from aiayn.folder.format import checkpoint_path, list_checkpoints
from aiayn.folder.weights import save_model


def test_rng_state_round_trips_through_a_weights_only_file(tmp_path):
    state = rng_state()
    expected = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)])
    save_train_state(tmp_path, {"rng": state, "step": 7})
    torch.manual_seed(123), np.random.seed(1), random.seed(2)  # scramble
    loaded = load_train_state(tmp_path)  # torch.load(weights_only=True) inside
    set_rng_state(loaded["rng"])
    assert torch.equal(torch.rand(3), expected[0])
    assert np.array_equal(np.random.rand(3), expected[1])
    assert [random.random() for _ in range(3)] == expected[2]
    assert loaded["step"] == 7


def test_load_train_state_errors_are_one_line(tmp_path):
    with pytest.raises(UserError, match="nothing to resume"):
        load_train_state(tmp_path)
    (tmp_path / "train_state.pt").write_bytes(b"not a zip file")
    with pytest.raises(UserError, match="unreadable train state"):
        load_train_state(tmp_path)


def _folder_with_checkpoints(tmp_path, steps):
    model = Transformer(preset("tiny"))
    save_model(tmp_path / "run", "transformer", model)
    (tmp_path / "run" / "tokenizer.json").write_text("{}")
    states = []
    for i, step in enumerate(steps):
        torch.manual_seed(i)
        state = {k: torch.randn_like(v) for k, v in load_file(str(tmp_path / "run/model.safetensors")).items()}
        path = checkpoint_path(tmp_path / "run", step)
        path.parent.mkdir(exist_ok=True)
        save_file(state, str(path))
        states.append(state)
    return tmp_path / "run", states


def test_averaging_two_checkpoints_gives_the_element_wise_mean(tmp_path):
    folder, (a, b) = _folder_with_checkpoints(tmp_path, [100, 200])
    steps = average_checkpoints(folder, 2, tmp_path / "avg")
    assert steps == [100, 200]
    avg = load_file(str(tmp_path / "avg/model.safetensors"))
    for key in a:
        torch.testing.assert_close(avg[key], (a[key] + b[key]) / 2, rtol=0, atol=1e-7)
    meta = json.loads((tmp_path / "avg/config.json").read_text())
    assert meta["family"] == "transformer" and meta["averaged_steps"] == [100, 200]
    assert (tmp_path / "avg/tokenizer.json").exists()
    assert not (tmp_path / "avg/checkpoints").exists()
    # The averaged folder loads as a model.
    from aiayn.folder.load import load_model
    model, _ = load_model(tmp_path / "avg")
    torch.testing.assert_close(model.state_dict()["output.weight"],
                               (a["src_embed.tokens.weight"] + b["src_embed.tokens.weight"]) / 2)


def test_average_takes_the_last_n(tmp_path):
    folder, states = _folder_with_checkpoints(tmp_path, [1, 2, 3])
    assert average_checkpoints(folder, 2, tmp_path / "avg") == [2, 3]
    with pytest.raises(UserError, match="only 3 checkpoints"):
        average_checkpoints(folder, 10, tmp_path / "avg10")
    assert average_checkpoints(folder, 10, tmp_path / "avg10", allow_fewer=True) == [1, 2, 3]
    avg = load_file(str(tmp_path / "avg10/model.safetensors"))
    key = next(iter(avg))
    torch.testing.assert_close(avg[key], sum(s[key] for s in states) / 3, rtol=0, atol=1e-6)


def test_average_refuses_bad_requests_and_touches_nothing(tmp_path):
    folder, _ = _folder_with_checkpoints(tmp_path, [1])
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken/keep.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        average_checkpoints(folder, 1, tmp_path / "taken")
    assert (tmp_path / "taken/keep.txt").read_text() == "mine"
    with pytest.raises(UserError, match="model folder not found"):
        average_checkpoints(tmp_path / "missing", 1, tmp_path / "x")
    with pytest.raises(UserError, match="positive"):
        average_checkpoints(folder, 0, tmp_path / "y")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_average_state_dicts_rejects_mismatched_tensors():
    with pytest.raises(UserError, match="different tensors"):
        average_state_dicts([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}])


def test_prune_keeps_the_newest_and_the_protected(tmp_path):
    folder, _ = _folder_with_checkpoints(tmp_path, [1, 2, 3, 4])
    prune_checkpoints(folder, 2, protect=checkpoint_path(folder, 1))
    assert [s for s, _ in list_checkpoints(folder)] == [1, 3, 4]


def test_averaging_warning_names_a_span_that_reaches_back_into_early_training():
    from aiayn.folder.checkpoint import averaging_warning

    assert averaging_warning([9600, 9700, 9800, 9900, 10000], 10000) is None
    assert averaging_warning([1000], 1153) is None
    warning = averaging_warning([500, 1000, 1153], 1153)
    assert "steps 500..1153" in warning and "57%" in warning


def test_a_metrics_line_cut_off_by_a_crash_does_not_block_resume(tmp_path):
    from aiayn.training.metrics import MetricsLog

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n{"step": 3, "lo')
    log = MetricsLog(tmp_path, tensorboard=False, resume_step=2)
    assert log.read() == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}]
    log.close()
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(UserError, match=r"metrics.jsonl:2: not a JSON line"):
        MetricsLog(tmp_path, tensorboard=False).read()


def test_average_copies_known_files_only_and_never_through_a_symlink(tmp_path):
    folder, _ = _folder_with_checkpoints(tmp_path, [1, 2])
    secret = tmp_path / "secret.txt"
    secret.write_text("do not copy")
    secret.chmod(0o600)
    (folder / "tokenizer.json").unlink(missing_ok=True)
    (folder / "tokenizer.json").symlink_to(secret)
    (folder / "notes.txt").write_text("mine")
    average_checkpoints(folder, 2, tmp_path / "avg")
    names = {p.name for p in (tmp_path / "avg").iterdir()}
    assert names == {"config.json", "model.safetensors"}


def test_files_follow_the_umask_and_stale_temporaries_go_at_resume(tmp_path):
    import os

    from aiayn.folder.files import atomic_write_text
    from aiayn.folder.format import remove_stale_tmp

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
    (tmp_path / "checkpoints").mkdir()
    stale = [tmp_path / ".model.safetensors.abc123.tmp",
             tmp_path / "checkpoints" / ".step_00000010.safetensors.x.tmp"]
    for p in stale:
        p.write_text("half")
    (tmp_path / "keep.tmp").write_text("not ours")
    assert sorted(remove_stale_tmp(tmp_path)) == sorted(stale)
    assert not any(p.exists() for p in stale) and (tmp_path / "keep.tmp").exists()
