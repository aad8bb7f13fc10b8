"""`aiayn export ctranslate2` and `Translator.load(engine="ctranslate2")`: CTranslate2 computes
the same log-likelihoods as aiayn for every option it maps (post- / pre-norm, sinusoidal /
learned positions, joint / separate vocabularies, ...), and under aiayn's search rules its greedy
and beam-4 translations are aiayn's; what it cannot express is refused by name."""

import json
import sys

import pytest
import torch

from aiayn import devices
from aiayn.cli import main
from aiayn.errors import UserError
from tests.builders import digit_pairs, write_config

ct2 = pytest.importorskip("ctranslate2")


def random_folder(path, seed=0, **options):
    """A translation folder with random weights (no training) and a tokenizer of the digit
    task: `options` are TransformerConfig's."""
    from aiayn import Transformer
    from aiayn.config import TransformerConfig
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.tasks.seq2seq import Translator

    torch.manual_seed(seed)
    pairs = digit_pairs(200, 1)
    tok = Tokenizer.train([s for p in pairs for s in p], 120, "bpe", True)
    config = dict(vocab_size=tok.vocab_size, d_model=16, d_ff=32, n_heads=2, n_layers=2,
                  max_len=40, dropout=0.0, **options)
    Translator(Transformer(TransformerConfig(**config)), tok).save(path)
    return path


def engine_of(folder, **options):
    from aiayn.tasks.seq2seq import Translator

    return Translator.load(folder, engine="ctranslate2", intra_threads=1, **options)


PAIRS = digit_pairs(12, 7)

VARIANTS = {
    "post-norm, sinusoids (the paper)": {},
    "pre-norm": {"norm_first": True},
    "pre-norm without a final LayerNorm": {"norm_first": True, "final_norm": False},
    "learned positions": {"positions": "learned"},
    "separate target vocabulary": {"tgt_vocab_size": 131, "share_embeddings": False},
    "untied output, GELU, no biases, no sqrt(d_model)": {
        "tie_output": False, "activation": "gelu", "bias": False, "scale_embeddings": False},
    # the family's encoder-decoders (aiayn.config.presets' _T5 and _BART options)
    "T5 v1.0: relative position bias, RMSNorm, unscaled scores and output": {
        "positions": "none", "relative_attention_num_buckets": 8,
        "relative_attention_max_distance": 16, "norm": "rms_norm", "norm_first": True,
        "final_norm": True, "bias": False, "scale_attention": False, "scale_embeddings": False,
        "scale_output": True, "layer_norm_eps": 1e-6},
    "T5 v1.1: gated GELU, untied output, heads of their own width": {
        "positions": "none", "relative_attention_num_buckets": 8, "norm": "rms_norm",
        "norm_first": True, "final_norm": True, "bias": False, "scale_attention": False,
        "scale_embeddings": False, "gated_ffn": True, "activation": "gelu", "tie_output": False,
        "head_dim": 12},
    "BART: learned positions from row 2, embedding LayerNorm, output bias": {
        "positions": "learned", "position_offset": 2, "embedding_norm": True,
        "activation": "gelu", "scale_embeddings": False, "output_bias": True},
}


@pytest.mark.parametrize("options", VARIANTS.values(), ids=VARIANTS.keys())
def test_ctranslate2_scores_and_greedy_tokens_are_aiayns(tmp_path, options):
    """score_batch vs Translator.score (float32: within 1e-4 nats per sentence), and greedy
    search token for token, also where a random model runs to §6.1's limit (input + 50, here
    max_len - 1: the batch's room below max_len)."""
    from aiayn.generation.search import decode_ids

    folder = random_folder(tmp_path / "m", **options)
    mt = engine_of(folder)
    sources, targets = [s for s, _ in PAIRS], [t for _, t in PAIRS]
    ours = mt.score(sources, targets)
    pairs = [(mt.fit_source(mt.encode_source(s)), mt.tokenizer.encode(t)) for s, t in PAIRS]
    theirs = mt.engine.score_ids(pairs)
    assert [o["tokens"] for o in ours] == [t["tokens"] for t in theirs]
    assert max(abs(o["logprob"] - t["logprob"]) for o, t in zip(ours, theirs, strict=True)) < 1e-4
    ids = [p[0] for p in pairs]
    expected = decode_ids(mt.model, ids, beam=1)
    got = mt.engine.decode_ids(ids, beam=1, bos_id=1, eos_id=2, pad_id=0)
    assert got == expected
    room = 39 - max(map(len, ids))  # the batch's room below max_len - 1
    assert any(len(g) == room + len(i) for g, i in zip(got, ids, strict=True))  # at the limit
    assert mt.translate(sources, beam=1) == mt.tokenizer.decode_batch(expected)


