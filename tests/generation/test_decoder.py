"""The one decoder interface (aiayn.generation.decoder): aiayn's own search (TorchDecoder) and
CTranslate2 (CT2Decoder) both implement it; `aiayn translate --engine ctranslate2` builds no
PyTorch model (its export made) and resolves the search settings once."""

import pytest

from aiayn.generation.decoder import Decoder, TorchDecoder
from aiayn.tasks.translator import Translator
from tests.builders import run
from tests.convert.test_ctranslate2 import PAIRS, random_folder

pytest.importorskip("ctranslate2")


def test_both_engines_are_decoders_and_the_translator_decodes_through_one(tmp_path):
    from aiayn.generation.ctranslate2 import CT2Decoder

    folder = random_folder(tmp_path / "m")
    torch_mt = Translator.load(folder)
    ct2_mt = Translator.load(folder, engine="ctranslate2", intra_threads=1)
    assert isinstance(torch_mt.decoder, TorchDecoder) and isinstance(ct2_mt.decoder, CT2Decoder)
    for decoder in (torch_mt.decoder, ct2_mt.decoder):
        assert all(callable(getattr(decoder, name)) for name in ("decode_ids", "score_ids"))
    assert set(Decoder.__dict__) >= {"decode_ids", "score_ids"}
    ids = [torch_mt.encode_source(s) for s, _ in PAIRS]
    opts = {**torch_mt.search_options(beam=1), **torch_mt.search_ids(),
            **torch_mt.length_limits()}
    assert ct2_mt.decoder.decode_ids(ids, **opts) == torch_mt.decoder.decode_ids(ids, **opts)
    pairs = [(s, torch_mt.encode_target(t)) for s, (_, t) in zip(ids, PAIRS, strict=True)]
    theirs, ours = ct2_mt.decoder.score_ids(pairs), torch_mt.decoder.score_ids(pairs)
    assert [t["tokens"] for t in theirs] == [o["tokens"] for o in ours]
    assert [t["logprob"] for t in theirs] == pytest.approx([o["logprob"] for o in ours],
                                                           abs=1e-3)


def test_translate_with_ctranslate2_builds_no_torch_model_and_resolves_the_search_once(
        tmp_path, capsys, monkeypatch):
    from aiayn.convert.ctranslate2_dir import engine_dir
    from aiayn.models import transformer

    folder = random_folder(tmp_path / "m")
    sources = [s for s, _ in PAIRS]
    expected = Translator.load(folder).translate(sources, beam=3)
    engine_dir(folder)  # the export, made once (it reads the PyTorch model's weights)

    def built(*args, **kwargs):
        raise AssertionError("the PyTorch model was built")

    monkeypatch.setattr(transformer.Transformer, "__init__", built)
    calls = []
    resolve = Translator.search_options
    monkeypatch.setattr(Translator, "search_options",
                        lambda self, *a, **k: calls.append(a) or resolve(self, *a, **k))
    code, out, err = run(capsys, "translate", "--model", folder, "--engine", "ctranslate2",
                         "--beam", "3", "--workers", "1", "--threads", "1", *sources)
    assert code == 0, err
    assert out.splitlines() == expected and len(calls) == 1
    calls.clear()
    code, out, err = run(capsys, "translate", "--model", folder, "--engine", "ctranslate2",
                         "--beam", "1", "--alpha", "1.0", "3 1")
    assert code == 2 and "--alpha has no effect with greedy search" in err and len(calls) == 1
    # the PyTorch model is still there for what needs it (score), built then
    with pytest.raises(AssertionError, match="the PyTorch model was built"):
        Translator.load(folder, engine="ctranslate2").score(["3 1"], ["drei eins"])
