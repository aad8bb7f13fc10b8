"""`aiayn import hf-t5` and `aiayn export hf` of T5: folders transformers writes offline (random
weights, T5 v1.0 and v1.1 shapes, a SentencePiece vocabulary trained here) import with the same
token ids as transformers' tokenizer, the same logits (teacher-forced, within 1e-4), the same
greedy and beam-4 outputs as generate(); export -> import -> export is bit for bit; what is not
supported is refused in one line naming the field."""

import io
import json
import shutil

import pytest
import torch

import aiayn
from aiayn.cli import main
from aiayn.generation.search import decode_ids
from tests.parity import assert_same_function

transformers = pytest.importorskip("transformers")

ENGLISH = ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat",
           "the house is small", "my friend reads a book", "Café au lait, s'il vous plaît!",
           "translate English to German: the dog reads"]
SENTENCES = ENGLISH + ["a  fox   reads", "the dog reads", "a small cat", "my house", "über den Hund"]
UNUSED_ROWS = 3  # T5's embedding tables have rows past the tokenizer's (t5-small: 28)
# v1.1 also with heads narrower than d_model / num_heads (as t5-v1_1-small: 6 x 64 in 512);
# "v1.1-tied": as transformers 5 saves a v1.1 config of its own (tie_word_embeddings true,
# scale_decoder_outputs false, no lm_head.weight): tied and not scaled
VERSIONS = {"v1.0": dict(feed_forward_proj="relu", num_heads=4),
            "v1.1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False, num_heads=3),
            "v1.1-tied": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                              num_heads=4)}


def _t5_id(i: int) -> int:
    """T5's id of aiayn's id i: aiayn's <pad> 0 and <s> 1 are both T5's <pad> 0, the rest are
    one higher (aiayn has <s> at 1)."""
    return max(i - 1, 0)


def _write_t5(folder, version: str) -> None:
    """A T5 folder as transformers writes it: spiece.model (a unigram SentencePiece model
    trained here, T5's ids: <pad> 0, </s> 1, <unk> 2), the tokenizer files, random weights."""
    spm = pytest.importorskip("sentencepiece")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(ENGLISH * 20), model_writer=model,
                                   vocab_size=70, model_type="unigram", hard_vocab_limit=False,
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1, num_threads=1)
    (folder / "spiece.model").write_bytes(model.getvalue())
    tok = transformers.T5Tokenizer.from_pretrained(folder, extra_ids=5)
    tok.save_pretrained(folder)
    config = transformers.T5Config(
        vocab_size=len(tok) + UNUSED_ROWS, d_model=32, d_kv=8, d_ff=64, num_layers=2,
        num_decoder_layers=2, relative_attention_num_buckets=8,
        relative_attention_max_distance=20, dropout_rate=0.0, pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0, initializer_factor=3.0, **VERSIONS[version])  # varied outputs
    torch.manual_seed(0)
    t5 = transformers.T5ForConditionalGeneration(config)
    with torch.no_grad():
        for stack in (t5.encoder, t5.decoder):  # a bias that matters next to the scores
            stack.block[0].layer[0].SelfAttention.relative_attention_bias.weight.mul_(8)
        t5.shared.weight[1] *= 2.0  # a larger </s> row: some outputs end, at several lengths
    t5.save_pretrained(folder)
    if version == "v1.1":  # as google/t5-v1_1-*: an output layer of its own, not scaled
        from safetensors.torch import load_file, save_file

        state = load_file(folder / "model.safetensors")
        head = torch.randn(config.vocab_size, config.d_model,
                           generator=torch.Generator().manual_seed(1))
        head[1] *= 2.0
        save_file({**state, "lm_head.weight": head}, folder / "model.safetensors",
                  metadata={"format": "pt"})
        written = json.loads((folder / "config.json").read_text())
        written.pop("scale_decoder_outputs", None)
        (folder / "config.json").write_text(json.dumps({**written, "tie_word_embeddings": False}))


@pytest.fixture(scope="module")
def hf_t5_v10_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t5-v1.0")
    _write_t5(folder, "v1.0")
    return folder


@pytest.fixture(scope="module")
def hf_t5_v11_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t5-v1.1")
    _write_t5(folder, "v1.1")
    return folder


@pytest.fixture(scope="module")
def hf_t5_v11_tied_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("t5-v1.1-tied")
    _write_t5(folder, "v1.1-tied")
    return folder


