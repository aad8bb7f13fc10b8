"""Denoising pretraining on the translation task (data.objective), and fine-tuning from its
folder (model.init): a tiny model learns to undo the corruption, a resumed run is the
uninterrupted one, fine-tuning starts from the pretrained weights, refusals are one line."""

import json
import random

import pytest
import torch
import yaml

from aiayn.data import denoising
from aiayn.data.batching import collate
from aiayn.data.noising import fill_spans
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import load_model
from aiayn.folder.checkpoint import load_train_state
from aiayn.generation.search import decode_ids
from aiayn.tasks import seq2seq
from tests.builders import run, write_config

LETTERS = "a b c d e f g h".split()


def cyclic_text(n, seed):
    """Paragraphs that run through a b c ... h a b ... from a random letter: every token follows
    from its neighbours, so a tiny model can restore what a corruption took out."""
    rng = random.Random(seed)
    return [" ".join(LETTERS[(start + i) % 8] for i in range(rng.randint(30, 60)))
            for start in (rng.randrange(8) for _ in range(n))]


def pretrain_config(tmp, objective="span", out="pre", **train):
    (tmp / "toy.txt").write_text("\n\n".join(cyclic_text(300, 0)) + "\n", encoding="utf-8")
    return {"out": str(tmp / out),
            "model": {"preset": "tiny", "d_model": 32, "d_ff": 64, "dropout": 0.0},
            "data": {"objective": objective, "text": [str(tmp / "toy.txt")], "vocab_size": 120,
                     "valid_pairs": 8},
            "train": {"max_steps": 300, "max_tokens": 800, "lr": 3e-3, "warmup_steps": 30,
                      "eval_every": 0, "save_every": 0, "log_every": 50, "tensorboard": False,
                      "progress": False, "threads": 1, "precision": "fp32", **train}}


def quiet(_):
    pass


@pytest.mark.slow
@pytest.mark.parametrize("objective, least", [("span", 0.75), ("infill", 0.95)])
def test_a_tiny_model_learns_to_undo_the_corruption(tmp_path, objective, least):
    """600 updates (~17 s each) on cyclic paragraphs; on 50 unseen ones, each corrupted afresh,
    the model predicts the target's tokens (teacher-forced: the spans, or the whole text) with an
    accuracy of 0.81 (span) and 0.975 (infill) at seed 0, from 0.10 and 0.12 after 20 updates.
    (Copying the input's kept tokens alone gives infilling ~0.7.) Greedy decoding then restores
    8% and 14% of the documents exactly, every token of 30 to 60."""
    exp = seq2seq.experiment(pretrain_config(tmp_path, objective, max_steps=600,
                                                 max_tokens=2000))
    folder = seq2seq.train(exp, say=quiet).folder
    model, _ = load_model(folder)
    tok = Tokenizer.load(folder)
    special = denoising.objective_ids(tok, objective)
    docs = tok.encode_batch(cyclic_text(50, 99))  # one document each (none packed)
    pairs = denoising.corrupt_documents(docs, objective, special, seed=5, epoch=0, max_len=64)
    with torch.no_grad():
        _, n, extra = seq2seq.seq2seq_loss(0.0)(model, collate(pairs))
    assert extra["accuracy"] / n >= least
    hyps = decode_ids(model, [s for s, _ in pairs], beam=1)
    if objective == "span":  # the output is the spans: filled into the input, the document
        hyps = [fill_spans(s, h, special) for (s, _), h in zip(pairs, hyps, strict=True)]
    assert sum(h == doc for h, doc in zip(hyps, docs, strict=True)) >= 2  # 4 and 7 at seed 0


def weights(folder):
    return load_model(folder)[0].state_dict()


