"""The Translator (aiayn.load(DIR).translate) on a small model trained here by translation.train."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import aiayn
from aiayn.cli import main
from aiayn.data.batching import pad_ids
from aiayn.errors import UserError
from aiayn.generation.search import greedy_search
from aiayn.tasks.seq2seq import Translator, decode_ids, experiment, train
from tests.builders import WORDS, digit_pairs, write_config, write_pairs


def tiny_experiment(tmp, steps=500, **train):
    write_pairs(digit_pairs(2000, 1), tmp / "train.src", tmp / "train.tgt")
    write_pairs(digit_pairs(50, 2), tmp / "valid.src", tmp / "valid.tgt")
    raw = {"model": {"preset": "tiny", "d_model": 32, "d_ff": 64},
           "data": {"train_src": str(tmp / "train.src"), "train_tgt": str(tmp / "train.tgt"),
                    "valid_src": str(tmp / "valid.src"), "valid_tgt": str(tmp / "valid.tgt"),
                    "vocab_size": 120, "valid_pairs": 50},
           "train": {"max_steps": steps, "max_tokens": 1200, "lr": 3e-3, "warmup_steps": 30,
                     "lr_schedule": "cosine", "eval_every": 0, "save_every": 100,
                     "log_every": 50, "tensorboard": False, "progress": False, "threads": 1,
                     "label_smoothing": 0.0, **train}}
    return experiment(raw)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("translator")
    result = train(tiny_experiment(tmp), out=tmp / "model", say=lambda m: None)
    assert result.step == 500 and result.folder == tmp / "model"
    return result.folder


@pytest.fixture(scope="module")
def translator(model_dir):
    return aiayn.load(model_dir)


@pytest.mark.slow
def test_load_returns_a_translator_that_learned_the_task(translator, model_dir):
    assert isinstance(translator, Translator)
    test = digit_pairs(100, seed=3)
    hyps = translator.translate([s for s, _ in test], beam=1)
    exact = sum(h == t for h, (_, t) in zip(hyps, test, strict=True)) / len(test)
    assert exact >= 0.7, exact  # from 0% before training; a few seconds of it on a tiny model
    assert translator.translate("3")[0] in WORDS  # a plain string works too
    assert (model_dir / "metrics.jsonl").read_text().count("valid_bleu") == 1  # final evaluation
    # data.source_eos is off by default: the source is its subwords alone (§3.1)
    assert translator.meta["source_eos"] is False
    assert translator.encode_source("3 1 4") == translator.tokenizer.encode("3 1 4")


@pytest.mark.slow
@pytest.mark.parametrize("beam", [1, 3])
def test_results_do_not_depend_on_batch_size_and_keep_order(translator, beam):
    sentences = [s for s, _ in digit_pairs(11, seed=4)] + ["", "9"]
    reference = translator.translate(sentences, beam=beam, batch_size=1)
    for batch_size in (4, 64):
        assert translator.translate(sentences, beam=beam, batch_size=batch_size) == reference
    assert reference[-2] == ""  # an empty sentence translates to nothing
    shuffled = list(reversed(sentences))
    assert translator.translate(shuffled, beam=beam, batch_size=5) == list(reversed(reference))


@pytest.mark.slow
def test_beam_1_is_greedy_search(translator):
    tok, model = translator.tokenizer, translator.model
    ids = [tok.encode(s) for s, _ in digit_pairs(10, seed=5)]
    direct = greedy_search(model, pad_ids(ids), bos_id=1, eos_id=2, pad_id=0)
    assert decode_ids(model, ids, beam=1) == direct


@pytest.mark.slow
def test_output_length_is_capped_by_max_len(translator):
    model = translator.model
    long = [[5] * (model.config.max_len + 20)]  # truncated to max_len, output <= max_len - 1
    out = decode_ids(model, long, beam=2, max_extra=50)
    assert len(out[0]) <= model.config.max_len - 1


@pytest.mark.slow
def test_cross_attention_has_tokens_on_both_axes(translator):
    src_tokens, tgt_tokens, weights = translator.cross_attention("3 1 4")
    cfg = translator.model.config
    assert weights.shape == (cfg.n_decoder_layers, cfg.n_heads, len(tgt_tokens), len(src_tokens))
    assert tgt_tokens[0] == "<s>"  # decoder inputs, as `aiayn viz attention` labels them
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))


@pytest.mark.slow
def test_cross_attention_is_what_viz_attention_shows(translator, model_dir):
    """The demo's attention.png (Translator.cross_attention) and `aiayn viz attention` (the
    Inspector) label and weigh the rows alike: decoder inputs, <s> first."""
    from aiayn.viz.inspect import Inspector

    src_tokens, tgt_tokens, weights = translator.cross_attention("3 1 4")
    cross = next(m for m in Inspector.load(model_dir).run("3 1 4", beam=1).maps
                 if m.kind == "cross")
    assert (cross.q_labels, cross.k_labels) == (tgt_tokens, src_tokens)
    for layer, w in enumerate(cross.layers):
        np.testing.assert_allclose(w, weights[layer].numpy(), atol=1e-3)  # rounded for JSON


@pytest.mark.slow
def test_bad_options_and_folders_are_user_errors(translator, tmp_path, model_dir):
    """Library errors are ValueErrors naming the Python parameter (the CLI names its flags)."""
    with pytest.raises(ValueError, match=r"^beam=0: must be a positive integer"):
        translator.translate(["1"], beam=0)
    with pytest.raises(ValueError, match=r"^length_penalty='fairseq': must be one of"):
        translator.translate(["1"], length_penalty="fairseq")
    with pytest.raises(ValueError, match=r"^batch_size=0: must be a positive integer"):
        translator.translate(["1"], batch_size=0)
    with pytest.raises(UserError, match="model folder not found"):
        aiayn.load(tmp_path / "missing")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd/config.json").write_text('{"family": "unknown", "model": {}}')
    with pytest.raises(UserError, match="unknown model family 'unknown'"):
        aiayn.load(tmp_path / "odd")


def test_beam_search_does_not_stop_while_a_live_hypothesis_can_win():
    # Unlikely beams ("B", then EOS at 0.9) end early and fill the finished list, while the
    # likely hypothesis A A A A is still growing; stopping at `beam` finished ones returned junk
    # (85.6% instead of 99.9% test exact match on the demo model).
    from tests.generation.test_search import BOS, EOS, PAD, ScriptedModel, A, B  # noqa: I001  (the lead's fake model)

    grow = {A: 0.9, B: 0.05, EOS: 0.05}
    table = {(): grow, (A,): grow, (A, A): grow, (A, A, A): grow,
             (A, A, A, A): {EOS: 0.98, A: 0.01, B: 0.01}}
    model = ScriptedModel(table, {EOS: 0.9, A: 0.05, B: 0.05})
    src = torch.tensor([[5, 6, 7]])
    ids = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)
    assert greedy_search(model, src, **ids) == [[A, A, A, A]]
    from aiayn.generation.search import beam_search
    for beam in (2, 3, 4):
        assert beam_search(model, src, beam=beam, **ids) == [[A, A, A, A]]


@pytest.mark.slow
def test_score_is_the_teacher_forced_log_likelihood(translator):
    """Translator.score: batch-size independent, equal to the training loss's NLL of the same
    pairs, and higher for the right translation than for a wrong one."""
    pairs = digit_pairs(12, 9)
    src, tgt = [s for s, _ in pairs], [t for _, t in pairs]
    batched = translator.score(src, tgt, batch_size=64)
    one_by_one = [translator.score([s], [t], batch_size=1)[0] for s, t in pairs]
    for a, b in zip(batched, one_by_one, strict=True):
        assert a["tokens"] == b["tokens"]
        assert a["logprob"] == pytest.approx(b["logprob"], abs=1e-4)
    from aiayn.data.batching import collate
    from aiayn.training.losses import label_smoothed_nll
    tok = translator.tokenizer
    batch = collate([(tok.encode(s), tok.encode(t)) for s, t in pairs])
    with torch.no_grad():
        _, nll, n = label_smoothed_nll(translator.model(batch.src, batch.tgt_in), batch.tgt_out, 0.0)
    assert n == sum(s["tokens"] for s in batched)
    assert -sum(s["logprob"] for s in batched) == pytest.approx(float(nll), rel=1e-5)
    wrong = translator.score(src, tgt[1:] + tgt[:1])
    assert sum(s["logprob"] for s in batched) > sum(s["logprob"] for s in wrong) + 10
    with pytest.raises(UserError, match="2 sources but 1 targets"):
        translator.score(["1", "2"], ["eins"])


def test_source_eos_is_trained_recorded_and_read_back(tmp_path):
    """data.source_eos=true: every training source ends with </s>, the folder records it, and the
    loaded Translator gives </s> after the source as training did (translate, score, attention)."""
    from aiayn.data.special import EOS
    from aiayn.tasks.seq2seq import encode_pairs

    exp = tiny_experiment(tmp_path, steps=20, save_every=0)
    exp.data.source_eos = True
    loaded = aiayn.load(train(exp, out=tmp_path / "model", say=lambda m: None).folder)
    assert loaded.meta["source_eos"] is True
    assert loaded.encode_source("3 1 4") == loaded.tokenizer.encode("3 1 4") + [EOS]
    ids = encode_pairs(loaded.tokenizer, [("3 1 4", "drei eins vier")], 64, source_eos=True)
    assert ids[0][0] == loaded.encode_source("3 1 4")
    src_tokens, _, _ = loaded.cross_attention("3 1 4")
    assert src_tokens[-1] == "</s>"
    assert len(loaded.translate(["3 1 4", "5"], beam=2)) == 2


@pytest.mark.slow
@pytest.mark.parametrize("beam", [1, 3])
def test_worker_processes_give_the_same_translations(translator, beam):
    """translate(workers=2): two forked CPU processes decode alternate batches; the output is
    what one process gives, in input order."""
    sources = [s for s, _ in digit_pairs(40, 11)]
    one = translator.translate(sources, beam=beam, batch_size=8)
    assert translator.translate(sources, beam=beam, batch_size=8, workers=2) == one
    assert translator.translate(sources, beam=beam, batch_size=8, workers=3) == one


@pytest.mark.slow
@pytest.mark.parametrize("precision, bleu_tolerance", [("bf16", 0.3), ("int8", 1.0)])
def test_reduced_precision_decodes_close_to_fp32(translator, precision, bleu_tolerance, tmp_path):
    """--precision bf16 / int8 (aiayn.nn.precision): the trained model's beam-4 BLEU on 1,000
    held-out pairs within `bleu_tolerance` of fp32's; beam 1 is greedy, worker processes
    change nothing, and the fp32 translator (the module's fixture) is left as it was.

    The tolerance: bf16 is the issue's 0.3 (measured here -0.12). int8 quantizes each call's
    activations with one scale for the whole batch, and this d_model-32 model is sensitive to
    that: -0.37 here at batch 64 (-0.24 at batch 8; on 200 pairs -1.04 to +0.40 by batch size),
    so 1.0; on gettext-small int8 scored +0.02 and bf16 -0.10
    (benchmarks/RESULTS.md, "Against CTranslate2")."""
    from aiayn.tasks.seq2seq import score_translations

    test = digit_pairs(1000, seed=13)
    sources, refs = [s for s, _ in test], [t for _, t in test]
    fp32 = score_translations(translator.translate(sources, beam=4), refs)["bleu"]
    reduced = Translator(translator.model, translator.tokenizer, meta=translator.meta)
    assert reduced.to_precision(precision) is reduced and reduced.model is not translator.model
    hyps = reduced.translate(sources, beam=4)
    assert abs(score_translations(hyps, refs)["bleu"] - fp32) <= bleu_tolerance, precision
    some = sources[:200]
    assert reduced.translate(some, beam=4, batch_size=32, workers=2) == \
        reduced.translate(some, beam=4, batch_size=32)
    ids = [reduced.tokenizer.encode(s) for s in sources[:40]]
    greedy = greedy_search(reduced.model, pad_ids(ids), bos_id=1, eos_id=2, pad_id=0)
    assert decode_ids(reduced.model, ids, beam=1, batch_size=40) == greedy
    assert all(p.dtype == torch.float32 for p in translator.model.parameters())
    with pytest.raises(UserError, match=f"decoding in {precision} is not saved"):
        reduced.save(tmp_path / "copy")


@pytest.mark.slow
def test_auto_workers_are_one_process_per_cpu_thread(translator, monkeypatch):
    """workers="auto" (the CLI's default): as many processes as torch has CPU threads, each
    batch decoded as in one process; one process on a GPU or off Linux."""
    import aiayn.generation.search as search
    from aiayn.errors import ConfigError
    from aiayn.generation.workers import resolve_workers

    used = []

    def spy(fn, batches, workers=1):
        used.append(workers)
        return map_batches(fn, batches, workers)

    map_batches = search.map_batches
    monkeypatch.setattr(search, "map_batches", spy)
    sources = [s for s, _ in digit_pairs(24, 12)]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert resolve_workers("auto", "cpu") == 2
        assert translator.translate(sources, beam=2, batch_size=8, workers="auto") == \
            translator.translate(sources, beam=2, batch_size=8, workers=1)
        assert used == [2, 1]
    finally:
        torch.set_num_threads(before)
    assert resolve_workers("auto", "cuda") == 1 and resolve_workers(3, "cpu") == 3
    monkeypatch.setattr(sys, "platform", "darwin")
    assert resolve_workers("auto", "cpu") == 1
    with pytest.raises(ConfigError, match="positive integer or 'auto'"):
        resolve_workers("many", "cpu")


@pytest.mark.slow
def test_workers_run_one_thread_so_a_fork_after_parallel_work_cannot_hang():
    """After the parent has run a parallel region, a forked child that opens one of its own hangs
    (GNU libgomp's pool does not survive fork): each worker must run one thread, whatever the
    parent's thread count (map_batches once gave each threads // workers, here 2: a hang)."""
    script = textwrap.dedent("""
        import torch
        from aiayn.generation.workers import map_batches
        torch.set_num_threads(4)
        a = torch.randn(1000, 1000)
        for _ in range(3):
            a @ a  # the parent's thread pool is up
        out = map_batches(lambda b: (torch.get_num_threads(), float((a @ a).sum())), [0, 1, 2], 2)
        print([t for t, _ in out], out[0][1] == out[1][1] == out[2][1])
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the hung workers too, not only their parent
        proc.communicate()
        pytest.fail("map_batches hung in a forked worker")
    assert proc.returncode == 0 and out.split() == ["[1,", "1,", "1]", "True"], err


def test_map_batches_keeps_order_and_reports_a_failing_worker():
    from aiayn.errors import ConfigError
    from aiayn.generation.workers import check_workers, map_batches

    batches = [[i, i + 1] for i in range(7)]
    assert map_batches(sum, batches, workers=3) == [sum(b) for b in batches]
    assert map_batches(sum, batches[:1], workers=4) == [1]  # more workers than batches

    def fail_on_five(batch):
        if batch[0] == 5:  # batch 5, which worker 5 % 2 = 1 decodes
            raise ValueError("bad batch")
        return sum(batch)

    with pytest.raises(UserError, match="decoding worker 1 failed: ValueError: bad batch"):
        map_batches(fail_on_five, batches, workers=2)
    with pytest.raises(ConfigError, match="workers=0"):
        check_workers(0, "cpu")
    with pytest.raises(ConfigError, match="for the CPU"):
        check_workers(2, "cuda")


def test_translator_save_writes_a_folder_that_loads_and_translates_the_same(tmp_path):
    import aiayn

    assert main(["train", str(write_config(tmp_path, max_steps=30))]) == 0
    mt = aiayn.load(tmp_path / "model")
    copy = mt.save(tmp_path / "copy")
    again = aiayn.load(copy)
    assert again.translate(["12 34", "5"], beam=2) == mt.translate(["12 34", "5"], beam=2)