@pytest.fixture(scope="module", params=list(VERSIONS))
def hf_t5_folder(request):
    name = {"v1.0": "hf_t5_v10_folder", "v1.1": "hf_t5_v11_folder",
            "v1.1-tied": "hf_t5_v11_tied_folder"}[request.param]
    return request.getfixturevalue(name), request.param


@pytest.fixture(scope="module")
def imported_t5(hf_t5_folder, tmp_path_factory):
    folder, version = hf_t5_folder
    out = tmp_path_factory.mktemp("imported") / "mt"
    assert main(["import", "hf-t5", str(folder), "--out", str(out)]) == 0
    return folder, out


def hf_t5_version(folder) -> str:
    """The version of a folder that _write_t5 wrote (its name: t5-VERSION, then a number)."""
    return next(v for v in sorted(VERSIONS, key=len, reverse=True)
                if folder.name.startswith(f"t5-{v}"))


def _order(mt) -> torch.Tensor:
    return torch.tensor([_t5_id(i) for i in range(mt.model.config.vocab_size)])


def test_a_t5_folder_imports_with_the_same_ids_and_logits(imported_t5):
    folder, out = imported_t5
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    mt = aiayn.load(out)
    assert mt.meta["source_eos"] is True and mt.meta["imported"] == "hf-t5"
    cfg = mt.model.config
    assert (cfg.tie_output, cfg.scale_output, cfg.gated_ffn) == \
        {"v1.0": (True, True, False), "v1.1": (False, False, True),
         "v1.1-tied": (True, False, True)}[hf_t5_version(folder)]
    assert mt.model.config.vocab_size == hf.config.vocab_size + 1  # <pad> is also aiayn's <s>
    for text in SENTENCES + ["<extra_id_0> a cat <extra_id_1>"]:
        assert [_t5_id(i) for i in mt.encode_source(text)] == hf_tok(text)["input_ids"], text
    # Teacher-forced logits of a padded batch: aiayn's columns are T5's in _order. The same
    # function in float64; in fp32 within 2x transformers' own error against float64 (unscaled
    # attention and the fixture's large weights give logits of ~30, whose last fp32 bits differ
    # with the summation order, and so between CPUs).
    batch = hf_tok(SENTENCES[:3], return_tensors="pt", padding=True)
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(mt.encode_source(s)) for s in SENTENCES[:3]], batch_first=True)
    assert torch.equal(src.clone().apply_(_t5_id), batch["input_ids"])
    tgt_in = torch.tensor([[1, 9, 5, 12, 7, 30, 4, 8, 11, 6, 20]] * 3)  # aiayn's ids, from <s>

    @torch.no_grad()
    def ours(dtype):
        return mt.model.to(dtype)(src, tgt_in)

    @torch.no_grad()
    def theirs(dtype):
        return hf.to(dtype)(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                            decoder_input_ids=tgt_in.clone().apply_(_t5_id)).logits[..., _order(mt)]

    assert_same_function(ours, theirs)
    assert ours(torch.float32).std() > 1


def test_score_is_transformers_summed_log_likelihood_in_float64(imported_t5):
    """Translator.score of an imported T5: the labels T5's tokenizer makes (... </s>), the
    decoder reading them after <pad> (aiayn's <s>), summed as transformers' loss sums them, in
    float64 to 1e-6, for pairs of several lengths scored in one padded batch."""
    folder, out = imported_t5
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval().double()
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    mt = aiayn.load(out)
    mt.model.double()
    sources, targets = SENTENCES[:5], [SENTENCES[9], "a", *SENTENCES[6:9]]
    scored = mt.score(sources, targets)
    for source, target, ours in zip(sources, targets, scored, strict=True):
        labels = torch.tensor([hf_tok(text_target=target)["input_ids"]])
        with torch.no_grad():
            loss = hf(**hf_tok([source], return_tensors="pt"), labels=labels).loss
        theirs = float(-loss * labels.shape[1])
        assert ours["tokens"] == labels.shape[1] and abs(ours["logprob"] - theirs) <= 1e-6, \
            (target, ours, theirs)
    assert len({round(s["logprob"], 3) for s in scored}) == len(scored)  # not one number


def _ended(ids: list[int], cap: int) -> bool:
    return 1 in ids[:cap - 1]  # T5's </s> before the cap: the whole output