@pytest.mark.slow  # a run, stopped, resumed and run again: ~2 s each
@pytest.mark.parametrize("objective", denoising.OBJECTIVES)
def test_a_resumed_pretraining_run_is_the_uninterrupted_one(tmp_path, objective):
    """Epochs of 5 (span) or 7 (infill) batches, so the run crosses epochs, each with its own
    corruption, and stops mid-epoch (epoch 2 batch 1, epoch 1 batch 4): resumed from step 11,
    step 20 is bitwise the straight run's."""
    cfg = pretrain_config(tmp_path, objective, max_steps=20, max_tokens=4000, save_every=10)
    cfg["model"]["dropout"] = 0.1  # the resumed run must also restore the dropout RNG
    straight = seq2seq.train(seq2seq.experiment(cfg), say=quiet).folder
    half = seq2seq.experiment(cfg, ["train.max_steps=11"], out=tmp_path / "half")
    seq2seq.train(half, say=quiet)
    stopped = load_train_state(tmp_path / "half")["data"]
    assert stopped["epoch"] >= 1 and stopped["index"] >= 1
    whole = seq2seq.experiment(cfg, out=tmp_path / "half")
    resumed = seq2seq.train(whole, resume=True, say=quiet).folder
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pre")
    cfg = pretrain_config(tmp, "span", max_steps=10)
    cfg["model"] = {"preset": "tiny", "d_model": 16, "d_ff": 32}  # write_config's model
    return seq2seq.train(seq2seq.experiment(cfg), say=quiet).folder


def test_fine_tuning_starts_from_the_pretrained_weights_and_vocabulary(pretrained, tmp_path,
                                                                       monkeypatch):
    seen = {}
    trainer = seq2seq.Trainer

    def spy(model, *args, **kwargs):
        seen.update({k: v.clone() for k, v in model.state_dict().items()})
        return trainer(model, *args, **kwargs)

    monkeypatch.setattr(seq2seq, "Trainer", spy)
    config = write_config(tmp_path, max_steps=5)
    exp = seq2seq.experiment(config, [f"model.init={pretrained}", "model.dropout=0.2"])
    folder = seq2seq.train(exp, say=quiet).folder
    before = weights(pretrained)
    assert seen.keys() == before.keys() and all(torch.equal(seen[k], before[k]) for k in seen)
    assert Tokenizer.load(folder).to_json() == Tokenizer.load(pretrained).to_json()
    meta = json.loads((folder / "config.json").read_text())
    assert meta["model"]["dropout"] == 0.2 and meta["experiment"]["model"]["init"] == str(pretrained)
    # a resumed fine-tuning run takes its own folder's model, not the pretrained one's
    assert seq2seq.train(seq2seq.experiment(config, [f"model.init={pretrained}",
                             "model.dropout=0.2", "train.max_steps=8"]), resume=True,
                             say=quiet).step == 8


