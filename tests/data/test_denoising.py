"""Denoising pretraining data: the objectives' tokens in the tokenizer (saved with it), documents
from text files, and a fresh, reproducible corruption of each document every epoch."""

from collections import Counter

import pytest

from aiayn.config import ConfigError
from aiayn.data import denoising as d
from aiayn.data.noising import fill_spans, split_sentences, t5_sentinels
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


@pytest.mark.parametrize("objective", ["span", "infill"])
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


# -- sentence permutation (BART, Lewis et al. 2020 §2.2) -----------------------------------------

PROSE = ["Return the path. It joins os.path.join(a, b). See also x (in y.) Pi is 3.14 here. "
         'He said "stop." Then it ends'] * 20


@pytest.fixture(scope="module")
def prose_tok():
    return d.add_objective_tokens(Tokenizer.train(PROSE, 200), "infill+permute")


def test_sentence_stops_are_full_stops_before_a_new_word(prose_tok):
    """BART §2.2: "a document is divided into sentences based on full stops"; "os.path" and
    "3.14" are not sentence ends, ".)" and '."' are."""
    stops = d.sentence_stops(prose_tok)
    ids = prose_tok.encode(PROSE[0])
    sentences = [prose_tok.decode(s) for s in split_sentences(ids, stops.ends, stops.word_starts)]
    assert sentences == ["Return the path.", "It joins os.path.join(a, b).", "See also x (in y.)",
                         "Pi is 3.14 here.", 'He said "stop."', "Then it ends"]
    assert prose_tok.token_to_id("<mask>") not in stops.ends | stops.word_starts


def sentence_multiset(ids, stops):
    return Counter(map(tuple, split_sentences(ids, stops.ends, stops.word_starts)))


@pytest.mark.parametrize("objective", ["permute", "infill+permute"])
def test_permutation_objectives_target_the_document_and_shuffle_its_sentences(prose_tok, objective):
    stops, special = d.sentence_stops(prose_tok), d.objective_ids(prose_tok, objective)
    assert special == ([] if objective == "permute" else [prose_tok.token_to_id("<mask>")])
    doc = prose_tok.encode(PROSE[0] + ".")  # 6 sentences, the last one's stop added
    one = prose_tok.encode("Only one sentence here.")
    pairs = [p for epoch in range(200) for p in
             d.corrupt_documents([doc, one], objective, special, 3, epoch, 128, stops=stops)]
    assert all(tgt == ids for (_, tgt), ids in zip(pairs, [doc, one] * 200, strict=True))
    sources = [src for src, _ in pairs[0::2]]
    if objective == "permute":  # the same sentences, in a new order; one sentence: the identity
        assert all(sentence_multiset(src, stops) == sentence_multiset(doc, stops) for src in sources)
        assert all(src == one for src, _ in pairs[1::2])
        # the first sentence is each of the 6 about equally often (200 draws: 33 expected each)
        firsts = Counter(prose_tok.decode(split_sentences(src, stops.ends, stops.word_starts)[0])
                         for src in sources)
        assert len(firsts) == 6 and min(firsts.values()) >= 15 and max(firsts.values()) <= 55
    else:  # infilled after the shuffle: <mask>s in; "Return the path." first in only ~1/6
        assert all(special[0] in src and len(src) < len(doc) for src in sources)
        first_word = prose_tok.token_to_id("▁Return")
        assert sum(first_word in src[:3] for src in sources) < 70
    assert len(set(map(tuple, sources))) > 150  # a fresh draw nearly every epoch
    with pytest.raises(ValueError, match="needs the sentence stops"):
        d.corrupt_documents([doc], objective, special, 3, 0, 128)


def test_the_config_takes_the_permutation_objectives_and_refuses_others_in_one_line():
    from aiayn.tasks.seq2seq import DataConfig
    for objective in d.OBJECTIVES:
        assert DataConfig(text=["a.txt"], objective=objective).objective == objective
    with pytest.raises(ConfigError) as e:
        DataConfig(text=["a.txt"], objective="shuffle")
    assert str(e.value) == ("invalid config: objective='shuffle': must be one of span, infill, "
                            "permute, infill+permute")