def test_a_t5_folder_translates_greedy_and_beam_4_as_generate_does(imported_t5):
    folder, out = imported_t5
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
    mt = aiayn.load(out)
    # T5's own search (its generation_config.json): greedy
    assert mt.meta["generation"]["beam"] == 1
    cap, compared, longest = 20, {1: 0, 4: 0}, 0
    for text in SENTENCES:
        for beam in (1, 4):
            with torch.no_grad():  # HF's default penalty |Y|^1 and stopping rule (aiayn "avg",
                # "current_length"); T5 could emit <pad>, aiayn never does: banned on both sides
                hf_out = hf.generate(**hf_tok([text], return_tensors="pt"), num_beams=beam,
                                     do_sample=False, max_new_tokens=cap, length_penalty=1.0,
                                     early_stopping=False, bad_words_ids=[[0]])[0, 1:].tolist()
            ours = decode_ids(mt.model, [mt.encode_source(text)], beam=beam, max_extra=cap,
                              alpha=1.0, length_penalty="avg", early_stopping="current_length")[0]
            if _ended(hf_out, cap):
                assert [_t5_id(i) for i in ours] == hf_out[:hf_out.index(1)], (text, beam)
                theirs = hf_tok.decode(hf_out, skip_special_tokens=True)
                assert mt.translate(text, beam=beam, alpha=1.0, length_penalty="avg",
                                    early_stopping="current_length", max_extra=cap)[0] == theirs
                compared[beam] += 1
                longest = max(longest, hf_out.index(1))
            elif beam == 1:
                assert [_t5_id(i) for i in ours[:cap - 1]] == hf_out[:cap - 1], text
    assert compared[1] >= 2 and compared[4] >= 2 and longest >= 3, compared


def _t5_scores(hf, source_ids, sequences, cap: int) -> list[float]:
    """transformers' beam score of each of `sequences` (T5's ids, from <pad>, ending in </s>):
    its summed log-probabilities over T5's vocabulary, </s> forced at the cap scored 0, / |Y|
    (penalty 1.0), in the model's dtype (generate() itself scores in fp32 whatever the model's)."""
    scores = []
    for seq in sequences:
        seq = seq[:seq.index(1, 1) + 1]
        with torch.no_grad():
            logits = hf(input_ids=torch.tensor([source_ids]),
                        decoder_input_ids=torch.tensor([seq[:-1]])).logits[0]
        logp = logits.log_softmax(-1).gather(-1, torch.tensor(seq[1:])[:, None])[:, 0]
        if len(seq) - 1 == cap:  # forced_eos_token_id: </s> at the cap, scored 0
            logp[-1] = 0.0
        scores.append(float(logp.sum()) / (len(seq) - 1))
    return scores


# aiayn's stopping rule and generate()'s early_stopping that stop alike: "exact" bounds a live
# hypothesis by the penalty at the cap, as "never" does with a positive length penalty; "first_k"
# stops at K finished, as True does. ("current_length" and False differ by one in the length
# that divides the live score: generate() 5.x divides by the tokens so far, aiayn by them + 1.)
STOPPING = {"exact": "never", "first_k": True}


@pytest.mark.parametrize("stopping", list(STOPPING))
def test_beam_4_hypotheses_score_as_generate_scores_them_in_float64(imported_t5, stopping):
    """Every hypothesis of aiayn's beam 4 (tokens and score) is one of generate()'s
    (sequences_scores): T5's <pad> row, aiayn's <pad> and <s>, counted once in the search's
    softmax, as transformers counts it (then banned from the output on both sides). In float64
    to 1e-9 of transformers' model's own float64 scores of the same sequences (generate()
    scores in fp32: its sequences_scores agree to its own error). </s> forced at the cap
    (forced_eos), so that every hypothesis ends, the tiny model's loops too."""
    from aiayn.generation.config import GenerationConfig
    from aiayn.generation.search import search_hypotheses

    folder, out = imported_t5
    hf = transformers.T5ForConditionalGeneration.from_pretrained(folder).eval().double()
    mt = aiayn.load(out)
    mt.model.double()
    assert mt.search_ids()["counted_once"] == [0]  # aiayn's <pad>: its <s> is T5's <pad> too
    cap, ended = 12, 0
    config = GenerationConfig(beam=4, alpha=1.0, length_penalty="avg",
                              early_stopping=stopping, max_extra=cap,
                              max_new_tokens=cap - 1, forced_eos=True, **mt.search_ids())
    for text in SENTENCES:
        source = mt.encode_source(text)
        with torch.no_grad():
            hf_out = hf.generate(input_ids=torch.tensor([[_t5_id(i) for i in source]]),
                                 num_beams=4, num_return_sequences=4, do_sample=False,
                                 max_new_tokens=cap, length_penalty=1.0,
                                 early_stopping=STOPPING[stopping],
                                 bad_words_ids=[[0]], forced_eos_token_id=1,
                                 output_scores=True, return_dict_in_generate=True)
        sequences = hf_out.sequences.tolist()
        theirs = _t5_scores(hf, [_t5_id(i) for i in source], sequences, cap)
        assert max(abs(a - b) for a, b in zip(theirs, hf_out.sequences_scores.tolist(),
                                               strict=True)) < 1e-4  # generate()'s fp32
        ours = search_hypotheses(mt.model, torch.tensor([source]), config)[0]
        assert [[_t5_id(i) for i in h.tokens] for h in ours] == \
            [seq[1:seq.index(1, 1)] for seq in sequences], text
        for hyp, score in zip(ours, theirs, strict=True):
            assert abs(hyp.score - score) <= 1e-9, (text, hyp, score)
        ended += sum(len(h.tokens) < cap - 1 for h in ours)
    assert ended >= 3, ended  # not only hypotheses cut at the cap


