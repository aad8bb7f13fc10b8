"""`aiayn import hf-bart` and `aiayn export hf` of a BART-shaped model: a folder transformers
writes offline (random weights, a byte-level BPE trained here) imports to a translation folder
with the same token ids, logits within 1e-4 and the same greedy and beam translations as
generate() (the folder's generation_config.json honoured); exported again, it is the same BART,
and export -> import -> export is bit for bit; what BART options aiayn lacks is refused in one
line naming the key."""

import json
import shutil

import pytest
import torch

import aiayn
from aiayn.cli import main

transformers = pytest.importorskip("transformers")

ENGLISH = ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat",
           "the house is small", "my friend reads a book", "Café au lait, s'il vous plaît!"]
SENTENCES = ENGLISH + ["a fox reads", "the dog reads a small book", "my house", "a small cat",
                       "the lazy cat sat on my friend"]
PAD, EOS = 1, 2  # BART's; <s> is 0, and the decoder starts from </s>


@pytest.fixture(scope="module")
def hf_bart_folder(tmp_path_factory):
    """A BartForConditionalGeneration written by transformers (random weights, offline), every
    LayerNorm, position row and logits bias made random too, with BartTokenizer's files of a
    byte-level BPE trained here (<s> 0, <pad> 1, </s> 2, <unk> 3, <mask>) and BART's own search
    in generation_config.json (beam 4, |Y|^1, stop at 4 finished)."""
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("bart")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(ENGLISH * 20, vocab_size=320,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(folder))
    transformers.BartTokenizer.from_pretrained(folder).save_pretrained(folder)
    config = transformers.BartConfig(
        vocab_size=bpe.get_vocab_size(), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=64, init_std=0.3, dropout=0.0)
    torch.manual_seed(0)
    model = transformers.BartForConditionalGeneration(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name or "layernorm" in name:
                p.add_(torch.randn_like(p) * 0.2)
        model.final_logits_bias.normal_(0, 0.5)
        model.final_logits_bias[0, PAD] = -20.0  # as a trained BART: never produces <pad>
        model.model.shared.weight[EOS] *= 2.0  # a larger </s> row: translations end
    model.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps({
        "num_beams": 4, "length_penalty": 1.0, "early_stopping": True, "max_length": 64,
        "bos_token_id": 0, "decoder_start_token_id": EOS, "pad_token_id": PAD,
        "eos_token_id": EOS, "forced_eos_token_id": EOS}))
    return folder, SENTENCES


def _hf(folder):
    return (transformers.BartForConditionalGeneration.from_pretrained(folder).eval(),
            transformers.AutoTokenizer.from_pretrained(folder))


def _ended(ids, cap):
    """HF's output after the decoder's start, up to its </s>, or None if it ran to the cap."""
    ids = ids[1:]
    return ids[:ids.index(EOS)] if EOS in ids[:cap - 1] else None