def test_refusals_are_one_line(pretrained, tmp_path, capsys):
    config = write_config(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    for extra, message in [
        (["model.preset=base", "model.d_model=16"], "describes another model (n_heads=8 "),
        (["model.d_model=32"], "model (d_model=32 (pretrained: 16)); only dropout, "),
    ]:
        code, _, err = run(capsys, "train", config, f"model.init={pretrained}", *extra)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no folder written
    code, _, err = run(capsys, "train", config, "data.objective=mask")
    assert code == 2 and "data: invalid config: objective='mask': must be one of span, infill" in err
    code, _, err = run(capsys, "train", config, "data.text=[a.txt]", "data.train_src=null",
                       "data.train_tgt=null")
    assert code == 2 and "for an objective (data.objective)" in err
    code, _, err = run(capsys, "train", "lm-char", "--text", "a.txt")
    assert code == 2 and "--text is an option of `aiayn lm train`: lm-char is a " \
        "language_model config; run `aiayn lm train lm-char ... --text ...`" in err
    # a model trained on pairs has no sentinels to pretrain with
    plain = seq2seq.train(seq2seq.experiment(config, ["train.max_steps=2"],
                                                     out=tmp_path / "plain"), say=quiet).folder
    (tmp_path / "t.txt").write_text("\n\n".join(cyclic_text(60, 1)), encoding="utf-8")
    code, _, err = run(capsys, "train", config, f"model.init={plain}", "--text",
                       tmp_path / "t.txt", "data.objective=span", "--out", tmp_path / "x")
    assert code == 2 and "no <extra_id_0> token: it was not trained for objective='span'" in err


def test_pretrain_from_the_command_line_then_fine_tune(tmp_path, capsys):
    """`aiayn train CONFIG --text FILE...` on a config with data.objective; the built-in
    pretrain-span config has summarize-small's model, so its folder fine-tunes there."""
    cfg = pretrain_config(tmp_path, "infill", max_steps=6)
    cfg["data"].pop("text")
    cfg["data"]["corpus"] = "dates-numbers"  # replaced by --text
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    code, out, err = run(capsys, "train", tmp_path / "c.yaml", "--text", tmp_path / "toy.txt",
                         "--out", tmp_path / "m")
    assert code == 0 and "trained 6 steps" in out and "training pieces of text" in err
    code, out, _ = run(capsys, "train", tmp_path / "c.yaml", "--text", tmp_path / "toy.txt",
                       "--out", tmp_path / "m", "--resume", "train.max_steps=8")
    assert code == 0 and "trained 8 steps" in out
    pre = seq2seq.experiment("pretrain-span")
    tune = seq2seq.experiment("summarize-small", ["model.init=x"])
    assert {**pre.model, "init": "x"} == tune.model and pre.data.objective == "span"


def test_the_permutation_objectives_train_on_shuffled_sentences_of_the_text(tmp_path, monkeypatch):
    """data.objective=permute / infill+permute (BART §2.2, §5.1) through seq2seq.train: the
    batches' targets are the documents, their sources the same sentences in another order
    (permute) or <mask>ed (infill+permute); the folder's tokenizer has <mask> for the latter."""
    sentences = [" ".join(LETTERS[i:i + 3]).capitalize() + "." for i in range(6)]  # "A b c."
    paragraphs = [" ".join(random.Random(k).sample(sentences, 4)) for k in range(60)]
    (tmp_path / "s.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    seen = []
    trainer = seq2seq.Trainer

    def spy(model, cfg, batches, *args, **kwargs):
        seen.append(batches.plan(0))
        return trainer(model, cfg, batches, *args, **kwargs)

    monkeypatch.setattr(seq2seq, "Trainer", spy)
    for objective in ("permute", "infill+permute"):
        cfg = pretrain_config(tmp_path, objective, out=objective, max_steps=2)
        cfg["data"]["text"] = [str(tmp_path / "s.txt")]
        folder = seq2seq.train(seq2seq.experiment(cfg), say=quiet).folder
        tok = Tokenizer.load(folder)
        stops = denoising.sentence_stops(tok)
        pairs = [p for b in seen.pop() for p in b]
        assert len(pairs) > 10
        moved = 0
        for src, tgt in pairs:
            assert tgt[-1] == tok.token_to_id(".")  # a piece: whole paragraphs
            if objective == "permute":
                split = [denoising.noising.split_sentences(x, stops.ends, stops.word_starts)
                         for x in (src, tgt)]
                assert sorted(split[0]) == sorted(split[1]) and len(split[1]) >= 4
                moved += src != tgt
            else:
                assert tok.token_to_id("<mask>") in src
        assert objective == "infill+permute" or moved >= len(pairs) * 0.9


def test_init_model_refuses_another_family(tmp_path):
    from aiayn.training.finetune import init_model

    (tmp_path / "lm").mkdir()
    (tmp_path / "lm" / "config.json").write_text(json.dumps({"family": "decoder_lm", "model": {}}))
    with pytest.raises(UserError, match="not a translation model"):
        init_model("transformer", tmp_path / "lm", {"init": str(tmp_path / "lm")})