def test_export_import_export_is_bit_for_bit_and_computes_the_same(imported_t5, tmp_path):
    """The export is T5's own folder again (tests/convert/test_hf_round_trip.py: every file), at
    T5's ids: the aiayn model's logits and greedy output there; imported and exported again, the
    same bytes."""
    _, out = imported_t5
    mt = aiayn.load(out)
    hf1, back, hf2 = tmp_path / "hf1", tmp_path / "back", tmp_path / "hf2"
    assert main(["export", "hf", "--model", str(out), "--out", str(hf1)]) == 0
    again = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf1).eval()
    assert type(again).__name__ == "T5ForConditionalGeneration"
    tok = transformers.AutoTokenizer.from_pretrained(hf1)
    assert tok(SENTENCES[0])["input_ids"] == [_t5_id(i) for i in mt.encode_source(SENTENCES[0])]
    # The import test's padded batch: fp32 is bounded by transformers' own error over all its
    # positions (over one short pair, 5 target positions, that error was 9x below ours on an
    # Intel Xeon with AMX by the luck of the summation order: the fixture's unscaled attention
    # over large activations amplifies the last bits of the encoder's output).
    batch = tok(SENTENCES[:3], return_tensors="pt", padding=True)
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(mt.encode_source(s)) for s in SENTENCES[:3]], batch_first=True)
    assert torch.equal(src.clone().apply_(_t5_id), batch["input_ids"])
    tgt_in = torch.tensor([[1, 9, 5, 12, 7, 30, 4, 8, 11, 6, 20]] * 3)  # aiayn's ids, from <s>

    @torch.no_grad()
    def ours(dtype):
        return mt.model.to(dtype)(src, tgt_in)

    @torch.no_grad()
    def theirs(dtype):
        logits = again.to(dtype)(input_ids=batch["input_ids"],
                                 attention_mask=batch["attention_mask"],
                                 decoder_input_ids=tgt_in.clone().apply_(_t5_id)).logits
        return logits[..., _order(mt)]

    assert_same_function(ours, theirs)
    mt.model.float()
    src = torch.tensor([mt.encode_source(SENTENCES[1])])  # greedy output: one sentence
    with torch.no_grad():
        hf_greedy = again.float().generate(input_ids=src.clone().apply_(_t5_id), num_beams=1,
                                           do_sample=False, max_new_tokens=20)[0, 1:].tolist()
    if 1 in hf_greedy:  # T5's </s>
        assert [_t5_id(i) for i in decode_ids(mt.model, src.tolist(), beam=1,
                                              max_extra=20)[0]] == hf_greedy[:hf_greedy.index(1)]
    assert main(["import", "hf-t5", str(hf1), "--out", str(back)]) == 0
    assert main(["export", "hf", "--model", str(back), "--out", str(hf2)]) == 0
    names = sorted(p.name for p in hf1.iterdir())
    assert names == sorted(p.name for p in hf2.iterdir()) and "spiece.model" in names
    for name in names:
        if name != "config.json":
            assert (hf1 / name).read_bytes() == (hf2 / name).read_bytes(), name
    configs = [json.loads((d / "config.json").read_text()) for d in (hf1, hf2)]
    assert [{k: v for k, v in c.items() if k != "aiayn"} for c in configs] == \
        [{k: v for k, v in configs[0].items() if k != "aiayn"}] * 2
    assert aiayn.load(back).translate(SENTENCES[:3], beam=1) == mt.translate(SENTENCES[:3], beam=1)