def test_an_imported_bart_has_the_same_tokens_logits_and_translations(hf_bart_folder, tmp_path,
                                                                      capsys):
    folder, sentences = hf_bart_folder
    out = tmp_path / "mt"
    assert main(["import", "hf-bart", str(folder), "--out", str(out)]) == 0
    assert "imported" in capsys.readouterr().out
    hf, hf_tok = _hf(folder)
    mt = aiayn.load(out)
    assert mt.special == {"bos": 0, "pad": PAD, "eos": EOS, "unk": 3, "mask": 4,
                          "decoder_start": EOS}
    for text in sentences:  # <s> ... </s>, in BART's own ids
        assert mt.encode_source(text) == hf_tok(text)["input_ids"], text
    # Teacher-forced logits of a padded batch (pad 1, masked on both sides).
    src = [mt.encode_source(t) for t in sentences[:3]]
    width = max(map(len, src))
    src = torch.tensor([s + [PAD] * (width - len(s)) for s in src])
    tgt_in = torch.tensor([[EOS, 0, 9, 14, 7, 30]] * 3)
    with torch.no_grad():
        ours = mt.model(src, tgt_in)
        theirs = hf(input_ids=src, attention_mask=(src != PAD).long(),
                    decoder_input_ids=tgt_in).logits
    assert (ours - theirs).abs().max() <= 1e-4 and ours.std() > 1
    # The same greedy translations, tokens and text.
    from aiayn.generation.search import decode_ids

    finished = 0
    for text in sentences:
        inputs = hf_tok([text], return_tensors="pt")
        with torch.no_grad():
            hf_out = hf.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=20)
        mine = decode_ids(mt.model, [mt.encode_source(text)], beam=1, max_extra=20,
                          **mt.search_ids())[0]
        ended = _ended(hf_out[0].tolist(), 20)
        if ended is not None:
            assert mine == ended, text
            assert mt.translate(text, beam=1)[0] == hf_tok.decode(hf_out[0], skip_special_tokens=True)
            finished += 1
        else:  # cut at 20 tokens, the last one forced to be </s>
            assert mine[:19] == hf_out[0, 1:20].tolist(), text
    assert finished >= 3
    # Beam search as the folder says (generation_config.json), as generate() with it.
    assert mt.meta["generation"] == {"beam": 4, "alpha": 1.0, "length_penalty": "avg",
                                     "early_stopping": "first_k", "no_repeat_ngram_size": 0,
                                     "max_new_tokens": 62,  # max_length 64: start, ..., </s>
                                     "forced_eos": True}
    same = longest = 0
    for text in sentences:
        with torch.no_grad():
            hf_out = hf.generate(**hf_tok([text], return_tensors="pt"), max_new_tokens=20)
        ended = _ended(hf_out[0].tolist(), 20)
        if ended is not None:
            assert mt.translate(text)[0] == hf_tok.decode(hf_out[0], skip_special_tokens=True), text
            same, longest = same + 1, max(longest, len(ended))
    assert same >= 3 and longest >= 5  # not only translations that end at once
    # the teacher-forced score: BART's labels <s> ... </s> (test_score_is_transformers_loss...)
    target = "the small dog"
    labels = torch.tensor([hf_tok(text_target=target)["input_ids"]])
    assert labels[0, 0] == 0 and labels[0, -1] == EOS
    with torch.no_grad():
        hf_loss = float(hf(**hf_tok([sentences[0]], return_tensors="pt"), labels=labels).loss)
    scored = mt.score([sentences[0]], [target])[0]
    assert scored["tokens"] == labels.shape[1]
    assert -scored["logprob"] / scored["tokens"] == pytest.approx(hf_loss, rel=1e-4)
    # the explorer's view starts from BART's decoder start, </s>
    _, tgt_tokens, weights = mt.cross_attention(sentences[1])
    assert tgt_tokens[0] == "</s>" and weights.shape[-1] == len(mt.encode_source(sentences[1]))


