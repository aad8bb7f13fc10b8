"""`aiayn export hf`: a trained model folder -> a transformers folder that loads offline and
computes the same numbers (logits within 1e-4, the same greedy tokens); refusals name the option."""

import json

import pytest
import torch

import aiayn
from aiayn.cli import main
from aiayn.generation.lm import generate
from tests.builders import write_config
from tests.cli.test_lm import _train

transformers = pytest.importorskip("transformers")


def exported(model_dir, out, auto: str, architecture: str | None = None):
    """`aiayn export hf` of `model_dir` into `out`, read back by transformers' Auto classes:
    (the model, in eval mode, and its tokenizer). `architecture`: the class it must be."""
    assert main(["export", "hf", "--model", str(model_dir), "--out", str(out)]) == 0
    hf = getattr(transformers, auto).from_pretrained(out).eval()
    if architecture is not None:
        assert type(hf).__name__ == architecture
    return hf, transformers.AutoTokenizer.from_pretrained(out)


@pytest.fixture(scope="module")
def lm_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    torch.set_num_threads(1)
    # GPT-2's shape (the "tiny" preset: pre-norm, learned positions, GELU); not tied to the
    # defaults of a short run, so the weights are far from their initialisation.
    assert _train(tmp, tmp / "lm", "train.max_steps=60", "model.tie_embeddings=false") == 0
    return tmp / "lm"


def test_exported_language_model_is_a_gpt2_with_the_same_logits_and_greedy_tokens(
        lm_folder, tmp_path, capsys):
    out = tmp_path / "hf"
    hf, hf_tok = exported(lm_folder, out, "AutoModelForCausalLM", "GPT2LMHeadModel")
    assert "GPT2LMHeadModel" in capsys.readouterr().out
    lm = aiayn.load(lm_folder)
    text = "the quick brown fox"
    assert hf_tok(text)["input_ids"] == lm.tokenizer.encode(text)
    ids = torch.tensor([[1, *lm.tokenizer.encode(text)]])
    with torch.no_grad():
        ours, theirs = lm.model(ids), hf(ids).logits
    assert (ours - theirs).abs().max() <= 1e-4
    assert ours.std() > 0.5  # trained logits, not a flat distribution
    with torch.no_grad():
        greedy = generate(lm.model, ids, 20, temperature=0.0)
        hf_greedy = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20,
                                do_sample=False)
    assert greedy.tolist() == hf_greedy[:, :greedy.shape[1]].tolist()
    assert hf_tok.decode(hf_greedy[0, ids.shape[1]:], skip_special_tokens=True) == \
        lm.tokenizer.decode(greedy[0, ids.shape[1]:].tolist())
    meta = json.loads((out / "config.json").read_text())
    assert meta["model_type"] == "gpt2" and meta["tie_word_embeddings"] is False


