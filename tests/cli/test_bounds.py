"""Count flags have upper bounds (issue 29): a value that would hang or exhaust the memory
(`generate --num-samples 1000000000` built its batch for ever) is refused in one line naming the
flag, the value and the bound (for memory, what it would take), exit 2, nothing written. Bounds
from memory are tested against a small machine (aiayn.sizes.available_bytes patched) where a
real one would need a giant input."""

import os

import pytest

from aiayn import sizes
from aiayn.cli import main
from aiayn.generation.config import MAX_BEAM
from tests.builders import run, write_config


@pytest.fixture(scope="module")
def lm_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lm")
    (tmp / "fox.txt").write_text("the quick brown fox jumps over the lazy dog\n" * 100)
    assert main(["lm", "train", "tiny", "model.d_model=32", "model.d_ff=64",
                 "data.tokenizer=char", "data.vocab_size=64", "train.max_tokens=512",
                 "train.max_steps=2", "train.tensorboard=false", "train.progress=false",
                 "train.eval_every=0", "--text", str(tmp / "fox.txt"), "--out",
                 str(tmp / "lm")]) == 0
    return tmp / "lm"


@pytest.fixture(scope="module")
def mt_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mt")
    assert main(["train", str(write_config(tmp, max_steps=2)), "--out", str(tmp / "m")]) == 0
    return tmp / "m"


def refused(capsys, *argv) -> str:
    """The one line of a refused command (exit 2, no traceback), refused by main or by argparse
    (SystemExit)."""
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def small_machine(monkeypatch, mib: int) -> None:
    monkeypatch.delenv(sizes.SKIP_ENV, raising=False)
    monkeypatch.setattr(sizes, "available_bytes", lambda device=None: mib * 2**20)


def test_num_samples_beyond_the_memory_is_refused_with_the_figures(lm_folder, capsys):
    err = refused(capsys, "generate", "--model", lm_folder, "--prompt", "the",
                  "--num-samples", "1000000000")
    assert "--num-samples 1000000000: would need ~" in err and "GiB for the batch" in err
    assert "; at most " in err and sizes.SKIP_ENV in err


def test_max_new_tokens_beyond_the_memory_is_refused(lm_folder, capsys):
    err = refused(capsys, "generate", "--model", lm_folder, "--max-new-tokens", str(10**13))
    assert f"--max-new-tokens {10**13}: would need ~" in err and "; at most " in err


def test_a_batch_that_fits_still_generates(lm_folder, capsys):
    code, out, err = run(capsys, "generate", "--model", lm_folder, "--prompt", "the",
                         "--num-samples", "3", "--max-new-tokens", "4", "--seed", "0")
    assert code == 0 and out.count("---") == 3, err


@pytest.mark.parametrize("argv, message", [
    (["--seed", str(2**64)], f"argument --seed: {2**64}: a seed must be in -2**63 .. 2**64 - 1"),
    (["--max-new-tokens", "-1"], "argument --max-new-tokens: -1: must be a non-negative integer"),
    (["--top-k", "-1"], "argument --top-k: -1: must be a non-negative integer"),
])
def test_generate_flags_out_of_range_are_refused_while_parsing(lm_folder, capsys, argv, message):
    assert message in refused(capsys, "generate", "--model", lm_folder, *argv)


def test_lm_eval_batch_size_beyond_the_memory_is_refused(lm_folder, tmp_path, capsys,
                                                         monkeypatch):
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 2000)
    small_machine(monkeypatch, 1)
    err = refused(capsys, "lm", "eval", "--model", lm_folder, "--text", text,
                  "--batch-size", "100000")
    assert "--batch-size 100000: would need ~" in err and "at most " in err


def test_lm_eval_batch_size_larger_than_the_text_is_no_problem(lm_folder, tmp_path, capsys,
                                                                 monkeypatch):
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox\n")
    small_machine(monkeypatch, 64)
    code, out, err = run(capsys, "lm", "eval", "--model", lm_folder, "--text", text,
                         "--batch-size", "1000000000")
    assert code == 0 and "perplexity" in out, err


@pytest.mark.parametrize("flag", ["--threads", "--workers"])
def test_threads_and_workers_are_bounded_by_the_cpus(mt_folder, capsys, flag):
    most = 4 * (os.cpu_count() or 1)
    err = refused(capsys, "translate", "--model", mt_folder, flag, "100000000", "1 2")
    assert f"argument {flag}: 100000000: at most {most} (4 per CPU thread" in err


def test_beam_wider_than_max_beam_is_refused(mt_folder, capsys):
    err = refused(capsys, "translate", "--model", mt_folder, "--beam", "100000", "1 2")
    assert f"argument --beam: 100000: at most {MAX_BEAM}" in err


def test_beam_and_batch_size_beyond_the_memory_are_refused(mt_folder, capsys, monkeypatch):
    small_machine(monkeypatch, 1)
    err = refused(capsys, "translate", "--model", mt_folder, "--beam", str(MAX_BEAM), "1 2")
    assert f"--beam {MAX_BEAM}: would need ~" in err and "for the search of one sentence" in err
    # beam 4 fits one sentence; 20,000 sentences in one batch do not
    sentences = [f"{i % 10} {i % 7}" for i in range(20000)]
    err = refused(capsys, "translate", "--model", mt_folder, "--beam", "4", "--workers", "1",
                  "--batch-size", "1000000", *sentences)
    assert "--batch-size 1000000: would need ~" in err and "at most " in err


def test_viz_positions_beyond_the_memory_is_refused_and_writes_nothing(tmp_path, capsys):
    # --d-model 2: its own check (a table of 10**7 positions, 0.6 GB) passes on any machine that
    # runs the suite, so the refusal is the positions' tables' (~3 PB), whatever memory is free
    err = refused(capsys, "viz", "positions", "--d-model", "2", "--max-len", str(10**7),
                  "--out", tmp_path / "f")
    assert f"--max-len {10**7}: would need ~" in err
    assert not (tmp_path / "f").exists()


def test_more_sentences_than_dates_numbers_has_are_refused_and_nothing_written(tmp_path, capsys):
    from aiayn.data.dates_numbers import most_sentences

    err = refused(capsys, "data", "dates-numbers", "--n-train", str(10**10), "--out",
                  tmp_path / "d")
    assert f"--n-train {10**10} + --n-valid 500 + --n-test 1000: the corpus has at most " \
        f"{most_sentences():,} distinct sentences" in err
    assert not (tmp_path / "d").exists()


def test_serve_threads_are_bounded(mt_folder, capsys):
    err = refused(capsys, "serve", "--model", mt_folder, "--threads", "100000000")
    assert "argument --threads: 100000000: at most " in err