def test_a_bart_exports_back_as_the_same_bart_and_round_trips_bit_for_bit(hf_bart_folder,
                                                                          tmp_path):
    folder, sentences = hf_bart_folder
    assert main(["import", "hf-bart", str(folder), "--out", str(tmp_path / "mt")]) == 0
    assert main(["export", "hf", "--model", str(tmp_path / "mt"), "--out", str(tmp_path / "hf")]) == 0
    again, again_tok = _hf(tmp_path / "hf")
    hf, hf_tok = _hf(folder)
    assert type(again).__name__ == "BartForConditionalGeneration"
    inputs = hf_tok(sentences[:2], return_tensors="pt", padding=True)
    assert again_tok(sentences[:2], padding=True)["input_ids"] == inputs["input_ids"].tolist()
    assert again_tok.mask_token == "<mask>" and again_tok("a <mask>")["input_ids"] == \
        hf_tok("a <mask>")["input_ids"]
    tgt_in = torch.tensor([[EOS, 0, 9, 14]] * 2)
    with torch.no_grad():
        a = again(**inputs, decoder_input_ids=tgt_in).logits
        b = hf(**inputs, decoder_input_ids=tgt_in).logits
    assert (a - b).abs().max() <= 1e-5
    # BART's own search goes with it, as generation_config.json's keys
    search = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert {k: search[k] for k in ("num_beams", "length_penalty", "early_stopping",
                                   "max_length")} == \
        {"num_beams": 4, "length_penalty": 1.0, "early_stopping": True, "max_length": 64}
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert {k: config[k] for k in ("bos_token_id", "pad_token_id", "eos_token_id",
                                   "decoder_start_token_id")} == \
        {"bos_token_id": 0, "pad_token_id": PAD, "eos_token_id": EOS, "decoder_start_token_id": EOS}
    # export -> import -> export: every file the same, bytes for bytes (but where it came from)
    assert main(["import", "hf-bart", str(tmp_path / "hf"), "--out", str(tmp_path / "back")]) == 0
    assert main(["export", "hf", "--model", str(tmp_path / "back"), "--out",
                 str(tmp_path / "hf2")]) == 0
    assert aiayn.load(tmp_path / "back").meta["generation"] == \
        aiayn.load(tmp_path / "mt").meta["generation"]
    names = sorted(p.name for p in (tmp_path / "hf").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "hf2").iterdir())
    for name in names:
        first, second = ((tmp_path / d / name).read_bytes() for d in ("hf", "hf2"))
        if name == "config.json":
            first, second = (json.loads(x) for x in (first, second))
            for c in (first, second):
                del c["aiayn"]["exported_from"]
        assert first == second, name