def test_a_language_model_gpt2_cannot_express_is_refused_naming_the_option(tmp_path, capsys):
    assert _train(tmp_path, tmp_path / "lm", "train.max_steps=2", "model.positions=sinusoidal") == 0
    capsys.readouterr()
    assert main(["export", "hf", "--model", str(tmp_path / "lm"), "--out",
                 str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.positions='sinusoidal': GPT-2 has positions='learned'" \
        in err
    assert not (tmp_path / "hf").exists()


@pytest.fixture(scope="module")
def classifier_folder(tmp_path_factory):
    """A classifier fine-tuned after a few masked-LM steps (out/pretrain holds the MLM model)."""
    from tests.cli.test_encoder import _examples, _write_tsv

    tmp = tmp_path_factory.mktemp("export_enc")
    train = _write_tsv(tmp / "train.tsv", _examples(80, 0))
    assert main(["classify", "train", "tiny", "model.d_model=32", "model.d_ff=64",
                 "data.vocab_size=120", "data.mlm_steps=20", "train.max_steps=40",
                 "train.lr=3e-3", "train.warmup_steps=5", "train.progress=false",
                 "train.tensorboard=false", "train.eval_every=0", "--train", str(train),
                 "--out", str(tmp / "enc")]) == 0
    return tmp / "enc"


def test_exported_classifier_is_a_bert_with_the_same_tokens_and_logits(classifier_folder,
                                                                         tmp_path):
    out = tmp_path / "hf"
    hf, hf_tok = exported(classifier_folder, out, "AutoModelForSequenceClassification",
                          "BertForSequenceClassification")
    enc = aiayn.load(classifier_folder)
    texts = ["my ocean is big", "the old tomato", "a"]
    batch = hf_tok(texts, padding=True, return_tensors="pt")
    assert batch["input_ids"].tolist() == enc.batch(texts).tolist()  # [CLS] ... [SEP], padded
    with torch.no_grad():
        ours = enc.model.classify(enc.batch(texts))
        theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert (ours - theirs).abs().max() <= 1e-4 and ours.std() > 0.01
    assert [hf.config.id2label[i] for i in range(len(enc.labels))] == enc.labels


def test_exported_masked_lm_is_a_bert_for_masked_lm_that_knows_its_mask(classifier_folder,
                                                                       tmp_path):
    out = tmp_path / "hf"
    hf, hf_tok = exported(classifier_folder / "pretrain", out, "AutoModelForMaskedLM")
    enc = aiayn.load(classifier_folder / "pretrain")
    assert hf_tok.mask_token == "[MASK]" and hf_tok.mask_token_id == enc.special["mask"]
    ids = hf_tok(["my [MASK] is big"], return_tensors="pt")["input_ids"]
    assert enc.special["mask"] in ids[0].tolist()
    with torch.no_grad():
        assert (enc.model.mlm_logits(ids) - hf(input_ids=ids).logits).abs().max() <= 1e-4


def test_an_encoder_bert_cannot_express_is_refused_naming_the_option(tmp_path, capsys):
    from tests.cli.test_encoder import _examples, _write_tsv

    train = _write_tsv(tmp_path / "train.tsv", _examples(60, 0))
    assert main(["classify", "train", "tiny", "model.d_model=32", "model.d_ff=64",
                 "model.pool=mean", "data.vocab_size=120", "data.mlm_steps=0",
                 "train.max_steps=2", "train.progress=false", "train.tensorboard=false",
                 "train.eval_every=0", "--train", str(train), "--out", str(tmp_path / "enc")]) == 0
    capsys.readouterr()
    assert main(["export", "hf", "--model", str(tmp_path / "enc"), "--out",
                 str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.pool='mean': BERT has pool='cls'" in err
    assert not (tmp_path / "hf").exists()


@pytest.mark.slow
def test_exported_vit_is_a_vit_classifier_with_the_same_logits(tmp_path, capsys):
    from PIL import Image

    assert main(["vit", "train", "tiny", "train.max_steps=60", "train.warmup_steps=5", "train.progress=false",
                 "train.tensorboard=false", "train.eval_every=0", "--corpus", "digits", "--out",
                 str(tmp_path / "vit")]) == 0
    assert main(["export", "hf", "--model", str(tmp_path / "vit"), "--out",
                 str(tmp_path / "hf")]) == 0
    hf = transformers.AutoModelForImageClassification.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == "ViTForImageClassification"
    clf = aiayn.load(tmp_path / "vit")
    images = torch.rand(5, clf.model.config.channels, clf.model.config.image_size,
                        clf.model.config.image_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours, theirs = clf.model(images), hf(pixel_values=images).logits
    assert (ours - theirs).abs().max() <= 1e-4 and ours.std() > 0.1
    assert [hf.config.id2label[i] for i in range(len(clf.classes))] == clf.classes
    # the image processor feeds the model what aiayn feeds it: an image scaled to [0, 1]
    size = clf.model.config.image_size
    pixels = (torch.arange(size * size) * 7 % 256).reshape(size, size).to(torch.uint8)
    path = tmp_path / "digit.png"
    Image.fromarray(pixels.numpy(), mode="L").save(path)
    processor = transformers.AutoImageProcessor.from_pretrained(tmp_path / "hf")
    fed = processor(Image.open(path), return_tensors="pt", input_data_format="channels_last")
    assert torch.allclose(fed["pixel_values"][0, :1], pixels.float()[None] / 255, atol=1e-6)


@pytest.fixture(scope="module")
def translation_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export_mt")
    torch.set_num_threads(1)
    config = write_config(tmp, max_steps=800, save_every=0)
    assert main(["train", str(config), "model.dropout=0"]) == 0
    return tmp / "model"


@pytest.mark.slow
def test_exported_translator_is_a_marian_with_the_same_logits_and_translations(
        translation_folder, tmp_path):
    """Marian orders its sinusoids differently (all sines, then all cosines); the export
    renumbers the model's dimensions to match, so the numbers are the same."""
    from aiayn.tasks.seq2seq import decode_ids
    from tests.builders import digit_pairs

    out = tmp_path / "hf"
    hf, hf_tok = exported(translation_folder, out, "AutoModelForSeq2SeqLM", "MarianMTModel")
    mt = aiayn.load(translation_folder)
    sources = [s for s, _ in digit_pairs(6, 7)]
    ids = [mt.tokenizer.encode(s) for s in sources]
    assert hf_tok(sources)["input_ids"] == ids
    batch = hf_tok(sources, return_tensors="pt", padding=True)
    src, mask = batch["input_ids"], batch["attention_mask"]
    tgt = torch.tensor([[1, *mt.tokenizer.encode(t)] for _, t in digit_pairs(1, 7)] * len(ids))
    tgt = tgt[:, :4]
    with torch.no_grad():
        ours = mt.model(src, tgt)
        theirs = hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    keep = mask.bool().any(-1)
    assert (ours[keep] - theirs[keep]).abs().max() <= 1e-4
    assert ours.std() > 0.5
    greedy = decode_ids(mt.model, ids, beam=1)
    with torch.no_grad():
        hf_greedy = hf.generate(input_ids=src, attention_mask=mask, num_beams=1, do_sample=False,
                                max_new_tokens=60)
    strip = [[t for t in row if t not in (0, 1, 2)] for row in hf_greedy.tolist()]
    assert strip == greedy
    assert hf_tok.batch_decode(hf_greedy, skip_special_tokens=True) == mt.translate(sources, beam=1)
    # Beam search: fairseq's / HF's stopping rule and no length normalisation on both sides.
    beam = decode_ids(mt.model, ids, beam=4, alpha=0.0, early_stopping="first_k")
    with torch.no_grad():
        hf_beam = hf.generate(input_ids=src, attention_mask=mask, num_beams=4, do_sample=False,
                              length_penalty=0.0, early_stopping=True, max_new_tokens=60)
    assert [[t for t in row if t not in (0, 1, 2)] for row in hf_beam.tolist()] == beam


@pytest.fixture(scope="module")
def hf_gpt2_folder(tmp_path_factory):
    """A GPT-2 written by transformers (random weights, offline) with the original tokenizer
    files (vocab.json + merges.txt) of a byte-level BPE trained here."""
    from tokenizers import ByteLevelBPETokenizer

    folder = tmp_path_factory.mktemp("gpt2")
    text = ["the quick brown fox jumps over the lazy dog", "def parse(path): return path"] * 50
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(text, vocab_size=300, special_tokens=["<|endoftext|>"])
    tok.save_model(str(folder))
    eot = tok.token_to_id("<|endoftext|>")
    config = transformers.GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=64, n_embd=32,
                                     n_layer=2, n_head=2, bos_token_id=eot, eos_token_id=eot)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return folder, eot


def test_imported_gpt2_computes_what_transformers_computes_and_exports_back(
        hf_gpt2_folder, tmp_path, capsys):
    folder, eot = hf_gpt2_folder
    out = tmp_path / "lm"
    assert main(["import", "hf-gpt2", str(folder), "--out", str(out)]) == 0
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    lm = aiayn.load(out)
    assert lm.special == {"bos": eot, "eos": eot, "pad": eot, "unk": None}
    text = "the lazy fox"
    ids = torch.tensor([[eot, *lm.tokenizer.encode(text)]])
    with torch.no_grad():
        assert (lm.model(ids) - hf(ids).logits).abs().max() <= 1e-4
        hf_greedy = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12,
                                do_sample=False, pad_token_id=eot)
    new = [t for t in hf_greedy[0, ids.shape[1]:].tolist() if t != eot]
    assert lm.generate(text, max_new_tokens=12, temperature=0.0) == lm.tokenizer.decode(new)
    # the explorer's view of it starts from <|endoftext|> too, and continues the same way
    from aiayn.viz.inspect import Inspector

    seen = Inspector.load(out).run(text, max_new_tokens=12)
    assert seen.output == lm.tokenizer.decode(new)
    assert seen.labels["tokens"][0] == "<|endoftext|>"
    # lm eval scores <|endoftext|> text <|endoftext|>, as GPT-2 sees a document
    doc = torch.tensor([[eot, *lm.tokenizer.encode(text), eot]])
    with torch.no_grad():
        hf_loss = float(hf(doc, labels=doc).loss)
    assert lm.evaluate(text)["loss"] == pytest.approx(hf_loss, rel=1e-4)
    # and back to transformers, with GPT-2's own special tokens
    capsys.readouterr()
    assert main(["export", "hf", "--model", str(out), "--out", str(tmp_path / "hf")]) == 0
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        assert (again(ids).logits - hf(ids).logits).abs().max() <= 1e-4
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "hf").eos_token == "<|endoftext|>"


def test_a_gpt2_folder_without_its_tokenizer_is_refused(hf_gpt2_folder, tmp_path, capsys):
    import shutil

    folder, _ = hf_gpt2_folder
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folder / name, bare / name)
    assert main(["import", "hf-gpt2", str(bare), "--out", str(tmp_path / "lm")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no tokenizer.json (or vocab.json + merges.txt)" in err
    assert not (tmp_path / "lm").exists()


@pytest.mark.slow
def test_an_exported_translator_imports_back_unchanged(translation_folder, tmp_path, capsys):
    """aiayn -> MarianMTModel folder -> `aiayn import hf-marian` -> the same weights and
    translations (the d_model renumbering undone, aiayn's special ids kept)."""
    from safetensors.torch import load_file

    assert main(["export", "hf", "--model", str(translation_folder), "--out",
                 str(tmp_path / "hf")]) == 0
    assert main(["import", "hf-marian", str(tmp_path / "hf"), "--out", str(tmp_path / "back")]) == 0
    assert "imported" in capsys.readouterr().out
    a = load_file(str(translation_folder / "model.safetensors"))
    b = load_file(str(tmp_path / "back" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-7) for k in a)
    original, back = aiayn.load(translation_folder), aiayn.load(tmp_path / "back")
    assert back.meta["source_eos"] is False  # aiayn's own sources have no </s>
    sources = ["3 1 4 1 5", "2 7 1 8"]
    assert back.translate(sources) == original.translate(sources)


@pytest.fixture(scope="module")
def opus_mt_folder(tmp_path_factory):
    """An OPUS-MT-style folder written by transformers offline: random MarianMTModel weights
    (swish, scaled embeddings, </s> = 0, <unk> = 1, <pad> = the last id and the decoder's start)
    and MarianTokenizer's files: source.spm / target.spm (unigram SentencePiece models trained
    here, with the default nmt_nfkc normalisation) and one joint vocab.json."""
    import io

    spm = pytest.importorskip("sentencepiece")
    folder = tmp_path_factory.mktemp("opus")
    english = ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat",
               "the house is small", "my friend reads a book", "Café au lait, s'il vous plaît!"]
    german = ["der schnelle braune Fuchs springt über den faulen Hund", "eine Katze saß auf der Matte",
              "das Haus ist klein", "mein Freund liest ein Buch", "Größe: 12 Äpfel"]
    spms = {}
    for name, text in (("source", english), ("target", german)):
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(text * 20), model_writer=model,
                                       vocab_size=60, model_type="unigram",
                                       hard_vocab_limit=False)
        (folder / f"{name}.spm").write_bytes(model.getvalue())
        spms[name] = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = sorted({s.id_to_piece(i) for s in spms.values() for i in range(s.get_piece_size())}
                    - {"<unk>", "<s>", "</s>"})
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tok = transformers.MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"),
                                       str(folder / "vocab.json"))
    tok.save_pretrained(folder)
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=pad + 1, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=64, activation_function="swish",
        scale_embedding=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
        forced_eos_token_id=0, init_std=0.3, dropout=0.0)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():  # a larger </s> row: some translations end, at several lengths
        model.model.shared.weight[0] *= 2.85
    model.save_pretrained(folder)
    # OPUS-MT's own search: beam 4, HF's length penalty |Y|^1, stop at 4 finished
    (folder / "generation_config.json").write_text(json.dumps({
        "num_beams": 4, "length_penalty": 1.0, "early_stopping": True, "max_length": 64,
        "decoder_start_token_id": pad, "pad_token_id": pad, "eos_token_id": 0,
        "forced_eos_token_id": 0, "bad_words_ids": [[pad]]}))
    return folder, english + ["a  fox   reads", "über den Hund", "the dog reads", "a small cat",
                              "my house"]