def test_a_separate_target_vocabulary_reads_back_ids_past_the_source_vocabulary(tmp_path):
    """Target rows past the tokenizer's last token (tgt_vocab_size > vocab_size) have their own
    names in the target vocabulary; the engine reads them back as the same ids."""
    from aiayn.folder import save_weights
    from aiayn.generation.search import decode_ids
    from aiayn.tasks.seq2seq import Translator

    folder = random_folder(tmp_path / "m", tgt_vocab_size=131, share_embeddings=False)
    model = Translator.load(folder).model
    with torch.no_grad():
        model.output.weight[125] *= 30  # a row no token of the tokenizer has, often chosen
    save_weights(model, folder / "model.safetensors")
    mt = engine_of(folder)
    ids = [mt.encode_source(s) for s, _ in PAIRS]
    ours = decode_ids(mt.model, ids, beam=1)
    assert any(125 in row for row in ours)
    assert mt.engine.decode_ids(ids, beam=1, bos_id=1, eos_id=2, pad_id=0) == ours


def test_greedy_with_no_repeated_ngrams_is_aiayns(tmp_path):
    """A random model repeats itself: with no 2-gram twice, greedy's tokens are still the same
    (CTranslate2 bans them before its softmax, aiayn after: the same argmax; a beam's scores
    would differ, so a beam with it is refused)."""
    from aiayn.generation.search import decode_ids

    folder = random_folder(tmp_path / "m")
    mt = engine_of(folder)
    ids = [mt.encode_source(s) for s, _ in PAIRS]
    ours = decode_ids(mt.model, ids, beam=1, no_repeat_ngram_size=2)
    assert ours != decode_ids(mt.model, ids, beam=1)  # the ban changes something
    assert mt.engine.decode_ids(ids, beam=1, no_repeat_ngram_size=2, bos_id=1,
                                eos_id=2, pad_id=0) == ours
    with pytest.raises(UserError, match="--no-repeat-ngram-size with a beam"):
        mt.translate(["1 2"], beam=4, no_repeat_ngram_size=2)


def test_ctranslate2s_own_sinusoids_are_not_the_papers_so_the_export_writes_aiayns(tmp_path):
    """CTranslate2's built-in table is tensor2tensor's [sin..., cos...]; §3.5 (and aiayn)
    interleaves them. Left to its own, the exported model scores differently."""
    from ctranslate2.specs import model_spec as ms

    from aiayn.convert.ctranslate2 import model_spec
    from aiayn.tasks.seq2seq import Translator

    folder = random_folder(tmp_path / "m")
    mt = Translator.load(folder)
    spec = model_spec(mt.model, mt.meta, mt.tokenizer)
    spec.encoder.position_encodings.encodings = ms.OPTIONAL
    spec.decoder.position_encodings.encodings = ms.OPTIONAL
    spec.validate()
    spec.optimize()
    (tmp_path / "builtin").mkdir()
    spec.save(str(tmp_path / "builtin"))
    toks = [[mt.tokenizer.hf.id_to_token(i) for i in mt.tokenizer.encode(s)] for s, _ in PAIRS]
    tgts = [[mt.tokenizer.hf.id_to_token(i) for i in mt.tokenizer.encode(t)] for _, t in PAIRS]
    builtin = ct2.Translator(str(tmp_path / "builtin")).score_batch(toks, tgts)
    ours = mt.score([s for s, _ in PAIRS], [t for _, t in PAIRS])
    assert max(abs(sum(b.log_probs) - o["logprob"]) for b, o in zip(builtin, ours, strict=True)) > 0.1


