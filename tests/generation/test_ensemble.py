"""The ensemble (aiayn.generation.ensemble): its distribution is the mean of its members', the
cache gives what recomputing gives, the search over it is the search over that mean (greedy
against a loop that recomputes it from scratch; beam 1 == greedy; an ensemble of one model, or
of two copies, searches as the model), and a Translator / `aiayn translate` over several
folders, or a folder of an ensemble, decodes with it."""

import json

import pytest
import torch

from aiayn import Transformer, preset
from aiayn.data.special import BOS, EOS, PAD
from aiayn.errors import UserError
from aiayn.generation.config import GenerationConfig
from aiayn.generation.ensemble import Ensemble, mean_distribution
from aiayn.generation.search import beam_search, greedy_search, search_hypotheses
from aiayn.masks import padding_mask
from tests.builders import run

V = 40
IDS = {"bos_id": BOS, "eos_id": EOS, "pad_id": PAD}


def _model(seed, **overrides):
    torch.manual_seed(seed)
    model = Transformer(preset("tiny", vocab_size=V, **overrides)).double().eval()
    with torch.no_grad():  # an EOS bias per model: outputs of several lengths, not all empty
        model.output.bias = torch.nn.Parameter(torch.zeros(V, dtype=torch.double))
        model.output.bias[EOS] = -1.0 + seed
    return model


def _sources(b=5, s=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, V, (b, s), generator=g)
    lengths = torch.randint(1, s + 1, (b,), generator=g)
    src[torch.arange(s)[None] >= lengths[:, None]] = PAD
    return src


def test_distribution_is_the_mean_of_the_members():
    a, b = _model(0), _model(1, d_model=32, n_heads=2)  # members may differ in width
    ens = Ensemble([a, b])
    src, tgt = _sources(), torch.randint(4, V, (5, 6))
    with torch.no_grad():
        got = ens(src, tgt)
        want = torch.log((a(src, tgt).softmax(-1) + b(src, tgt).softmax(-1)) / 2)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert torch.allclose(got.exp().sum(-1), torch.ones(5, 6, dtype=torch.double))
    # one member: its own log-probabilities
    with torch.no_grad():
        torch.testing.assert_close(Ensemble([a])(src, tgt), a(src, tgt).log_softmax(-1))
    logits = [torch.randn(2, 3, V, dtype=torch.bfloat16)]
    assert mean_distribution(logits * 2).dtype == torch.float32  # at least float32


def test_cache_equals_recompute():
    ens = Ensemble([_model(0), _model(1)])
    src, tgt = _sources(), torch.randint(4, V, (5, 6))
    mask = padding_mask(src, PAD)
    with torch.no_grad():
        full = ens.decode(tgt, ens.encode(src, mask), mask)
        memory, cache = ens.encode(src, mask), ens.new_cache()
        steps = [ens.decode(tgt[:, t:t + 1], memory, mask, cache) for t in range(tgt.shape[1])]
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0, atol=1e-10)
    assert cache.length == tgt.shape[1]


def _greedy_from_scratch(members, src_row, max_extra=50):
    """The mean distribution recomputed over the whole prefix at every step, no cache."""
    src = src_row[src_row != PAD][None]
    out = [BOS]
    with torch.no_grad():
        for _ in range(src.shape[1] + max_extra):
            tgt = torch.tensor([out])
            lp = torch.log(sum(m(src, tgt)[0, -1].softmax(-1) for m in members) / len(members))
            lp[[PAD, BOS]] = float("-inf")
            token = int(lp.argmax())
            if token == EOS:
                break
            out.append(token)
    return out[1:]


def test_greedy_over_the_ensemble_is_greedy_over_the_mean():
    members = [_model(0), _model(1), _model(2)]
    src = _sources(b=6, seed=3)
    got = greedy_search(Ensemble(members), src, **IDS, max_extra=8)
    want = [_greedy_from_scratch(members, row, max_extra=8) for row in src]
    assert got == want
    assert len({len(x) for x in got}) > 1  # outputs of several lengths: a test that could fail
    # beam 1 == greedy; a batch gives what each sentence gives alone
    assert beam_search(Ensemble(members), src, beam=1, **IDS, max_extra=8) == got
    alone = [beam_search(Ensemble(members), row[row != PAD][None], beam=3, **IDS,
                         max_extra=8)[0] for row in src]
    assert beam_search(Ensemble(members), src, beam=3, **IDS, max_extra=8) == alone


