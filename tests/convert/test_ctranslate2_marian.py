"""An OPUS-MT-style folder imported (`aiayn import hf-marian`: swish, </s> after every source,
its own search from generation_config.json) decodes with `--engine ctranslate2` as with aiayn's
own search, and scores the same. Its own module: the OPUS-MT fixture needs transformers."""

import json

import pytest

from aiayn.cli import main
from tests.convert.test_hf_export import opus_mt_folder  # noqa: F401 (a fixture)

pytest.importorskip("ctranslate2")


@pytest.mark.slow
def test_an_imported_opus_mt_folder_decodes_and_scores_as_aiayn_with_ctranslate2(
        opus_mt_folder, tmp_path):  # noqa: F811
    from aiayn.tasks.seq2seq import Translator

    assert main(["import", "hf-marian", str(opus_mt_folder[0]), "--out", str(tmp_path / "mt")]) == 0
    meta = json.loads((tmp_path / "mt" / "config.json").read_text())
    assert meta["source_eos"] is True and meta["model"]["activation"] == "silu"
    torch_mt = Translator.load(tmp_path / "mt")
    ct2_mt = Translator.load(tmp_path / "mt", engine="ctranslate2", intra_threads=1)
    assert json.loads((tmp_path / "mt" / "ctranslate2" / "config.json").read_text())[
        "add_source_eos"] is True
    sources = ["the quick brown fox", "a cat sat on the mat", "my friend reads a book",
               "the house is small", "Café au lait"]
    targets = ["das Haus", "eine Katze", "mein Freund", "der Hund", "Größe"]
    for search in ({"beam": 1}, {}, {"early_stopping": "exact"}):  # {}: the folder's own
        assert ct2_mt.translate(sources, **search) == torch_mt.translate(sources, workers=1,
                                                                         **search)
    ours = torch_mt.score(sources, targets)
    pairs = [(torch_mt.fit_source(torch_mt.encode_source(s)), torch_mt.tokenizer.encode(t))
             for s, t in zip(sources, targets, strict=True)]
    theirs = ct2_mt.engine.score_ids(pairs)
    assert max(abs(o["logprob"] - t["logprob"]) for o, t in zip(ours, theirs, strict=True)) < 1e-4