def test_export_writes_a_new_folder_ctranslate2_loads(tmp_path, capsys):
    folder = random_folder(tmp_path / "m")
    out = tmp_path / "ct2"
    assert main(["export", "ctranslate2", "--model", str(folder), "--out", str(out),
                 "--quantization", "int8"]) == 0
    assert "CTranslate2 model (int8)" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == {"model.bin", "config.json", "aiayn.json",
                                               "shared_vocabulary.json"}
    config = json.loads((out / "config.json").read_text())
    assert config["decoder_start_token"] == "<s>" and config["add_source_eos"] is False
    assert json.loads((out / "aiayn.json").read_text())["quantization"] == "int8"
    assert ct2.Translator(str(out)).translate_batch([["▁3"]])[0].hypotheses
    # a finished folder is never overwritten
    assert main(["export", "ctranslate2", "--model", str(folder), "--out", str(out)]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err


def test_a_source_eos_folder_gets_add_source_eos_and_the_same_scores(tmp_path):
    """An imported Marian folder reads every source followed by </s> (meta "source_eos"):
    CTranslate2 appends it itself (add_source_eos), and the engine gives it the subwords."""
    folder = random_folder(tmp_path / "m")
    meta = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**meta, "source_eos": True}))
    mt = engine_of(folder)
    assert json.loads((folder / "ctranslate2" / "config.json").read_text())["add_source_eos"]
    pairs = [(mt.fit_source(mt.encode_source(s)), mt.tokenizer.encode(t)) for s, t in PAIRS]
    assert all(s[-1] == 2 for s, _ in pairs)
    ours = mt.score([s for s, _ in PAIRS], [t for _, t in PAIRS])
    theirs = mt.engine.score_ids(pairs)
    assert max(abs(o["logprob"] - t["logprob"]) for o, t in zip(ours, theirs, strict=True)) < 1e-4


def test_an_imported_models_own_search_maps_min_and_max_length_and_forced_eos(tmp_path):
    """An imported model's generation_config.json settings (meta "generation"): beam, |Y|^alpha,
    min_length, max_new_tokens and transformers' forced </s> at the limit (scored 0: what
    CTranslate2 does at its limit), on a random model whose outputs often run to it; then
    first_k."""
    folder = random_folder(tmp_path / "m", seed=3)
    meta = json.loads((folder / "config.json").read_text())
    search = {"beam": 3, "alpha": 1.0, "length_penalty": "avg", "early_stopping": "exact",
              "no_repeat_ngram_size": 0, "min_length": 2, "max_new_tokens": 6,
              "forced_eos": True}
    (folder / "config.json").write_text(json.dumps({**meta, "source_eos": True,
                                                    "generation": search}))
    from aiayn.folder import save_weights
    from aiayn.generation.search import decode_ids
    from aiayn.tasks.seq2seq import Translator

    torch_mt = Translator.load(folder)
    with torch.no_grad():  # a larger </s> row: some translations end before the limit
        torch_mt.model.output.weight[2] *= 10
    save_weights(torch_mt.model, folder / "model.safetensors")
    ct2_mt = engine_of(folder)
    ids = [torch_mt.encode_source(s) for s, _ in digit_pairs(40, 9)]
    for beam in (None, 1):
        opts = {**torch_mt.search_options(beam=beam), **torch_mt.search_ids(),
                **torch_mt.length_limits()}
        ours = decode_ids(torch_mt.model, ids, **opts)
        assert ct2_mt.engine.decode_ids(ids, **opts) == ours
        lengths = {len(t) for t in ours}
        assert min(lengths) >= 2 and max(lengths) == 6 and (beam == 1 or len(lengths) > 1)
    opts.update(beam=3, early_stopping="first_k")
    assert ct2_mt.engine.decode_ids(ids, **opts) == \
        decode_ids(torch_mt.model, ids, **opts)