def test_an_ensemble_of_copies_searches_as_the_model():
    model, src = _model(1), _sources(seed=4)
    config = GenerationConfig(beam=4, **IDS, max_extra=10)
    single = search_hypotheses(model, src, config)
    for ensemble in (Ensemble([model]), Ensemble([model, model])):
        hyps = search_hypotheses(ensemble, src, config)
        assert [[h.tokens for h in row] for row in hyps] == [[h.tokens for h in row]
                                                             for row in single]
        for row, ref in zip(hyps, single, strict=True):
            for h, r in zip(row, ref, strict=True):
                assert h.score == pytest.approx(r.score, abs=1e-9)


def test_members_must_share_a_vocabulary():
    with pytest.raises(UserError, match="different vocabularies"):
        Ensemble([_model(0), Transformer(preset("tiny", vocab_size=V + 1))])
    with pytest.raises(UserError, match="at least one"):
        Ensemble([])
    # the shortest positions of any member bound the search
    assert Ensemble([_model(0), _model(1, max_len=20)]).config.max_len == 20


# -- folders: the Translator and the CLI -----------------------------------------------------

def _folders(tmp_path, n=2, vocab=None):
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.tasks.translator import Translator

    tok = Tokenizer.train(["open the file", "close the window", "save the file now"] * 4, 150)
    folders = []
    for i in range(n):
        torch.manual_seed(i)
        model = Transformer(preset("tiny", vocab_size=vocab or tok.vocab_size)).eval()
        folders.append(Translator(model, tok).save(tmp_path / f"m{i}"))
    return folders


def test_translator_over_several_folders(tmp_path):
    from aiayn.generation.ensemble import Ensemble as E
    from aiayn.tasks.translator import ENSEMBLE_FILE, Translator

    a, b = _folders(tmp_path)
    both = Translator.load([a, b])
    assert isinstance(both.model, E) and len(both.model.members) == 2
    text = ["open the file", "save the window"]
    got = both.translate(text, beam=3, max_extra=5)
    # the same as the search over the mean, computed from the two folders' own models
    ta, tb = Translator.load(a), Translator.load(b)
    ids = [ta.encode_source(t) for t in text]
    want = beam_search(E([ta.model, tb.model]), torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(i) for i in ids], batch_first=True, padding_value=PAD), beam=3, **IDS,
        max_extra=5)
    assert got == [ta.tokenizer.decode(w) for w in want]
    # a folder that lists its members (relative to it) loads as they do
    ens = tmp_path / "ens"
    ens.mkdir()
    for f in (a, b):
        f.rename(ens / f.name)
    (ens / ENSEMBLE_FILE).write_text(json.dumps({"members": ["m0", "m1"]}))
    assert Translator.load(ens).translate(text, beam=3, max_extra=5) == got
    assert Translator.load([ens]).translate(text, beam=3, max_extra=5) == got
    import aiayn
    assert aiayn.load(ens).translate(text, beam=3, max_extra=5) == got
    # scoring reads the mean distribution too
    pair_scores = Translator.load(ens).score(text, got)
    assert all(s["logprob"] < 0 for s in pair_scores)
    with pytest.raises(UserError, match="not saved as one model folder"):
        Translator.load(ens).save(tmp_path / "out")
    with pytest.raises(UserError, match="attention"):
        Translator.load(ens).cross_attention("open the file")
    with pytest.raises(UserError, match="engine torch"):
        Translator.load(ens, engine="ctranslate2")
    with pytest.raises(UserError, match="--checkpoint"):
        Translator.load(ens, checkpoint=10)


def test_translator_refuses_members_that_do_not_match(tmp_path):
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.tasks.translator import ENSEMBLE_FILE, Translator

    a, b = _folders(tmp_path)
    Tokenizer.train(["a different corpus entirely"] * 4, 130).save(b)
    with pytest.raises(UserError, match="tokenizer differs"):
        Translator.load([a, b])
    (tmp_path / ENSEMBLE_FILE).write_text('{"members": []}')
    with pytest.raises(UserError, match="not a valid ensemble file"):
        Translator.load(tmp_path)


def test_cli_translate_and_eval_with_two_models(tmp_path, capsys):
    a, b = _folders(tmp_path)
    code, out, err = run(capsys, "translate", "--model", a, "--model", b, "--beam", "2", "open the file")
    assert code == 0, err
    from aiayn.tasks.translator import Translator
    assert out.splitlines() == Translator.load([a, b]).translate(["open the file"], beam=2)
    (tmp_path / "src.txt").write_text("open the file\n")
    (tmp_path / "ref.txt").write_text("open the file\n")
    code, out, err = run(capsys, "eval", "--model", a, "--model", b, "--src", tmp_path / "src.txt",
                         "--ref", tmp_path / "ref.txt", "--json")
    assert code == 0, err
    assert json.loads(out)["bleu"] >= 0
    code, out, err = run(capsys, "translate", "--model", a, "--model", b, "--engine", "ctranslate2",
                         "open the file")
    assert code != 0 and "engine torch" in err and "Traceback" not in err
