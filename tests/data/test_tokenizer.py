"""The joint subword tokenizer: specials at 0-3, exact round trips, determinism, files."""

import hashlib
import json
import subprocess
import sys

import pytest

from aiayn.data import special
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import UserError

TEXTS = [
    "Tuesday, March 5, 2024", "Dienstag, 5. März 2024", "thirty-four", "vierunddreißig",
    "Die Straße ist größer als der Fluss, aber Ärger gibt's über Öl & Übel.",
    "Could not open file “%s”: %d (errno) — 100% sure?", "»%s« konnte nicht gelesen werden!",
    "one thousand, two hundred and thirty-four", "eintausendzweihundertvierunddreißig",
    "Datei 'x.txt' [3/7] {ok} <b>fett</b> a+b=c; #1 @home ~/tmp $HOME ^_^ |pipe| \\back",
] * 20
ROUND_TRIP = [
    "Größere Übel: Ärger, Öl und Maß — 1234 Straßen!",
    "March 5, 2024 -> 5. März 2024 (05.03.24)",
    "a  b",  # two spaces
    "trailing space ",
    "9876543210",
    "x=3.5%; y=[1, 2]; \"quoted\" 'single' ?!",
]
KINDS = ("bpe", "unigram")


@pytest.fixture(scope="module", params=KINDS)
def tok(request):
    return Tokenizer.train(TEXTS, 300, kind=request.param)


def test_specials_have_ids_0_to_3(tok):
    assert special.SPECIAL_TOKENS == ("<pad>", "<s>", "</s>", "<unk>")
    assert (special.PAD, special.BOS, special.EOS, special.UNK) == (0, 1, 2, 3)
    assert [tok.id_to_token(i) for i in range(4)] == list(special.SPECIAL_TOKENS)
    for i, token in enumerate(special.SPECIAL_TOKENS):
        assert tok.token_to_id(token) == i


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_decode_encode_round_trip(tok, text):
    ids = tok.encode(text)
    assert special.UNK not in ids
    assert tok.decode(ids) == text


def test_encode_adds_no_specials_and_decode_skips_them(tok):
    ids = tok.encode("Dienstag, 5. März 2024")
    assert not set(ids) & {special.PAD, special.BOS, special.EOS, special.UNK}
    padded = [special.BOS, *ids, special.EOS, special.PAD, special.PAD]
    assert tok.decode(padded) == "Dienstag, 5. März 2024"


def test_unseen_character_is_unk_and_dropped(tok):
    ids = tok.encode("a ☃ b")
    assert special.UNK in ids
    assert "☃" not in tok.decode(ids)


def test_digits_are_single_tokens(tok):
    assert tok.tokens("2024")[-4:] == ["2", "0", "2", "4"]


def test_letters_digits_and_punctuation_never_share_a_token(tok):
    """A placeholder in quotes is three tokens, not one per quoting style (as SentencePiece)."""
    assert "s" in tok.tokens("»%s«")  # "s" alone, whichever pieces the quotes make
    assert "-" in tok.tokens("thirty-four")
    for token in tok.hf.get_vocab():
        if token in special.SPECIAL_TOKENS:
            continue
        body = token.removeprefix("▁")
        kinds = {"letter" if c.isalpha() else "digit" if c.isdigit() else "other" for c in body}
        assert len(kinds) <= 1, f"{token!r} mixes {sorted(kinds)}"


def test_tokens_spell_the_text(tok):
    text = "Dienstag, 5. März 2024"
    pieces = tok.tokens(text)
    assert len(pieces) == len(tok.encode(text))
    assert "".join(pieces).replace("▁", " ").strip() == text


def test_encode_batch_matches_encode(tok):
    assert tok.encode_batch(ROUND_TRIP) == [tok.encode(t) for t in ROUND_TRIP]


def test_vocab_size(tok):
    assert 4 < tok.vocab_size <= 300
    assert len(tok) == tok.vocab_size


