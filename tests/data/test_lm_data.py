"""Language-model data: the python-stdlib corpus, byte-level BPE / character tokenizers,
resumable block batches, and scoring (each token predicted once)."""

import math

import pytest
import torch

from aiayn.config import lm_preset
from aiayn.data.special import BOS, EOS
from aiayn.data.stdlib_corpus import (
    load_text_corpus,
    python_stdlib,
    shared_documents,
    split_of,
    stdlib_files,
)
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError
from aiayn.models import DecoderLM
from aiayn.tasks.language_model import (
    LMDataConfig,
    block_batches,
    doc_tokens,
    hold_out_tail,
    lm_loss,
    read_documents,
    score_documents,
    score_tokens,
)

SAMPLE = ["def f(x):\n    return x + 1\n", "class A:\n\tpass  # naïve ünïcode → ✓\r\n",
          "import os\n\nprint(os.sep)\n"] * 3


@pytest.fixture(scope="module")
def corpus():
    return python_stdlib(max_bytes=600_000)


def test_stdlib_splits_share_no_file_and_are_deterministic(corpus):
    assert shared_documents(corpus) == set()
    assert all(corpus[s] for s in ("train", "valid", "test"))
    names = {s: [n for n, _ in docs] for s, docs in corpus.items()}
    assert all(split_of(n, 0.05, 0.05) == s for s, ns in names.items() for n in ns)
    again = load_text_corpus("python-stdlib", max_bytes=600_000)
    assert {s: [n for n, _ in d] for s, d in again.items()} == names


def test_stdlib_leaves_out_tests_and_respects_the_cap(corpus):
    everything = stdlib_files()
    assert not [n for n in everything if "/test/" in f"/{n}" or "/tests/" in f"/{n}"
                or n.rsplit("/", 1)[-1].startswith("test_") or "site-packages" in n]
    assert any(n.startswith("json/") for n in everything)
    total = sum(len(t.encode()) for docs in corpus.values() for _, t in docs)
    largest = max(len(t.encode()) for docs in corpus.values() for _, t in docs)
    assert 600_000 <= total < 600_000 + largest


def test_stdlib_bad_options_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="valid_frac"):
        python_stdlib(valid_frac=0.6, test_frac=0.5)
    with pytest.raises(UserError, match="no source files"):
        python_stdlib(root=tmp_path)
    with pytest.raises(UserError, match="unknown text corpus 'nope'"):
        load_text_corpus("nope")


@pytest.mark.parametrize("kind, size", [("byte_bpe", 300), ("char", 100)])
def test_lm_tokenizers_round_trip_exactly(kind, size, tmp_path):
    tok = Tokenizer.train(SAMPLE, size, kind)
    for text in SAMPLE + ["    x + 1\n\n\t\tpass\r\n"]:
        assert tok.decode(tok.encode(text)) == text
    tok.save(tmp_path)
    again = Tokenizer.load(tmp_path)
    assert again.encode(SAMPLE[1]) == tok.encode(SAMPLE[1])
    assert [tok.id_to_token(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_byte_bpe_never_needs_unk_and_char_drops_unseen():
    text = "漢字 and emoji 🙂 never seen"
    byte_bpe = Tokenizer.train(SAMPLE, 300, "byte_bpe")
    assert byte_bpe.decode(byte_bpe.encode(text)) == text and 3 not in byte_bpe.encode(text)
    char = Tokenizer.train(SAMPLE, 100, "char")
    assert 3 in char.encode(text)  # <unk> for unseen characters, dropped by decode
    assert len(char.encode("def f")) == 5  # one token per character
    with pytest.raises(UserError, match="too small for kind 'byte_bpe'"):
        Tokenizer.train(SAMPLE, 100, "byte_bpe")


def test_block_batches_cover_the_stream_and_resume_exactly():
    tokens = torch.arange(1000)
    stream = block_batches(tokens, 10, 8, seed=3)
    first_epoch = [next(stream) for _ in range(13)]  # 99 blocks: 12 batches of 8 and one of 3
    rows = torch.cat(first_epoch)
    assert rows.shape == (99, 11)
    assert torch.equal(rows[:, 1:] - rows[:, :-1], torch.ones(99, 10, dtype=torch.long))
    assert sorted(rows[:, 0].tolist()) == list(range(0, 990, 10))  # every block once
    state = stream.state_dict()
    ahead = [next(stream) for _ in range(5)]
    resumed = block_batches(tokens, 10, 8, seed=3)
    resumed.load_state_dict(state)
    assert all(torch.equal(a, b) for a, b in zip(ahead, [next(resumed) for _ in range(5)], strict=True))
    assert ahead[0][0, 0] % 10 != 0 or ahead[1][0, 0] % 10 != 0  # epoch 1 is shifted
    with pytest.raises(UserError, match="too few for one block"):
        next(block_batches(torch.arange(5), 10, 8, seed=0))


def test_hold_out_tail_and_read_documents(tmp_path):
    train, valid = hold_out_tail([("a", "".join(f"line {i}\n" for i in range(20)))], 0.1)
    assert train[0][1].count("\n") == 18 and valid[0][1] == "line 18\nline 19\n"
    assert hold_out_tail([("b", "one line")], 0.1) == ([("b", "one line")], [])
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="bad.txt: not UTF-8"):
        read_documents([tmp_path / "bad.txt"])
    with pytest.raises(UserError, match="missing.txt: no such file"):
        read_documents([tmp_path / "missing.txt"])
    with pytest.raises(ValueError, match="tokenizer='wordpiece'"):
        LMDataConfig(tokenizer="wordpiece")


def test_scoring_predicts_each_token_once_and_bits_per_byte():
    torch.manual_seed(0)
    model = DecoderLM(lm_preset("tiny", vocab_size=300, max_len=64)).eval()
    tokens = torch.randint(4, 300, (1, 45))[0]
    nll, n = score_tokens(model, tokens, block_len=16, batch_size=2)
    assert n == 44  # 16 + 16 + 12: every token but the first, once
    with torch.no_grad():
        expected = sum(float(lm_loss(model, tokens[s:s + 17][None])[0]) for s in (0, 16, 32))
    assert math.isclose(nll, expected, rel_tol=1e-5)
    tok = Tokenizer.train(SAMPLE, 300, "byte_bpe")
    docs = [("a", SAMPLE[0]), ("b", SAMPLE[1])]
    r = score_documents(model, tok, docs, block_len=16)
    ids = doc_tokens(tok, docs)
    assert ids[0][0] == BOS and ids[0][-1] == EOS
    assert r["tokens"] == sum(len(i) for i in ids) - 1
    assert r["bytes"] == sum(len(t.encode()) for _, t in docs)
    assert math.isclose(r["bits_per_byte"], r["loss"] * r["tokens"] / math.log(2) / r["bytes"])
    assert math.isclose(r["perplexity"], math.exp(r["loss"]))