def test_an_imported_barts_special_ids_and_source_markers_map_onto_the_directory(tmp_path):
    """A folder as `aiayn import hf-bart` writes it: BART's special ids (<s> 0, <pad> 1, </s> 2,
    the decoder starting from </s>) and <s> ... </s> around every source. The directory starts
    its decoder from </s> and adds the source's markers itself (add_source_bos / _eos); the
    scores, greedy and beam-4 translations are aiayn's."""
    from aiayn.generation.search import decode_ids

    folder = random_folder(tmp_path / "m", seed=1, **VARIANTS[
        "BART: learned positions from row 2, embedding LayerNorm, output bias"])
    meta = json.loads((folder / "config.json").read_text())
    bart = {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "decoder_start": 2}
    meta["model"]["pad_id"] = bart["pad"]  # the model masks BART's padding id, as imported
    (folder / "config.json").write_text(json.dumps(
        {**meta, "special_ids": bart, "source_bos": True, "source_eos": True}))
    mt = engine_of(folder)
    config = json.loads((folder / "ctranslate2" / "config.json").read_text())
    tokens = mt.engine.tokens
    assert (config["decoder_start_token"], config["eos_token"]) == (tokens[2], tokens[2])
    assert config["add_source_bos"] and config["add_source_eos"] and config["bos_token"] == tokens[0]
    sources, targets = [s for s, _ in PAIRS], [t for _, t in PAIRS]
    ours = mt.score(sources, targets)
    pairs = [(mt.fit_source(mt.encode_source(s)), mt.encode_target(t)) for s, t in PAIRS]
    assert pairs[0][0][0] == 0 and pairs[0][0][-1] == 2  # <s> ... </s>, as BART reads them
    assert pairs[0][1][0] == 0  # and the target <s> ..., as BART's labels (Translator.score)
    theirs = mt.engine.score_ids(pairs)
    assert max(abs(o["logprob"] - t["logprob"]) for o, t in zip(ours, theirs, strict=True)) < 1e-4
    ids = [p[0] for p in pairs]
    for beam in (1, 4):
        expected = decode_ids(mt.model, ids, beam=beam, **mt.search_ids())
        assert mt.engine.decode_ids(ids, beam=beam, **mt.search_ids()) == expected


def test_the_folders_export_is_redone_when_its_weights_change(tmp_path):
    from aiayn.folder import save_weights
    from aiayn.tasks.seq2seq import Translator

    folder = random_folder(tmp_path / "m")
    first = engine_of(folder)
    stamp = json.loads((folder / "ctranslate2" / "aiayn.json").read_text())
    engine_of(folder)  # current: kept as it is
    assert json.loads((folder / "ctranslate2" / "aiayn.json").read_text()) == stamp
    model = Translator.load(folder).model
    with torch.no_grad():
        model.output.weight.mul_(3)  # (tied: the embeddings too)
    save_weights(model, folder / "model.safetensors")
    second = engine_of(folder)
    assert json.loads((folder / "ctranslate2" / "aiayn.json").read_text()) != stamp
    pair = [(first.encode_source("3 1"), first.tokenizer.encode("drei eins"))]
    assert second.engine.score_ids(pair)[0]["logprob"] == pytest.approx(
        second.score(["3 1"], ["drei eins"])[0]["logprob"], abs=1e-4)
    assert second.engine.score_ids(pair) != first.engine.score_ids(pair)


def test_a_saved_checkpoint_gets_its_own_export(tmp_path):
    import shutil

    from aiayn.folder import checkpoint_path, save_weights
    from aiayn.tasks.seq2seq import Translator

    folder = random_folder(tmp_path / "m")
    checkpoint_path(folder, 5).parent.mkdir()
    shutil.copy(folder / "model.safetensors", checkpoint_path(folder, 5))
    model = Translator.load(folder).model
    with torch.no_grad():
        model.output.weight.mul_(2)
    save_weights(model, folder / "model.safetensors")  # the latest weights differ from step 5's
    at_5 = Translator.load(folder, checkpoint=5, engine="ctranslate2", intra_threads=1)
    assert (folder / "ctranslate2-step_00000005" / "model.bin").is_file()
    assert not (folder / "ctranslate2").exists()
    pair = [(at_5.encode_source("3 1"), at_5.tokenizer.encode("drei eins"))]
    assert at_5.engine.score_ids(pair)[0]["logprob"] == pytest.approx(
        at_5.score(["3 1"], ["drei eins"])[0]["logprob"], abs=1e-4)
    latest = Translator.load(folder).score(["3 1"], ["drei eins"])[0]["logprob"]
    assert abs(latest - at_5.engine.score_ids(pair)[0]["logprob"]) > 0.1


