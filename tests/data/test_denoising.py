"""Denoising pretraining data: the objectives' tokens in the tokenizer (saved with it), documents
from text files, and a fresh, reproducible corruption of each document every epoch."""

import pytest

from aiayn.data import denoising as d
from aiayn.data.noising import fill_spans, t5_sentinels
from aiayn.data.special import EOS
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError

TEXT = ["the cat sat on the mat and the dog ran to the red door"] * 20


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.train(TEXT, 120)


def test_objective_tokens_are_special_saved_and_the_sentinels_t5s_last_ids(tok, tmp_path):
    plain = tok.vocab_size
    span = d.add_objective_tokens(Tokenizer.load(tok.save(tmp_path / "a")), "span")
    span.save(tmp_path / "b")
    back = Tokenizer.load(tmp_path / "b")
    assert back.vocab_size == plain + 100 and back.to_json() == span.to_json()
    assert d.objective_ids(back, "span") == t5_sentinels(back.vocab_size)  # <extra_id_0> last
    assert back.decode([5, d.objective_ids(back, "span")[0], 6]) == back.decode([5, 6])
    infill = d.add_objective_tokens(Tokenizer.load(tmp_path / "a"), "infill")
    assert d.objective_ids(infill, "infill") == [plain]
    with pytest.raises(UserError, match="no <extra_id_0> token: it was not trained"):
        d.objective_ids(tok, "span")


def test_documents_are_paragraphs_cut_to_the_models_length(tok, tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("one two\n  three\n\n\nfour\tfive\n", encoding="utf-8")
    assert d.read_documents([f, f]) == ["one two three", "four five"] * 2
    class Ids:  # a tokenizer whose "texts" are their ids already
        encode_batch = staticmethod(lambda docs: [list(doc) for doc in docs])

    def pieces(*docs, max_len):
        return d.encode_documents(Ids(), [list(x) for x in docs], max_len)

    # whole documents share a piece while they fit; a longer one is cut, its tail going on
    assert pieces(range(3), range(10, 12), range(20, 22), max_len=6) == \
        [[0, 1, 2, 10, 11], [20, 21]]
    assert pieces(range(2), range(10, 22), [30], max_len=6) == \
        [[0, 1], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19], [20, 21, 30]]
    assert pieces([1], [2], max_len=2) == []  # pieces of 1 token: nothing to corrupt
    assert d.encode_documents(tok, [TEXT[0]] * 2, 64) == [tok.encode(TEXT[0]) * 2]
    with pytest.raises(UserError, match="text file not found"):
        d.read_documents([tmp_path / "missing.txt"])


@pytest.mark.parametrize("objective", d.OBJECTIVES)
def test_each_epoch_a_fresh_corruption_drawn_from_seed_and_epoch(tok, objective):
    docs = [list(range(10, 10 + n)) for n in (20, 40, 60, 80)]
    special = [400] if objective == "infill" else t5_sentinels(500)
    e0 = d.corrupt_documents(docs, objective, special, seed=1, epoch=0, max_len=128)
    assert e0 == d.corrupt_documents(docs, objective, special, seed=1, epoch=0, max_len=128)
    assert e0 != d.corrupt_documents(docs, objective, special, seed=1, epoch=1, max_len=128)
    assert e0 != d.corrupt_documents(docs, objective, special, seed=2, epoch=0, max_len=128)
    for doc, (src, tgt) in zip(docs, e0, strict=True):
        if objective == "span":  # the target is the spans: filled back in, the document
            assert fill_spans(src, tgt, special) == doc and tgt[0] == special[0]
        else:  # BART: the target is the original text, the input has one <mask> per span
            assert tgt == doc and 400 in src and len(src) < len(doc)
    with_eos = d.corrupt_documents(docs, objective, special, 1, 0, 128, source_eos=True)
    assert [s for s, _ in with_eos] == [s + [EOS] for s, _ in e0]
    batches = d.epoch_batches(docs, objective, special, 1, 0, 128, max_tokens=200)
    assert sorted(p for b in batches for p in b) == sorted(e0)