def _digest(tok: Tokenizer) -> str:
    return hashlib.sha256(tok.hf.to_str().encode()).hexdigest()


def test_training_is_deterministic_in_process_and_order_independent(tok):
    kind = type(tok.hf.model).__name__.lower()
    again = Tokenizer.train(list(reversed(TEXTS)), 300, kind=kind)
    assert _digest(again) == _digest(tok)


def test_training_is_deterministic_across_processes(tmp_path):
    # Rust hash maps are seeded per process: the unigram trainer's raw output differs between
    # runs, so this is the test that catches a missing canonicalisation.
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(TEXTS), encoding="utf-8")
    code = (
        "import hashlib, json, sys\n"
        "from aiayn.data.tokenizer import Tokenizer\n"
        f"texts = json.load(open({str(texts_file)!r}, encoding='utf-8'))\n"
        "for kind in ('bpe', 'unigram'):\n"
        "    t = Tokenizer.train(texts, 300, kind=kind)\n"
        "    print(hashlib.sha256(t.hf.to_str().encode()).hexdigest())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    here = [_digest(Tokenizer.train(TEXTS, 300, kind=k)) for k in KINDS]
    assert out.stdout.split() == here


def test_save_load_round_trip(tok, tmp_path):
    path = tok.save(tmp_path / "model")
    assert path == tmp_path / "model" / "tokenizer.json"
    loaded = Tokenizer.load(tmp_path / "model")
    assert loaded.encode(ROUND_TRIP[0]) == tok.encode(ROUND_TRIP[0])
    assert loaded.decode(tok.encode(ROUND_TRIP[0])) == ROUND_TRIP[0]
    assert Tokenizer.load(path).vocab_size == tok.vocab_size  # the file itself works too


def test_load_missing_names_path(tmp_path):
    with pytest.raises(UserError, match=str(tmp_path / "nowhere" / "tokenizer.json")):
        Tokenizer.load(tmp_path / "nowhere")


def test_load_corrupt_names_path(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{ not json", encoding="utf-8")
    with pytest.raises(UserError, match="tokenizer.json: not a valid tokenizer file") as e:
        Tokenizer.load(tmp_path)
    assert str(tmp_path) in str(e.value)
    assert "\n" not in str(e.value)


def test_load_rejects_other_special_ids(tok, tmp_path):
    data = json.loads(tok.hf.to_str())
    data["added_tokens"][0]["content"] = "[PAD]"
    vocab = data["model"]["vocab"]
    if isinstance(vocab, dict):  # BPE: token -> id
        vocab["[PAD]"] = vocab.pop("<pad>")
    else:  # unigram: [token, score] in id order
        vocab[0][0] = "[PAD]"
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UserError, match="special tokens"):
        Tokenizer.load(tmp_path)


@pytest.mark.parametrize("kind, size", [("wordpiece", 300), ("bpe", 10), ("bpe", True)])
def test_bad_training_settings(kind, size):
    with pytest.raises(UserError):
        Tokenizer.train(TEXTS, size, kind=kind)


def test_byte_level_tokens_are_displayed_as_the_text_they_encode():
    from tokenizers import ByteLevelBPETokenizer

    hf = ByteLevelBPETokenizer()
    hf.train_from_iterator(["the fox said café, the fox said olé"] * 20, vocab_size=280)
    tok = Tokenizer(hf._tokenizer, check_specials=False)
    ids = tok.encode(" fox café")
    raw = [tok.id_to_token(i) for i in ids]
    shown = [tok.display_token(i) for i in ids]
    assert any(t.startswith("Ġ") for t in raw) and not any("Ġ" in t or "Ã" in t for t in shown)
    assert "".join(shown) == "▁fox▁café"
    metaspace = Tokenizer.train(["the fox said café"] * 20, 200)
    assert [metaspace.display_token(i) for i in metaspace.encode("the fox")] == \
        [metaspace.id_to_token(i) for i in metaspace.encode("the fox")]
