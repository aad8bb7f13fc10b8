"""The generic Trainer: learning a copy task, exact resume, Ctrl-C, logs."""

import json

import pytest
import torch

from aiayn import Transformer, preset
from aiayn.config import TrainConfig
from aiayn.data.batching import collate
from aiayn.folder import list_checkpoints
from aiayn.folder.checkpoint import TRAIN_STATE_FILE, load_train_state
from aiayn.generation.search import greedy_search
from aiayn.training.losses import label_smoothed_nll
from aiayn.training.stream import BatchStream
from aiayn.training.trainer import Trainer, seed_everything

PAD, BOS, EOS = 0, 1, 2
VOCAB = 12


def random_sequences(n, seed, lo=3, hi=9):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi, (n,), generator=g).tolist()
    return [torch.randint(4, VOCAB, (k,), generator=g).tolist() for k in lengths]


def copy_stream(seqs, batch_size):
    def plan(epoch):
        order = torch.randperm(len(seqs), generator=torch.Generator().manual_seed(epoch)).tolist()
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]

    return BatchStream(plan, lambda idx: collate([(seqs[i], seqs[i]) for i in idx], PAD))


def loss_fn(model, batch):
    loss, nll, n = label_smoothed_nll(model(batch.src, batch.tgt_in), batch.tgt_out, 0.1, PAD)
    return loss, n, {"nll": nll}


def tiny_model(seed=0, dropout=0.0, d_model=32):
    seed_everything(seed)
    return Transformer(preset("tiny", vocab_size=VOCAB, d_model=d_model, d_ff=2 * d_model,
                              dropout=dropout))


def quiet(**kw):
    base = dict(lr=3e-3, warmup_steps=30, log_every=10, eval_every=0, save_every=0,
                tensorboard=False, progress=False, threads=1, precision="fp32")
    return TrainConfig(**{**base, **kw})


def fresh_copy_stream(batch_size, per_epoch=2048):
    """New random sequences every epoch: the copy task proper, not memorising a set."""

    def plan(epoch):
        seqs = random_sequences(per_epoch, seed=1000 + epoch)
        return [[(s, s) for s in seqs[i:i + batch_size]] for i in range(0, per_epoch, batch_size)]

    return BatchStream(plan, lambda pairs: collate(pairs, PAD))


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_copy_task_is_learned_to_100_percent_in_600_updates(tmp_path, precision):
    """In every precision (bf16 / fp16 autocast on the CPU: correctness, not speed), on the
    device train.device=auto picks (the GPU where there is one). Speed is the benchmarks'
    (benchmarks/), not a wall-clock bound here."""
    model = tiny_model()
    # A cosine decay to 0 (not §5.3's schedule) lets the last steps settle on exact copies.
    cfg = quiet(max_steps=600, label_smoothing=0.0, lr_schedule="cosine", precision=precision)
    result = Trainer(model, cfg, fresh_copy_stream(64), loss_fn, tmp_path,
                     family="transformer").fit()
    test = random_sequences(1000, seed=99)
    src = collate([(s, s) for s in test], PAD).src.to(next(model.parameters()).device)
    out = greedy_search(model.eval(), src, bos_id=BOS, eos_id=EOS, pad_id=PAD)
    exact = sum(o == s for o, s in zip(out, test, strict=True)) / len(test)
    assert exact == 1.0
    assert result.step == 600 and not result.interrupted


def _run(folder, max_steps, resume=False, interrupt_at_call=None, evaluate=None):
    model = tiny_model(dropout=0.2)  # dropout: the RNG state must be restored exactly
    cfg = quiet(max_steps=max_steps, accum_steps=2, clip_norm=1.0, deterministic=True,
                eval_every=3, save_every=4, keep_last_n=2, log_every=5)
    calls = {"n": 0}

    def counting_loss(m, batch):
        calls["n"] += 1
        if interrupt_at_call is not None and calls["n"] == interrupt_at_call:
            raise KeyboardInterrupt
        return loss_fn(m, batch)

    # 50 sequences in batches of 8: 7 batches an epoch, so the runs cross epochs mid-update.
    trainer = Trainer(model, cfg, copy_stream(random_sequences(50, seed=3), 8), counting_loss,
                      folder, family="transformer", evaluate=evaluate)
    return trainer, trainer.fit(resume=resume)


def _noisy_evaluate(model):
    # Evaluation that consumes random numbers must not change training (the trainer restores RNG).
    return {"noise": float(torch.rand(()))}


def _assert_same_training(a, b):
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key
    oa, ob = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    for i in oa:
        for k in oa[i]:
            assert torch.equal(torch.as_tensor(oa[i][k]), torch.as_tensor(ob[i][k])), (i, k)
    assert a.batches.state_dict() == b.batches.state_dict()
    assert torch.equal(torch.get_rng_state(), torch.get_rng_state())