def test_a_forced_first_token_is_honoured_as_generate_honours_it(hf_bart_folder, tmp_path):
    """forced_bos_token_id (BART models fine-tuned on <s> ... </s> targets): <s> comes first in
    every output, with log-probability 0; greedy and beam 4 as generate(), and it exports back."""
    folder, sentences = hf_bart_folder
    forced = tmp_path / "forced"
    shutil.copytree(folder, forced)
    generation = json.loads((forced / "generation_config.json").read_text())
    (forced / "generation_config.json").write_text(json.dumps({**generation,
                                                               "forced_bos_token_id": 0}))
    assert main(["import", "hf-bart", str(forced), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    assert mt.special["forced_bos"] == 0
    hf, hf_tok = _hf(forced)
    same = 0
    for text in sentences:
        for beam in (1, 4):
            with torch.no_grad():
                hf_out = hf.generate(**hf_tok([text], return_tensors="pt"), num_beams=beam,
                                     max_new_tokens=20)[0].tolist()
            assert hf_out[1] == 0
            ended = _ended(hf_out, 20)
            if ended is not None:
                ours = mt.translate(text, beam=beam)[0]
                assert ours == hf_tok.decode(hf_out, skip_special_tokens=True), (text, beam)
                same += 1
    assert same >= 6
    assert main(["export", "hf", "--model", str(tmp_path / "mt"), "--out", str(tmp_path / "hf")]) == 0
    exported = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert exported["forced_bos_token_id"] == 0 and exported["decoder_start_token_id"] == EOS


def test_min_length_and_max_length_are_honoured_as_generate_honours_them(hf_bart_folder,
                                                                        tmp_path):
    """generation_config.json's min_length / max_length (a summarizer's: bart-large-cnn has
    56 / 142) count the decoder's start, and </s> is forced at the cap: the same translations
    as generate() with them, greedy and beam 4."""
    folder, sentences = hf_bart_folder
    limited = tmp_path / "limited"
    shutil.copytree(folder, limited)
    generation = json.loads((limited / "generation_config.json").read_text())
    (limited / "generation_config.json").write_text(json.dumps({**generation, "min_length": 6,
                                                                "max_length": 10}))
    assert main(["import", "hf-bart", str(limited), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    assert mt.length_limits() == {"min_length": 5, "max_new_tokens": 8, "forced_eos": True}
    hf, hf_tok = _hf(limited)
    ended = capped = 0
    for text in sentences:
        for beam in (1, 4):
            with torch.no_grad():
                hf_out = hf.generate(**hf_tok([text], return_tensors="pt"), num_beams=beam)
            hf_out = hf_out[0].tolist()
            assert len(hf_out) <= 10 and EOS not in hf_out[1:6]  # nothing ends before 5 tokens
            before_cap = EOS in hf_out[1:9]  # else </s> was forced at the 10th place
            ours = mt.translate(text, beam=beam)[0]  # (a forced </s> scores 0 on both sides)
            assert ours == hf_tok.decode(hf_out, skip_special_tokens=True), (text, beam)
            ended, capped = ended + before_cap, capped + (not before_cap)
    assert ended >= 3 and capped >= 1


def test_the_weights_of_a_bart_model_without_its_head_import_too(hf_bart_folder, tmp_path):
    """facebook/bart-base is a BartModel: its weights have no "model." prefix and no
    final_logits_bias (zeros, as transformers reads them)."""
    from safetensors.torch import load_file, save_file

    folder, sentences = hf_bart_folder
    bare = tmp_path / "bartmodel"
    shutil.copytree(folder, bare)
    state = load_file(str(folder / "model.safetensors"))
    save_file({k.removeprefix("model."): v for k, v in state.items()
               if k.startswith("model.")}, str(bare / "model.safetensors"))
    assert main(["import", "hf-bart", str(bare), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    hf = transformers.BartModel.from_pretrained(folder).eval()
    src = torch.tensor([mt.encode_source(sentences[0])])
    tgt_in = torch.tensor([[EOS, 0, 9]])
    with torch.no_grad():
        hidden = hf(input_ids=src, decoder_input_ids=tgt_in).last_hidden_state
        expected = hidden @ hf.shared.weight.T  # the tied head, no bias
        assert (mt.model(src, tgt_in) - expected).abs().max() <= 1e-4
    assert not mt.model.output.bias.any()


def test_a_source_past_max_len_keeps_its_end_marker_as_transformers_truncates(hf_bart_folder,
                                                                            tmp_path):
    """A long source (a summarizer's document) is cut as BartTokenizer(truncation=True) cuts
    it: <s>, the first subwords, </s>; and translated as generate() translates that."""
    folder, sentences = hf_bart_folder
    assert main(["import", "hf-bart", str(folder), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    hf, hf_tok = _hf(folder)
    document = " ".join((sentences[4:] + sentences[:4]) * 3)
    inputs = hf_tok([document], truncation=True, max_length=64, return_tensors="pt")
    ids = mt.fit_source(mt.encode_source(document))
    assert len(mt.encode_source(document)) > 64 and ids == inputs["input_ids"][0].tolist()
    assert ids[0] == 0 and ids[-1] == EOS
    from aiayn.generation.search import decode_ids

    with torch.no_grad():
        hf_out = hf.generate(**inputs, num_beams=1, max_new_tokens=20)[0].tolist()
    # (a source of max_len tokens still leaves the decoder its max_len - 1 output positions)
    mine = decode_ids(mt.model, [ids], beam=1, **mt.search_ids())[0]
    ended = _ended(hf_out, 20)
    assert mine == ended if ended is not None else mine[:19] == hf_out[1:20]
    assert len(mine) >= 3, mine  # not a translation that ends at once
    assert ended is not None  # translate cuts it so too:
    assert mt.translate(document, beam=1)[0] == hf_tok.decode(hf_out, skip_special_tokens=True)


def test_the_tokenizer_of_vocab_json_and_merges_txt_alone_is_bart_s(hf_bart_folder, tmp_path):
    """BartTokenizer's original files (no tokenizer.json): the same ids, </s> and <mask> kept
    whole, the same text back."""
    folder, sentences = hf_bart_folder
    bare = tmp_path / "bare"
    shutil.copytree(folder, bare)
    (bare / "tokenizer.json").unlink()
    assert main(["import", "hf-bart", str(bare), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    for text in [*sentences, "a <mask> sat"]:
        assert mt.encode_source(text) == hf_tok(text)["input_ids"], text
    ids = hf_tok(sentences[0])["input_ids"]
    assert mt.tokenizer.decode(ids) == hf_tok.decode(ids, skip_special_tokens=True)


def test_a_bart_preset_model_exports_as_a_bart(tmp_path):
    """A model built from the bart-tiny preset's options (aiayn's own special ids) exports as a
    BartForConditionalGeneration that computes the same logits."""
    from aiayn import Transformer, preset
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.tasks.seq2seq import Translator

    torch.manual_seed(0)
    tok = Tokenizer.train(ENGLISH * 5, 120)
    model = Transformer(preset("bart-tiny", vocab_size=tok.vocab_size, d_model=32, n_heads=4,
                               d_ff=64, max_len=64, dropout=0.0, attn_dropout=0.0,
                               activation_dropout=0.0)).eval()
    torch.nn.init.normal_(model.output.bias)
    Translator(model, tok).save(tmp_path / "mt")
    assert main(["export", "hf", "--model", str(tmp_path / "mt"), "--out", str(tmp_path / "hf")]) == 0
    hf, hf_tok = _hf(tmp_path / "hf")
    src = torch.tensor([tok.encode(ENGLISH[0])])
    tgt_in = torch.tensor([[1, 5, 9, 4]])  # aiayn's <s> starts the decoder
    assert hf.config.decoder_start_token_id == 1 and hf.config.pad_token_id == 0
    with torch.no_grad():
        assert (model(src, tgt_in) - hf(input_ids=src, decoder_input_ids=tgt_in).logits
                ).abs().max() <= 1e-5


@pytest.mark.parametrize("change, message", [
    ({"normalize_before": True}, "normalize_before: true: BART's layers are post-norm"),
    ({"add_final_layer_norm": True}, "add_final_layer_norm: true: mBART's LayerNorm"),
    ({"model_type": "mbart"}, "model_type='mbart': not a BART"),
    ({"tie_word_embeddings": False}, "tie_word_embeddings: false"),
    ({"encoder_layerdrop": 0.1}, "encoder_layerdrop: 0.1: aiayn has no LayerDrop"),
    ({"decoder_ffn_dim": 128}, "encoder_ffn_dim=64 but decoder_ffn_dim=128"),
    ({"pad_token_id": 999}, "pad_token_id=999: must be a token id"),
    ({"activation_function": "quick_gelu"}, "activation_function='quick_gelu' is not supported")])
def test_what_aiayn_lacks_is_refused_in_one_line_naming_the_key(hf_bart_folder, tmp_path, capsys,
                                                               change, message):
    folder, _ = hf_bart_folder
    crafted = tmp_path / "crafted"
    shutil.copytree(folder, crafted)
    config = json.loads((crafted / "config.json").read_text())
    (crafted / "config.json").write_text(json.dumps({**config, **change}))
    capsys.readouterr()
    assert main(["import", "hf-bart", str(crafted), "--out", str(tmp_path / "mt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "mt").exists()


def test_a_bart_folder_without_its_tokenizer_is_refused(hf_bart_folder, tmp_path, capsys):
    folder, _ = hf_bart_folder
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folder / name, bare / name)
    assert main(["import", "hf-bart", str(bare), "--out", str(tmp_path / "mt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no tokenizer: a BART folder needs tokenizer.json or " \
        "vocab.json + merges.txt" in err, err
    assert not (tmp_path / "mt").exists()


@pytest.mark.slow  # end-to-end: every command on the folder
def test_an_imported_bart_is_a_translation_folder_for_every_command(hf_bart_folder, tmp_path,
                                                                   capsys):
    """translate, eval, viz attention and the explorer (serve) read it as any translation
    folder, with BART's ids: the same translations everywhere, </s> the decoder's first input."""
    from aiayn.viz.inspect import Inspector
    from tests.builders import run

    folder, sentences = hf_bart_folder
    out = tmp_path / "mt"
    assert main(["import", "hf-bart", str(folder), "--out", str(out)]) == 0
    mt = aiayn.load(out)
    expected = mt.translate(sentences[:3])
    capsys.readouterr()
    code, stdout, _ = run(capsys, "translate", "--model", out, "--workers", "1", *sentences[:3])
    assert code == 0 and stdout == "".join(t + "\n" for t in expected)
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s in sentences[:3]))
    (tmp_path / "ref.txt").write_text("".join(s + "\n" for s in sentences[:3]))
    code, stdout, _ = run(capsys, "eval", "--model", out, "--src", tmp_path / "src.txt", "--ref",
                          tmp_path / "ref.txt", "--json", "--workers", "1", "--hyp",
                          tmp_path / "hyp.txt")
    assert code == 0 and json.loads(stdout)["sentences"] == 3
    assert (tmp_path / "hyp.txt").read_text() == "".join(t + "\n" for t in expected)
    code, stdout, _ = run(capsys, "viz", "attention", "--model", out, sentences[1], "--out",
                          tmp_path / "figures")
    assert code == 0 and f"output: {expected[1]}" in stdout
    seen = Inspector.load(out).run(sentences[1])
    assert seen.output == expected[1] and seen.labels["target"][0] == "</s>"
    assert seen.labels["source"][0] == "<s>" and seen.labels["source"][-1] == "</s>"


def test_a_translator_trained_from_the_bart_tiny_preset_exports_as_a_bart(tmp_path):
    """`aiayn train` with BART's options (dropout on attention and the FFN's hidden units too),
    then `aiayn export hf`: the same logits in transformers."""
    import yaml

    from tests.builders import write_config

    config = write_config(tmp_path)
    settings = yaml.safe_load(config.read_text())
    settings["model"] = {"preset": "bart-tiny", "d_model": 16, "n_heads": 2, "d_ff": 32,
                         "max_len": 64}
    config.write_text(yaml.safe_dump(settings))
    assert main(["train", str(config)]) == 0
    mt = aiayn.load(tmp_path / "model")
    assert mt.model.config.activation_dropout == 0.1 and mt.model.config.embedding_norm
    assert main(["export", "hf", "--model", str(tmp_path / "model"), "--out",
                 str(tmp_path / "hf")]) == 0
    hf, hf_tok = _hf(tmp_path / "hf")
    src = torch.tensor([mt.encode_source("3 1 4")])
    assert hf_tok("3 1 4")["input_ids"] == src[0].tolist()
    tgt_in = torch.tensor([[1, *mt.tokenizer.encode("drei eins")]])  # aiayn's <s> starts it
    with torch.no_grad():
        ours, theirs = mt.model(src, tgt_in), hf(input_ids=src, decoder_input_ids=tgt_in).logits
    assert (ours - theirs).abs().max() <= 1e-4 and ours.std() > 0.1


def _summed_log_likelihood(hf, hf_tok, source: str, target: str) -> tuple[float, int]:
    """transformers' log-likelihood of the target: its loss on the labels its tokenizer makes
    (text_target), the decoder reading them shifted right after decoder_start_token_id, times
    their count (the loss is their mean)."""
    labels = torch.tensor([hf_tok(text_target=target)["input_ids"]])
    with torch.no_grad():
        loss = hf(**hf_tok([source], return_tensors="pt"), labels=labels).loss
    return float(-loss * labels.shape[1]), labels.shape[1]


def test_score_is_transformers_summed_log_likelihood_in_float64(hf_bart_folder, tmp_path):
    """Translator.score of an imported BART scores BART's own target layout, labels <s> ... </s>
    and decoder input </s> <s> ...: what transformers' loss sums, in float64 to 1e-6, for pairs
    of several lengths scored in one padded batch."""
    folder, sentences = hf_bart_folder
    assert main(["import", "hf-bart", str(folder), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    mt.model.double()
    hf, hf_tok = _hf(folder)
    hf.double()
    sources, targets = sentences[:6], [sentences[9], "a", *sentences[5:9]]
    scored = mt.score(sources, targets)
    for (source, target), ours in zip(zip(sources, targets, strict=True), scored, strict=True):
        theirs, n = _summed_log_likelihood(hf, hf_tok, source, target)
        assert ours["tokens"] == n and abs(ours["logprob"] - theirs) <= 1e-6, (target, ours, theirs)
    assert len({round(s["logprob"], 3) for s in scored}) == len(scored)  # not one number