def test_a_spiece_only_folder_tokenizes_as_transformers_does(hf_t5_folder, tmp_path):
    """Without tokenizer.json: the tokenizer transformers builds from spiece.model."""
    folder, _ = hf_t5_folder
    bare = tmp_path / "spiece"
    bare.mkdir()
    for name in ("config.json", "model.safetensors", "spiece.model", "tokenizer_config.json",
                 "special_tokens_map.json"):
        if (folder / name).is_file():
            shutil.copy(folder / name, bare / name)
    assert main(["import", "hf-t5", str(bare), "--out", str(tmp_path / "mt")]) == 0
    mt = aiayn.load(tmp_path / "mt")
    hf_tok = transformers.AutoTokenizer.from_pretrained(bare)
    for text in SENTENCES + ["<extra_id_0> a cat <extra_id_1>"]:
        assert [_t5_id(i) for i in mt.encode_source(text)] == hf_tok(text)["input_ids"], text


def _with_config(folder, crafted, **values):
    shutil.copytree(folder, crafted)
    config = json.loads((crafted / "config.json").read_text())
    (crafted / "config.json").write_text(json.dumps({**config, **values}))
    return crafted


def test_folders_hf_t5_cannot_import_are_refused_in_one_line(hf_t5_folder, tmp_path, capsys):
    folder, _ = hf_t5_folder
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folder / name, bare / name)
    cases = [(bare, "no tokenizer: a T5 folder needs tokenizer.json or spiece.model"),
             (_with_config(folder, tmp_path / "g", model_type="gpt2"),
              "model_type='gpt2': not a T5"),
             (_with_config(folder, tmp_path / "a", feed_forward_proj="gated-swiglu"),
              "feed_forward_proj='gated-swiglu' is not supported"),
             (_with_config(folder, tmp_path / "b", d_kv=4),
              "the weights do not fit config.json (encoder.layers.0.self_attn.q_proj.weight is")]
    for source, message in cases:
        capsys.readouterr()
        assert main(["import", "hf-t5", str(source), "--out", str(tmp_path / "mt")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert not (tmp_path / "mt").exists()


def test_a_translator_t5_cannot_express_is_refused_naming_the_option(imported_t5, tmp_path,
                                                                    capsys):
    _, out = imported_t5
    changed = tmp_path / "changed"
    shutil.copytree(out, changed)
    meta = json.loads((changed / "config.json").read_text())
    meta["model"]["scale_attention"] = True
    (changed / "config.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["export", "hf", "--model", str(changed), "--out", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.scale_attention=True: T5 has scale_attention=False" \
        in err, err
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("options", [{}, {"gated_ffn": True, "activation": "gelu_tanh",
                                         "tie_output": False, "scale_output": False,
                                         "head_dim": 4}], ids=["v1.0", "v1.1"])
def test_a_translator_trained_from_the_t5_tiny_preset_exports_as_a_t5(tmp_path, options):
    """`aiayn train` with T5's options (aiayn's own tokenizer and special ids), then `aiayn
    export hf`: the same logits and greedy translations in transformers."""
    import yaml

    from tests.builders import write_config

    config = write_config(tmp_path)
    settings = yaml.safe_load(config.read_text())
    settings["model"] = {"preset": "t5-tiny", "d_model": 16, "n_heads": 2, "d_ff": 32,
                         "n_layers": 2, "max_len": 64, **options}
    config.write_text(yaml.safe_dump(settings))
    assert main(["train", str(config)]) == 0
    mt = aiayn.load(tmp_path / "model")
    assert mt.model.config.relative_attention_num_buckets == 32
    assert main(["export", "hf", "--model", str(tmp_path / "model"), "--out",
                 str(tmp_path / "hf")]) == 0
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert type(hf).__name__ == "T5ForConditionalGeneration"
    assert hf.config.decoder_start_token_id == 1 and hf.config.pad_token_id == 0
    sources = ["3 1 4", "2 7 1 8 2 8", "9"]
    src = torch.tensor([mt.encode_source(sources[0])])
    assert hf_tok(sources[0])["input_ids"] == src[0].tolist()
    tgt_in = torch.tensor([[1, *mt.tokenizer.encode("drei eins vier")]])  # aiayn's <s> first
    with torch.no_grad():
        ours, theirs = mt.model(src, tgt_in), hf(input_ids=src, decoder_input_ids=tgt_in).logits
    assert (ours - theirs).abs().max() <= 1e-4 * max(1.0, float(theirs.abs().max()))
    assert ours.std() > 0.1
    for text in sources:
        ids = mt.encode_source(text)
        with torch.no_grad():
            out = hf.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False,
                              max_new_tokens=len(ids) + 50)[0, 1:].tolist()
        if 2 in out:  # ended with </s> (aiayn's id 2)
            assert decode_ids(mt.model, [ids], beam=1)[0] == out[:out.index(2)], text


@pytest.mark.slow  # end-to-end: every command on the folder
def test_an_imported_t5_is_a_translation_folder_for_every_command(imported_t5, tmp_path, capsys):
    """translate, eval, viz attention, viz relative-bias and the explorer (serve) read it as any
    translation folder: the same translations everywhere, <s> (T5's <pad> row) the decoder's
    first input, </s> ending every source."""
    from aiayn.viz.inspect import Inspector
    from tests.builders import run

    _, out = imported_t5
    mt = aiayn.load(out)
    sentences = SENTENCES[:3]
    expected = mt.translate(sentences)
    capsys.readouterr()
    code, stdout, _ = run(capsys, "translate", "--model", out, "--workers", "1", *sentences)
    assert code == 0 and stdout == "".join(t + "\n" for t in expected)
    (tmp_path / "src.txt").write_text("".join(s + "\n" for s in sentences))
    (tmp_path / "ref.txt").write_text("".join(s + "\n" for s in sentences))
    code, stdout, _ = run(capsys, "eval", "--model", out, "--src", tmp_path / "src.txt", "--ref",
                          tmp_path / "ref.txt", "--json", "--workers", "1", "--hyp",
                          tmp_path / "hyp.txt")
    assert code == 0 and json.loads(stdout)["sentences"] == 3
    assert (tmp_path / "hyp.txt").read_text() == "".join(t + "\n" for t in expected)
    # (the figures and the explorer search with --beam, 4 by default; T5's own search is greedy)
    code, stdout, _ = run(capsys, "viz", "attention", "--model", out, sentences[1], "--beam", "1",
                          "--out", tmp_path / "figures")
    assert code == 0 and f"output: {expected[1]}" in stdout
    code, stdout, _ = run(capsys, "viz", "relative-bias", "--model", out, "--out",
                          tmp_path / "figures")
    assert code == 0 and (tmp_path / "figures" / "relative-bias.png").is_file()
    seen = Inspector.load(out).run(sentences[1], beam=1)
    assert seen.output == expected[1] and seen.labels["target"][0] == "<s>"
    assert seen.labels["source"][-1] == "</s>"


@pytest.mark.parametrize("name, options, message", [
    ("t5-tiny", {"norm": "layer_norm"}, "model.norm='layer_norm': T5 has norm='rms_norm'"),
    ("t5-tiny", {"positions": "sinusoidal"}, "model.positions='sinusoidal': T5 has positions='none'"),
    ("bart-tiny", {"relative_attention_num_buckets": 32},
     "model.relative_attention_num_buckets=32: BART has relative_attention_num_buckets=0"),
    ("tiny", {"norm": "rms_norm"}, "model.norm='rms_norm': Marian has norm='layer_norm'"),
    ("tiny", {"gated_ffn": True}, "model.gated_ffn=True: Marian has gated_ffn=False"),
    # Table 3 row (B)'s d_v apart from d_k: no exported family has it
    ("tiny", {"value_dim": 16}, "model.value_dim=16: Marian has value_dim=None"),
    ("t5-tiny", {"value_dim": 16}, "model.value_dim=16: T5 has value_dim=None"),
    ("bart-tiny", {"value_dim": 16}, "model.value_dim=16: BART has value_dim=None")])
def test_a_model_mixing_t5_and_other_options_is_refused_naming_the_option(tmp_path, capsys, name,
                                                                          options, message):
    """T5's relative bias with an option T5 lacks (or with BART's, which the BART export
    takes first): refused in one line, nothing written."""
    from aiayn import Transformer, preset
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.tasks.seq2seq import Translator

    tok = Tokenizer.train(ENGLISH * 5, 120)
    model = Transformer(preset(name, vocab_size=tok.vocab_size, d_model=16, n_heads=2, d_ff=32,
                               n_layers=1, **options))
    Translator(model, tok).save(tmp_path / "mt")
    capsys.readouterr()
    assert main(["export", "hf", "--model", str(tmp_path / "mt"), "--out",
                 str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "hf").exists()