def test_an_opus_mt_folder_imports_and_translates_as_transformers_does(opus_mt_folder, tmp_path,
                                                                        capsys):
    from aiayn.convert.hf_marian import vocabulary_order

    folder, sentences = opus_mt_folder
    out = tmp_path / "mt"
    assert main(["import", "hf-marian", str(folder), "--out", str(out)]) == 0
    capsys.readouterr()
    hf = transformers.MarianMTModel.from_pretrained(folder).eval()
    hf_tok = transformers.MarianTokenizer.from_pretrained(folder)
    mt = aiayn.load(out)
    vocab = json.loads((folder / "vocab.json").read_text())
    tokens = [None] * hf.config.vocab_size
    for token, i in vocab.items():
        tokens[i] = token
    order = vocabulary_order(hf.config.to_dict(), tokens, "config")
    pad = hf.config.pad_token_id
    assert order[:4] == [pad, pad, 0, 1]  # aiayn's <pad>, <s>, </s>, <unk>
    # The same pieces, then </s>, in Marian's ids.
    for text in sentences:
        assert [order[i] for i in mt.encode_source(text)] == hf_tok(text)["input_ids"], text
    # The same logits (aiayn's columns are Marian's in `order`).
    src = torch.tensor([mt.encode_source(sentences[0])])
    tgt_in = torch.tensor([[1, 5, 9, 4, 7]])
    with torch.no_grad():
        ours_logits = mt.model(src, tgt_in)
        theirs = hf(input_ids=torch.tensor([[order[i] for i in src[0]]]),
                    decoder_input_ids=torch.tensor([[order[i] for i in tgt_in[0]]])).logits
    assert (ours_logits - theirs[..., order]).abs().max() <= 1e-4 and ours_logits.std() > 1
    # The same greedy translations, tokens and text (Marian never produces <pad>).
    from aiayn.tasks.seq2seq import decode_ids

    finished = 0
    for text in sentences:
        with torch.no_grad():
            hf_out = hf.generate(**hf_tok([text], return_tensors="pt"), num_beams=1,
                                 do_sample=False, max_new_tokens=20,
                                 bad_words_ids=[[pad]])[0, 1:].tolist()
        ours = [order[i] for i in decode_ids(mt.model, [mt.encode_source(text)], beam=1,
                                             max_extra=20)[0]]
        if 0 in hf_out[:19]:  # ended with </s>: the whole translation
            assert ours == hf_out[:hf_out.index(0)], text
            assert mt.translate(text, beam=1)[0] == hf_tok.decode(hf_out, skip_special_tokens=True)
            finished += 1
        else:  # cut at 20 tokens, the last one forced to be </s> (forced_eos_token_id)
            assert ours[:19] == hf_out[:19], text
    assert finished >= 2
    # Beam search as the folder says (generation_config.json: beam 4, |Y|^1, first_k), the same
    # translations as transformers' generate() with that config.
    assert mt.meta["generation"] == {"beam": 4, "alpha": 1.0, "length_penalty": "avg",
                                     "early_stopping": "first_k", "no_repeat_ngram_size": 0}
    same = longest = 0
    for text in sentences:
        with torch.no_grad():
            hf_out = hf.generate(**hf_tok([text], return_tensors="pt"), max_new_tokens=20)
        hf_ids = hf_out[0, 1:].tolist()
        if 0 in hf_ids[:19]:  # ended before the cap
            assert mt.translate(text)[0] == hf_tok.decode(hf_ids, skip_special_tokens=True), text
            same += 1
            longest = max(longest, hf_ids.index(0))
    assert same >= 2 and longest >= 5  # not only translations that end at once
    # HF's no_repeat_ngram_size (beam 4 and greedy) gives the same translations as aiayn's.
    same = changed = 0
    for text in sentences:
        for beam in (1, 4):
            with torch.no_grad():
                free, hf_out = (hf.generate(**hf_tok([text], return_tensors="pt"), num_beams=beam,
                                            max_new_tokens=20, no_repeat_ngram_size=n,
                                            bad_words_ids=[[pad]])[0, 1:].tolist() for n in (0, 2))
            if 0 in hf_out[:19]:
                ours = mt.translate(text, beam=beam, no_repeat_ngram_size=2)[0]
                assert ours == hf_tok.decode(hf_out, skip_special_tokens=True), (text, beam)
                same, changed = same + 1, changed + (free != hf_out)
    assert same >= 4 and changed >= 1  # the ban changed some of the compared translations
    # Exported again, it is the OPUS-MT folder (test_hf_round_trip.py): Marian's ids, its
    # tokenizer appending </s>, the same logits.
    again, again_tok = exported(out, tmp_path / "again", "AutoModelForSeq2SeqLM")
    ids = again_tok([sentences[0]])["input_ids"][0]
    assert ids == [order[i] for i in mt.encode_source(sentences[0])]
    with torch.no_grad():
        logits = again(input_ids=torch.tensor([ids]),
                       decoder_input_ids=torch.tensor([[order[i] for i in tgt_in[0]]])).logits
    assert (logits[..., order] - ours_logits).abs().max() <= 1e-4


def test_folders_hf_marian_cannot_import_are_refused_in_one_line(opus_mt_folder, hf_gpt2_folder,
                                                                 tmp_path, capsys):
    import shutil

    folder, _ = opus_mt_folder
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folder / name, bare / name)
    separate = tmp_path / "separate"
    shutil.copytree(folder, separate)
    config = json.loads((separate / "config.json").read_text())
    (separate / "config.json").write_text(json.dumps({**config, "encoder_ffn_dim": 128}))
    cases = [(bare, "no tokenizer: a Marian folder needs vocab.json + source.spm"),
             (hf_gpt2_folder[0], "model_type='gpt2': not a Marian"),
             (separate, "encoder_ffn_dim=128 but decoder_ffn_dim=64")]
    for source, message in cases:
        assert main(["import", "hf-marian", str(source), "--out", str(tmp_path / "mt")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert not (tmp_path / "mt").exists()
