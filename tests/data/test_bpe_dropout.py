"""BPE-dropout (data.bpe_dropout): p = 0 is the tokenizer's own BPE over a real corpus; p > 0
gives other segmentations of the same text from the same vocabulary, drawn from (seed, epoch);
a run trained with it resumes exactly; bad settings are one-line errors."""

import random

import pytest
import torch

from aiayn.data.bpe_dropout import BpeDropout
from aiayn.data.gettext_corpus import gettext_pairs
from aiayn.data.special import EOS, UNK
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.folder import load_model
from aiayn.folder.checkpoint import load_train_state
from aiayn.tasks import seq2seq
from tests.builders import digit_pairs, write_pairs


@pytest.fixture(scope="module")
def corpus():
    """3,000 real pairs (gettext en-de) and a 2k BPE vocabulary learned on them."""
    pairs = gettext_pairs("de")["train"][:3000]
    texts = [s for p in pairs for s in p]
    return texts, Tokenizer.train(texts, 2000)


def test_without_dropout_it_is_the_tokenizers_own_bpe(corpus):
    texts, tok = corpus
    bpe = BpeDropout(tok)
    assert bpe.encode([bpe.words(t) for t in texts], 0.0, random.Random(0)) == \
        tok.encode_batch(texts)


def test_dropout_segments_the_same_text_anew_from_the_same_vocabulary(corpus):
    texts, tok = corpus
    bpe = BpeDropout(tok)
    words = [bpe.words(t) for t in texts]
    plain = tok.encode_batch(texts)
    dropped = bpe.encode(words, 0.1, random.Random(0))
    assert [tok.decode(ids) for ids in dropped] == [tok.decode(ids) for ids in plain]
    assert sum(i == UNK for ids in dropped for i in ids) == sum(i == UNK for ids in plain for i in ids)
    changed = sum(a != b for a, b in zip(dropped, plain, strict=True)) / len(texts)
    longer = sum(map(len, dropped)) / sum(map(len, plain))
    assert 0.3 < changed < 0.95 and 1.05 < longer < 1.5, (changed, longer)  # 0.63, 1.17
    # every merge skipped: characters; the same draws give the same pieces, others others
    chars = bpe.encode(words[:50], 0.999999, random.Random(0))
    assert all(len(ids) == sum(map(len, w)) for ids, w in zip(chars, words[:50], strict=True))
    assert bpe.encode(words, 0.1, random.Random(0)) == dropped
    assert bpe.encode(words, 0.1, random.Random(1)) != dropped


def tiny(tmp, **data):
    write_pairs(digit_pairs(600, 1), tmp / "train.src", tmp / "train.tgt")
    write_pairs(digit_pairs(20, 2), tmp / "valid.src", tmp / "valid.tgt")
    return {"out": str(tmp / "model"),
            "model": {"preset": "tiny", "d_model": 32, "d_ff": 64, "dropout": 0.1},
            "data": {"train_src": str(tmp / "train.src"), "train_tgt": str(tmp / "train.tgt"),
                     "valid_src": str(tmp / "valid.src"), "valid_tgt": str(tmp / "valid.tgt"),
                     "vocab_size": 130, "valid_pairs": 20, "bpe_dropout": 0.1, **data},
            "train": {"max_steps": 12, "max_tokens": 3000, "lr": 3e-3, "warmup_steps": 5,
                      "eval_every": 0, "save_every": 5, "log_every": 5, "tensorboard": False,
                      "progress": False, "threads": 1, "precision": "fp32"}}


def test_training_batches_change_by_epoch_and_come_back_the_same(tmp_path):
    exp = seq2seq.experiment(tiny(tmp_path, source_eos=True))
    pairs = seq2seq.load_pairs(exp.data)["train"]
    tok = Tokenizer.train([s for p in pairs for s in p], 130)
    stream = seq2seq.bpe_dropout_batches(tok, pairs, exp.data, 64, 3000, seed=3)
    epoch0, again, epoch1 = stream.plan(0), stream.plan(0), stream.plan(1)
    assert epoch0 == again and epoch0 != epoch1
    flat = [pair for batch in epoch0 for pair in batch]
    assert len(flat) == len(pairs) and all(s[-1] == EOS for s, _ in flat)
    assert sorted(tok.decode(t) for _, t in flat) == sorted(t for _, t in pairs)


def weights(folder):
    return load_model(folder)[0].state_dict()


def resumes_exactly(tmp, cfg, stop_at: int, without: str) -> None:
    """The run of `cfg` stopped after `stop_at` updates (into its second epoch, mid-epoch) and
    resumed ends with bitwise the weights of the straight run, so the epoch's examples were
    drawn again; the same run `without` the setting (key=value) ends elsewhere."""
    quiet = lambda _: None  # noqa: E731
    straight = seq2seq.train(seq2seq.experiment(cfg), say=quiet).folder
    half = seq2seq.experiment(cfg, [f"train.max_steps={stop_at}"], out=tmp / "half")
    seq2seq.train(half, say=quiet)
    stopped = load_train_state(tmp / "half")["data"]
    assert stopped["epoch"] >= 1 and stopped["index"] >= 1
    resumed = seq2seq.train(seq2seq.experiment(cfg, out=tmp / "half"), resume=True,
                            say=quiet).folder
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    plain = seq2seq.train(seq2seq.experiment(cfg, [without], out=tmp / "p"), say=quiet).folder
    assert not all(torch.equal(a[k], v) for k, v in weights(plain).items())


def test_a_resumed_run_with_bpe_dropout_is_the_uninterrupted_one(tmp_path):
    """12 updates over epochs of 6 batches, stopped at 7: the segmentations are drawn again."""
    resumes_exactly(tmp_path, tiny(tmp_path), 7, "data.bpe_dropout=0")


@pytest.mark.parametrize("setting, says", [
    ("data.bpe_dropout=1", "must be in [0, 1)"),
    ("data.bpe_dropout=-0.1", "must be in [0, 1)"),
    ("data.tokenizer=unigram", "data.tokenizer=bpe"),
])
def test_bad_settings_are_one_line_errors(tmp_path, setting, says):
    with pytest.raises(UserError) as err:
        seq2seq.experiment(tiny(tmp_path), [setting])
    assert "bpe_dropout" in str(err.value) and says in str(err.value)
    assert "\n" not in str(err.value)
