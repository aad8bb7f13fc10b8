"""ROUGE as the papers report it (F-measure, stemmed, mean over pairs) and the lead baseline."""

import pytest

from aiayn.summarization import lead, rouge_scores


def test_rouge_hand_computed():
    # unigrams: 3 of 3 hypothesis words in a 6-word reference: P 1, R 1/2, F 2/3
    # bigrams: 2 of 2 in 5: P 1, R 2/5, F 4/7; LCS 3: as unigrams
    scores = rouge_scores(["the cat sat"], ["the cat sat on the mat"])
    assert scores == {"rouge1": 66.67, "rouge2": 57.14, "rougeL": 66.67}


def test_rouge_stems_lowercases_and_averages_over_pairs():
    same = rouge_scores(["Returns the Values."], ["return the value"])
    assert same == {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0}  # Porter stemmer
    mean = rouge_scores(["a b", "x y"], ["a b", "c d"])  # 100 and 0
    assert mean == {"rouge1": 50.0, "rouge2": 50.0, "rougeL": 50.0}
    assert rouge_scores(["b a"], ["a b"])["rougeL"] == 50.0  # order matters for the LCS
    assert rouge_scores([], []) == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    with pytest.raises(ValueError):
        rouge_scores(["a"], [])


def test_rouge_matches_the_package_called_directly():
    from rouge_score import rouge_scorer

    hyps = ["Return the path joined with os.path.join.", "Open a file", "nothing in common"]
    refs = ["Join two paths and return the result.", "Open the file for reading.", "zzz"]
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    each = [scorer.score(r, h) for h, r in zip(hyps, refs, strict=True)]
    expected = {k: round(sum(s[k].fmeasure for s in each) / 3 * 100, 2)
                for k in ("rouge1", "rouge2", "rougeL")}
    assert rouge_scores(hyps, refs) == expected


def test_lead_is_the_first_sentence():
    text = "Return the sum, e.g. 3 for 1 and 2. Raise an error otherwise! Why? Because."
    assert lead(text) == "Return the sum, e.g. 3 for 1 and 2."
    assert lead(text, 2) == "Return the sum, e.g. 3 for 1 and 2. Raise an error otherwise!"
    assert lead(text, 10) == text
    assert lead("  no full stop at all  ") == "no full stop at all"
    assert lead("Version 3.12 added it. Then more.") == "Version 3.12 added it."
    assert lead("") == ""
    with pytest.raises(ValueError):
        lead(text, 0)


# -- ROUGE in validation during training (seq2seq.make_evaluate) ------------------------------

def test_validation_reports_rouge_for_summaries_usable_by_stop_when(tmp_path, monkeypatch):
    """A summarization run's evaluation adds valid_rouge1/2/rougeL, rouge_scores of the decoded
    outputs against the references, by hand: "the cat sat" for "the cat sat on the mat" (66.67 /
    57.14 / 66.67, as above) and an exact one (100): means 83.33 / 78.57 / 83.33."""
    import json

    from aiayn import Transformer, preset
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.tasks import seq2seq
    from aiayn.training.progress import StopRule

    refs, outputs = ["the cat sat on the mat", "open the file"], ["the cat sat", "open the file"]
    tok = Tokenizer.train(["a cat sat on the mat. open the file"] * 5 + refs, 150)
    valid_ids = [(tok.encode("the body " + r), tok.encode(r)) for r in refs]
    monkeypatch.setattr(seq2seq, "decode_ids", lambda model, src, **kw: tok.encode_batch(
        [outputs[refs.index(tok.decode(s)[len("the body "):])] for s in src]))
    model = Transformer(preset("tiny", vocab_size=tok.vocab_size)).eval().requires_grad_(False)
    summaries = seq2seq.DataConfig(corpus="stdlib-docstrings")
    assert seq2seq.reports_rouge(summaries)
    scores = seq2seq.make_evaluate(tok, valid_ids, summaries, 0.1, 1000)(model)
    assert {k: scores[k] for k in ("valid_rouge1", "valid_rouge2", "valid_rougeL")} == \
        {"valid_rouge1": 83.33, "valid_rouge2": 78.57, "valid_rougeL": 83.33}
    assert scores["valid_exact_match"] == 50.0 and scores["valid_loss"] > 0
    rule = StopRule("valid_rougeL>=80", 1)
    assert rule.update(scores) and "valid_rougeL 83.33 >= 80" in rule.why()
    # a translation corpus scores no ROUGE unless asked; an objective's targets are not summaries
    plain = seq2seq.DataConfig(corpus="gettext")
    assert "valid_rouge1" not in seq2seq.make_evaluate(tok, valid_ids, plain, 0.1, 1000)(model)
    assert seq2seq.reports_rouge(seq2seq.DataConfig(corpus="gettext", valid_rouge=True))
    assert not seq2seq.reports_rouge(seq2seq.DataConfig(corpus="stdlib-docstrings",
                                                                objective="span"))
    assert not seq2seq.reports_rouge(seq2seq.DataConfig(corpus="stdlib-docstrings",
                                                                valid_rouge=False))
    # a corpus folder `aiayn data stdlib-docstrings --out DIR` wrote names its corpus
    (tmp_path / "stats.json").write_text(json.dumps({"corpus": "stdlib-docstrings"}))
    assert seq2seq.reports_rouge(seq2seq.DataConfig(corpus_dir=str(tmp_path)))
    (tmp_path / "stats.json").write_text("[]")
    assert not seq2seq.reports_rouge(seq2seq.DataConfig(corpus_dir=str(tmp_path)))
