"""Concatenation augmentation (data.concat): a join's ids are the ids of the two texts joined
by a space, over a real corpus; an epoch holds every training pair once and share x N joins of
two different pairs, drawn from (seed, epoch); a run trained with it resumes exactly; bad
settings are one-line errors."""

import random
from collections import Counter

import pytest

from aiayn.data.concat import concatenated
from aiayn.data.gettext_corpus import gettext_pairs
from aiayn.data.special import EOS
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.tasks import seq2seq
from tests.data.test_bpe_dropout import resumes_exactly, tiny


@pytest.fixture(scope="module")
def corpus():
    """2,000 real pairs (gettext en-de), a 2k BPE vocabulary learned on them, their ids."""
    pairs = gettext_pairs("de")["train"][:2000]
    tok = Tokenizer.train([s for p in pairs for s in p], 2000)
    return pairs, tok, seq2seq.encode_pairs(tok, pairs, 10_000)


def test_a_join_is_the_two_texts_with_a_space_between(corpus):
    pairs, tok, ids = corpus
    joined = concatenated(ids, 0.5, random.Random(0), 10_000)
    assert len(joined) == 1000
    by_src = {tuple(s): t for s, t in ids}
    texts = {tuple(s): (a, b) for (s, _), (a, b) in zip(ids, pairs, strict=True)}
    for src, tgt in joined[:200]:
        # which two pairs: the first's source is a prefix, the rest the second's whole source
        cut = next(n for n in range(1, len(src)) if tuple(src[:n]) in by_src
                   and tuple(src[n:]) in by_src)
        first, second = tuple(src[:cut]), tuple(src[cut:])
        assert tgt == by_src[first] + by_src[second]
        assert tok.decode(src) == f"{texts[first][0]} {texts[second][0]}"
        assert tok.decode(tgt) == f"{texts[first][1]} {texts[second][1]}"
    assert concatenated(ids, 0.5, random.Random(0), 10_000) == joined
    assert concatenated(ids, 0.5, random.Random(1), 10_000) != joined


def test_joins_fit_the_positions_and_never_join_a_pair_to_itself():
    ids = [([10 + i] * (i + 1), [100 + i] * (i + 1)) for i in range(8)]  # i + 1 tokens a side
    joined = concatenated(ids, 4, random.Random(0), max_len=9)
    assert joined and all(len(s) <= 9 and len(t) + 1 <= 9 for s, t in joined)
    assert all(len(set(s)) == 2 for s, _ in joined)  # two different pairs in each
    # 32 drawn, those over 9 positions dropped: pair lengths i + j + 2 <= 8 only
    assert len(joined) < 32
    assert concatenated(ids[:1], 1, random.Random(0), 9) == [] == concatenated(ids, 0, None, 9)
    # sources that end with </s>: the first one's is dropped in the join
    eos = [(s + [EOS], t) for s, t in ids]
    for src, _ in concatenated(eos, 1, random.Random(0), 20, source_eos=True):
        assert src[-1] == EOS and src.count(EOS) == 1


def test_an_epoch_holds_every_pair_once_and_its_joins(tmp_path):
    exp = seq2seq.experiment(tiny(tmp_path, bpe_dropout=0.0, concat=0.5, source_eos=True))
    pairs = seq2seq.load_pairs(exp.data)["train"]
    tok = Tokenizer.train([s for p in pairs for s in p], 130)
    ids = seq2seq.encode_pairs(tok, pairs, 64, source_eos=True)
    stream = seq2seq.epoch_batches(lambda _: list(ids), exp.data, 64, 3000, seed=3)
    epoch0, again, epoch1 = stream.plan(0), stream.plan(0), stream.plan(1)
    assert epoch0 == again and epoch0 != epoch1
    flat = Counter((tuple(s), tuple(t)) for batch in epoch0 for s, t in batch)
    own = Counter((tuple(s), tuple(t)) for s, t in ids)
    assert flat & own == own  # every training pair (with its </s>) once
    extra = flat - own
    assert sum(extra.values()) == round(0.5 * len(ids))
    assert all(s.count(EOS) == 1 and s[-1] == EOS for s, _ in extra)
    # with BPE-dropout too: the joins are of that epoch's segmentations
    dropped = seq2seq.bpe_dropout_batches(tok, pairs, exp.data.replace(bpe_dropout=0.1), 64,
                                          3000, seed=3).plan(0)
    assert sum(map(len, dropped)) == len(pairs) + round(0.5 * len(pairs))


def test_a_resumed_run_with_concat_is_the_uninterrupted_one(tmp_path):
    """12 updates over epochs of 7 batches (600 pairs and 600 joins), stopped at 9: the joins
    are drawn again."""
    cfg = tiny(tmp_path, bpe_dropout=0.0, concat=1.0)
    cfg["train"]["max_tokens"] = 6000
    resumes_exactly(tmp_path, cfg, 9, "data.concat=0")


@pytest.mark.parametrize("setting, says", [
    ("data.concat=-0.5", "must be in [0, 4]"),
    ("data.concat=5", "must be in [0, 4]"),
    ("data.objective=span", "not to an objective"),
])
def test_bad_settings_are_one_line_errors(tmp_path, setting, says):
    with pytest.raises(UserError) as err:
        seq2seq.experiment(tiny(tmp_path, bpe_dropout=0.0, concat=1.0), [setting])
    assert "concat" in str(err.value) and says in str(err.value)
    assert "\n" not in str(err.value)