def test_resume_continues_bitwise_exactly(tmp_path):
    full, r_full = _run(tmp_path / "full", 10, evaluate=_noisy_evaluate)
    rng_after_full = torch.get_rng_state()
    half, r_half = _run(tmp_path / "split", 5, evaluate=_noisy_evaluate)
    assert r_half.step == 5
    resumed, r_res = _run(tmp_path / "split", 10, resume=True, evaluate=_noisy_evaluate)
    assert r_res.step == r_full.step == 10
    assert torch.equal(torch.get_rng_state(), rng_after_full)
    _assert_same_training(full, resumed)
    assert r_res.tokens == r_full.tokens
    # The metrics log reads as one run: every row of the uninterrupted run, training rows once
    # each (the resumed log also has the evaluation that ended the first half, at step 5).
    rows_full = [json.loads(x) for x in (tmp_path / "full/metrics.jsonl").read_text().splitlines()]
    rows_res = [json.loads(x) for x in (tmp_path / "split/metrics.jsonl").read_text().splitlines()]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in rows]  # noqa: E731
    full_rows, res_rows = strip(rows_full), strip(rows_res)
    assert all(r in res_rows for r in full_rows)
    assert [r for r in res_rows if "loss" in r] == [r for r in full_rows if "loss" in r]
    assert [r for r in res_rows if r not in full_rows] == [r for r in res_rows
                                                           if r["step"] == 5 and "loss" not in r]


def test_resume_keeps_the_notes_other_commands_left_in_config_json(tmp_path):
    # `aiayn train auto` records its choice ("auto") in config.json; a plain resume of the
    # folder (`aiayn train FOLDER/auto.yaml --resume`) gives the trainer no such note
    cfg = quiet(max_steps=2, save_every=1)
    Trainer(tiny_model(), cfg, copy_stream(random_sequences(16, seed=3), 8), loss_fn,
            tmp_path, family="transformer", meta={"auto": {"rule": 2}, "note": "old"}).fit()
    Trainer(tiny_model(), quiet(max_steps=4, save_every=1),
            copy_stream(random_sequences(16, seed=3), 8), loss_fn, tmp_path,
            family="transformer", meta={"note": "new"}).fit(resume=True)
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["auto"] == {"rule": 2}  # kept
    assert meta["note"] == "new"  # what the resumed run says wins
    assert load_train_state(tmp_path)["step"] == 4


def test_ctrl_c_saves_the_last_completed_update_and_resumes_exactly(tmp_path):
    full, _ = _run(tmp_path / "full", 8)
    # accum_steps=2: call 12 is the 2nd batch of update 6, so updates 1-5 are complete.
    _, r_int = _run(tmp_path / "int", 8, interrupt_at_call=12)
    assert r_int.interrupted and r_int.stopped_by == "interrupt" and r_int.step == 5
    state = load_train_state(tmp_path / "int")
    assert state["step"] == 5 and state["data"] == {"epoch": 1, "index": 3}
    resumed, r_res = _run(tmp_path / "int", 8, resume=True)
    assert r_res.step == 8
    _assert_same_training(full, resumed)


def test_folder_holds_weights_state_checkpoints_and_logs(tmp_path):
    model = tiny_model()
    cfg = quiet(max_steps=12, log_every=4, save_every=3, keep_last_n=2, tensorboard=True,
                metrics_format="csv")
    result = Trainer(model, cfg, copy_stream(random_sequences(40, seed=5), 8), loss_fn, tmp_path,
                     family="transformer", meta={"note": "x"}).fit()
    assert result.step == 12
    names = {p.name for p in tmp_path.iterdir()}
    assert {"config.json", "model.safetensors", TRAIN_STATE_FILE, "checkpoints", "metrics.csv",
            "tb"} <= names
    assert [s for s, _ in list_checkpoints(tmp_path)] == [9, 12]  # keep_last_n = 2
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["family"] == "transformer" and meta["note"] == "x"
    # weights_only loading works: no pickled objects in the train state.
    state = torch.load(tmp_path / TRAIN_STATE_FILE, weights_only=True)
    assert state["step"] == 12 and state["weights"] == "checkpoints/step_00000012.safetensors"
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"step", "loss", "lr", "tokens_per_s", "nll"} <= set(header)
    assert list((tmp_path / "tb").iterdir())


@pytest.mark.slow
def test_max_minutes_stops_training(tmp_path):
    cfg = quiet(max_steps=10**6, max_minutes=0.02)
    result = Trainer(tiny_model(), cfg, copy_stream(random_sequences(40, seed=5), 8), loss_fn,
                     tmp_path, family="transformer").fit()
    assert result.stopped_by == "max_minutes" and 0 < result.step < 10**6
    assert load_train_state(tmp_path)["step"] == result.step


def test_loss_is_normalised_per_token_over_the_whole_update(tmp_path):
    # One update over two half batches == one update over the whole batch (same gradient).
    seqs = random_sequences(16, seed=7)
    grads = []
    for accum, bs in ((1, 16), (2, 8)):
        model = tiny_model()
        stream = BatchStream(lambda e, bs=bs: [list(range(i, i + bs)) for i in range(0, 16, bs)],
                             lambda idx: collate([(seqs[i], seqs[i]) for i in idx], PAD))
        trainer = Trainer(model, quiet(max_steps=1, accum_steps=accum), stream, loss_fn,
                          tmp_path / str(accum), family="transformer")
        trainer.optimizer.step = lambda: None  # keep the gradients, skip the update
        trainer.fit()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_resume_without_a_train_state_is_a_user_error(tmp_path):
    from aiayn.errors import UserError

    with pytest.raises(UserError, match="nothing to resume"):
        Trainer(tiny_model(), quiet(max_steps=1), copy_stream(random_sequences(8, 1), 4), loss_fn,
                tmp_path, family="transformer").fit(resume=True)