def test_while_another_process_exports_the_folder_a_second_is_refused_in_one_line(tmp_path,
                                                                                 capsys):
    import os
    import subprocess
    from pathlib import Path

    folder = random_folder(tmp_path / "m")
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = ("import sys, time\nfrom aiayn.folder.lock import writer_lock\n"
            "with writer_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder / "ctranslate2")],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": src})
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["translate", "--model", str(folder), "--engine", "ctranslate2", "1 2"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "ctranslate2 is being exported by pid" in err
    finally:
        holder.kill()
        holder.wait()
    assert main(["translate", "--model", str(folder), "--engine", "ctranslate2", "1 2"]) == 0


@pytest.mark.parametrize("options, named", [
    ({"value_dim": 4}, "model.value_dim=4"),
    ({"relative_attention_num_buckets": 8}, "model.positions='sinusoidal' with T5's relative"),
    ({"final_norm": True}, "model.final_norm=True with post-norm"),
    ({"positions": "none"}, "model.positions='none'"),
])
def test_what_ctranslate2_cannot_express_is_refused_naming_the_option(tmp_path, capsys, options,
                                                                      named):
    folder = random_folder(tmp_path / "m", **options)
    assert main(["export", "ctranslate2", "--model", str(folder), "--out",
                 str(tmp_path / "ct2")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err
    assert not (tmp_path / "ct2").exists()


def test_without_ctranslate2_installed_one_line_names_the_extra(tmp_path, capsys, monkeypatch):
    from aiayn.convert.ctranslate2 import export

    folder = random_folder(tmp_path / "m")
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 fails
    with pytest.raises(UserError, match=r"pip install aiayn\[ct2\]"):
        export(folder, tmp_path / "ct2")
    for argv in (["export", "ctranslate2", "--model", str(folder), "--out", str(tmp_path / "x")],
                 ["translate", "--model", str(folder), "--engine", "ctranslate2", "1 2"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pip install aiayn[ct2]" in err
    assert not (tmp_path / "x").exists() and not (folder / "ctranslate2").exists()


def test_the_explorer_translates_with_ctranslate2_and_draws_the_same_attention(tmp_path):
    from aiayn.viz.inspect import Inspector

    folder = random_folder(tmp_path / "m")
    torch_view = Inspector.load(folder).run("3 1 4", beam=1)
    ct2_view = Inspector.load(folder, engine="ctranslate2", intra_threads=1).run("3 1 4", beam=1)
    assert ct2_view.output == torch_view.output and ct2_view.labels == torch_view.labels


@pytest.mark.slow
def test_ct2_transformers_converter_refuses_the_hf_export_so_export_ctranslate2_exists(tmp_path):
    """What convert/hf_export.py's docstring says: CTranslate2's Marian loader assumes OPUS-MT's
    vocabulary layout and refuses `aiayn export hf`'s MarianMTModel."""
    import subprocess

    pytest.importorskip("transformers")
    folder = random_folder(tmp_path / "m")
    assert main(["export", "hf", "--model", str(folder), "--out", str(tmp_path / "hf")]) == 0
    done = subprocess.run([sys.executable, "-m", "ctranslate2.converters.transformers",
                           "--model", str(tmp_path / "hf"), "--output_dir",
                           str(tmp_path / "ct2")], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "but the model expected a vocabulary of size" in done.stderr


# -- a trained model: beam search --------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model trained briefly on the digit task: its translations are right or nearly
    (valid BLEU ~10-30), so beams disagree with greedy and with each other."""
    tmp = tmp_path_factory.mktemp("ct2")
    torch.set_num_threads(1)
    config = write_config(tmp, max_steps=800, save_every=0)
    assert main(["train", str(config), "model.dropout=0"]) == 0
    return tmp / "model"


TEST_SET = [s for s, _ in digit_pairs(400, 5)]

SEARCHES = {
    "greedy": dict(beam=1),
    "beam 4, §6.1 (GNMT 0.6, exact stop)": dict(beam=4),
    "beam 4, GNMT 0.6, first_k": dict(beam=4, early_stopping="first_k"),
    "beam 4, avg 1.0, first_k": dict(beam=4, length_penalty="avg", alpha=1.0,
                                     early_stopping="first_k"),
    "beam 4, avg 1.0, exact": dict(beam=4, length_penalty="avg", alpha=1.0),
    "beam 4, alpha 0": dict(beam=4, alpha=0.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("search", SEARCHES.values(), ids=SEARCHES.keys())
def test_ctranslate2s_translations_of_the_test_set_are_aiayns(trained, search):
    """fp32. The one difference allowed: a hypothesis that reaches the length limit (input + 50,
    a degenerate loop), which aiayn ends with a scored </s> and CTranslate2 cuts; none may
    differ otherwise (first_k with GNMT: CTranslate2's K finished are aiayn's, ranked by GNMT
    here)."""
    from aiayn.tasks.seq2seq import Translator

    torch_mt = Translator.load(trained)
    ct2_mt = engine_of(trained)
    ours = torch_mt.translate(TEST_SET, workers=1, **search)
    theirs = ct2_mt.translate(TEST_SET, **search)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    ids = [torch_mt.fit_source(torch_mt.encode_source(s)) for s in TEST_SET]
    limits = dict(ct2_mt.engine._limits(ids, torch_mt.model.config.max_len, 50, None, 64))
    at_limit = [max(len(torch_mt.tokenizer.encode(ours[i])),
                    len(torch_mt.tokenizer.encode(theirs[i]))) >= limits[i] for i in differ]
    assert all(at_limit), [(TEST_SET[i], ours[i], theirs[i]) for i in differ]
    assert len(differ) <= len(TEST_SET) // 100
    assert len(set(ours)) > 30  # not a constant output


@pytest.mark.slow
def test_int8_translates_as_float32_does_but_for_a_few_sentences(trained):
    """CTranslate2's int8 (weights quantized as it loads them) against its float32, which is
    aiayn's own output (above), beam 4, token for token: at least 4 in 5 test translations the
    same, and chrF within a point. The model is deliberately weak (BLEU ~2-4 on this test set),
    so BLEU is no measure here: a few changed sentences moved it by 2.07 on an AMD EPYC. With VNNI
    (AVX512-VNNI, AVX-VNNI or AMX) int8 matrix products are exact in integers, so the share of
    changed sentences does not depend on the CPU (91% the same on an AMD EPYC with AVX512).
    Without it (AVX2 only), the int8 kernels most likely add pairs of u8 x s8 products in 16
    bits (vpmaddubsw), which saturate: on an AMD EPYC with AVX2 alone (2026-12-07) 25.5% were
    the same and chrF fell from 32.4 to 18.1. There the test holds CTranslate2's int8 to what it
    does on such a CPU: it still translates (chrF above half of float32's), no more."""
    from aiayn.tasks.seq2seq import score_translations

    refs = [t for _, t in digit_pairs(400, 5)]
    fp32 = engine_of(trained).translate(TEST_SET, beam=4)
    int8 = engine_of(trained, compute_type="int8").translate(TEST_SET, beam=4)
    same = sum(a == b for a, b in zip(fp32, int8, strict=True)) / len(TEST_SET)
    fp32_chrf, int8_chrf = (score_translations(h, refs)["chrf"] for h in (fp32, int8))
    assert fp32_chrf > 20, fp32_chrf  # a model that translates something
    if not devices.cpu_has_vnni():
        assert int8_chrf > fp32_chrf / 2, (int8_chrf, fp32_chrf)
        return
    assert same >= 0.8, same
    assert abs(int8_chrf - fp32_chrf) <= 1.0, (int8_chrf, fp32_chrf)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_ctranslate2_scores_and_translates_as_aiayn_does(tmp_path):
    """The engine on the GPU (CTranslate2's float32 there) against aiayn's model on the GPU:
    log-likelihoods within 1e-3 nats per sentence, the same greedy and beam-4 translations."""
    from aiayn.tasks.seq2seq import Translator

    folder = random_folder(tmp_path / "m")
    mt = Translator.load(folder, device="cuda", engine="ctranslate2")
    sources, targets = [s for s, _ in PAIRS], [t for _, t in PAIRS]
    pairs = [(mt.fit_source(mt.encode_source(s)), mt.tokenizer.encode(t)) for s, t in PAIRS]
    ours, theirs = mt.score(sources, targets), mt.engine.score_ids(pairs)
    assert max(abs(o["logprob"] - t["logprob"]) for o, t in zip(ours, theirs, strict=True)) < 1e-3
    cpu = Translator.load(folder)
    assert mt.translate(sources, beam=1) == cpu.translate(sources, beam=1, workers=1)


def test_equal_scores_go_to_the_shorter_hypothesis_as_aiayns_stable_sort_keeps_them():
    """The tie rule of the ranking by aiayn's length penalty: the higher score, then the
    shorter hypothesis (it finished first, and aiayn's sort is stable). CTranslate2's scores
    here are summed log-probabilities / |Y| (length_penalty=1, </s> counted)."""
    import types

    from aiayn.generation.ctranslate2 import CT2Decoder

    engine = CT2Decoder(None, ["<pad>", "<s>", "</s>", "a", "b"], source_eos=False)
    result = types.SimpleNamespace(hypotheses=[["a", "b", "</s>"], ["a", "</s>"], ["b", "</s>"]],
                                   scores=[-6.0 / 3, -6.0 / 2, -7.0 / 2])
    ranked = engine._ranked(result, 1.0, 0.0, "gnmt", 2, cut=False)  # alpha 0: raw sums
    assert [h[0][0] for h in ranked] == pytest.approx([-6.0, -6.0, -7.0])
    assert max(ranked, key=lambda h: h[0])[1] == [3]
    ranked = engine._ranked(result, 1.0, 1.0, "avg", 2, cut=False)  # |Y|^1: the longer wins
    assert max(ranked, key=lambda h: h[0])[1] == [3, 4]


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
@pytest.mark.parametrize("beam", [1, 4])
def test_no_empty_translation_unless_asked_for(tmp_path, engine, beam):
    """A model whose </s> is the likeliest first token: every search, in both engines, gives at
    least one token by default (fairseq's min_len 1), and the empty line only with min_length=0."""
    from aiayn.folder import save_weights
    from aiayn.tasks.seq2seq import Translator

    folder = random_folder(tmp_path / "mt", output_bias=True, tie_output=False)
    mt = Translator.load(folder)
    with torch.no_grad():
        mt.model.output.bias[mt.special["eos"]] = 30.0  # </s> first, whatever the source
    save_weights(mt.model, folder / "model.safetensors")
    mt = Translator.load(folder) if engine == "torch" else engine_of(folder)
    sources = [s for s, _ in PAIRS]
    assert set(mt.translate(sources, beam=beam, min_length=0)) == {""}
    default = mt.translate(sources, beam=beam)
    assert all(default), default
    longer = mt.translate(sources, beam=beam, min_length=3)
    assert all(len(mt.tokenizer.encode(t)) >= 3 for t in longer), longer


@pytest.mark.parametrize("damage", ["reordered vocabulary", "shorter vocabulary", "model.bin",
                                    "tokenizer changed", "no stamp"])
def test_a_damaged_or_stale_export_is_made_again_not_trusted(tmp_path, damage):
    """The ctranslate2/ cache was trusted once its stamp (weights size and time) matched: a
    reordered vocabulary gave garbage with exit 0, a shorter one a traceback. The stamp now
    covers the weights read, the config and tokenizer, and every file of the export by SHA-256:
    any change there exports again, and the translations are the torch model's."""
    from aiayn.tasks.seq2seq import Translator

    folder = random_folder(tmp_path / "m")
    sources = [s for s, _ in PAIRS]
    expected = Translator.load(folder).translate(sources, beam=1)
    assert engine_of(folder).translate(sources, beam=1) == expected
    cache = folder / "ctranslate2"
    vocab = next(p for p in cache.iterdir() if "vocabulary" in p.name)
    words = json.loads(vocab.read_text())
    if damage == "reordered vocabulary":
        vocab.write_text(json.dumps(words[:3] + words[3:][::-1]))
    elif damage == "shorter vocabulary":
        vocab.write_text(json.dumps(words[:-5]))
    elif damage == "model.bin":
        data = bytearray((cache / "model.bin").read_bytes())
        data[-4:] = b"\xff\xff\xff\x7f"
        (cache / "model.bin").write_bytes(bytes(data))
    elif damage == "tokenizer changed":  # the folder's, the same ids: exported again all the same
        tok = folder / "tokenizer.json"
        tok.write_text(tok.read_text() + " ")
    else:
        (cache / "aiayn.json").unlink()
    again = engine_of(folder)
    assert json.loads(vocab.read_text()) == words
    assert again.translate(sources, beam=1) == expected
