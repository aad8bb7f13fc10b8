"""`aiayn train | translate | eval | average` end to end, and their one-line errors."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from aiayn.cli import main
from tests.builders import run, write_config


def folder_digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    config = write_config(tmp)
    assert main(["train", str(config)]) == 0
    return tmp, config, tmp / "model"


def test_train_writes_a_self_describing_folder(trained):
    _, _, model = trained
    names = {p.name for p in model.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "train_state.pt",
            "checkpoints", "metrics.jsonl"} <= names
    meta = json.loads((model / "config.json").read_text())
    assert meta["family"] == "transformer" and meta["experiment"]["train"]["max_steps"] == 20
    first_valid = (model.parent / "valid.src").read_text().splitlines()[0]
    assert meta["example"] == first_valid  # the explorer opens with it


def test_resume_continues_and_only_train_keys_may_change(trained, capsys, tmp_path):
    tmp, config, model = trained
    copy = tmp_path / "model"
    import shutil
    shutil.copytree(model, copy)
    code, out, _ = run(capsys, "train", config, "--out", copy, "--resume", "train.max_steps=30")
    assert code == 0 and "trained 30 steps" in out
    before = folder_digest(copy)
    code, _, err = run(capsys, "train", config, "--out", copy, "--resume", "model.d_model=32")
    assert code == 2 and "model.d_model=32 differs" in err
    assert folder_digest(copy) == before


def test_resume_identifies_the_data_by_content_not_by_its_path(trained, capsys, tmp_path):
    """--resume compared data paths only: it went on over changed training data, and refused the
    same file spelled another way. Now the same content under another spelling or another place
    resumes; changed content under the same name is refused, naming the key and the file."""
    import shutil

    tmp, _, model = trained
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.src", "train.tgt", "valid.src", "valid.tgt"):
        shutil.copy(tmp / name, data / name)
    config = write_config(tmp_path, name="here.yaml")  # the same pairs, in tmp_path
    written = yaml.safe_load(config.read_text())
    written["data"]["train_src"] = str(tmp_path / "data" / ".." / "data" / "train.src")
    written["data"]["train_tgt"] = str(data / "train.tgt")
    config.write_text(yaml.safe_dump(written))
    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    code, out, err = run(capsys, "train", config, "--out", copy, "--resume", "train.max_steps=25")
    assert code == 0 and "trained 25 steps" in out, err
    with (data / "train.tgt").open("a", encoding="utf-8") as f:
        f.write("eins\n")  # one more line: other data under the same name
    with (data / "train.src").open("a", encoding="utf-8") as f:
        f.write("1\n")
    before = folder_digest(copy)
    code, _, err = run(capsys, "train", config, "--out", copy, "--resume", "train.max_steps=30")
    assert code == 2 and err.count("\n") == 1, err
    assert "data.train_src=" in err and "is not the data the run" in err and "sha256" in err
    assert folder_digest(copy) == before


def test_resume_a_folder_written_before_data_source_eos_existed(trained, capsys, tmp_path):
    """A folder whose recorded data settings lack source_eos trained without it: it resumes with
    the default, and refuses data.source_eos=true."""
    tmp, config, model = trained
    copy = tmp_path / "model"
    import shutil
    shutil.copytree(model, copy)
    meta = json.loads((copy / "config.json").read_text())
    del meta["experiment"]["data"]["source_eos"]
    (copy / "config.json").write_text(json.dumps(meta))
    code, _, err = run(capsys, "train", config, "--out", copy, "--resume", "data.source_eos=true")
    assert code == 2 and "data.source_eos=True differs" in err and "(False)" in err
    code, out, _ = run(capsys, "train", config, "--out", copy, "--resume", "train.max_steps=30")
    assert code == 0 and "trained 30 steps" in out


def test_translate_arguments_and_stdin_in_order(trained, capsys, monkeypatch):
    _, _, model = trained
    code, out, _ = run(capsys, "translate", "--model", model, "1 2", "3", "--beam", "2",
                       "--device", "cpu")
    assert code == 0 and len(out.splitlines()) == 2
    import io
    lines = ["4 4", "", "5 6 7"]
    stdin = io.TextIOWrapper(io.BytesIO("\n".join(lines).encode() + b"\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out2, _ = run(capsys, "translate", "--model", model, "--beam", "1", "--batch-size", "1")
    assert code == 0 and len(out2.splitlines()) == 3 and out2.splitlines()[1] == ""
    from aiayn import load
    assert out2.splitlines() == load(model).translate(lines, beam=1)
    code, out3, _ = run(capsys, "translate", "--model", model, "1 2", "3", "--beam", "2",
                        "--batch-size", "1", "--workers", "2",  # two decoding processes
                        "--device", "cpu")  # (worker processes are a CPU mode)
    assert code == 0 and out3 == out


def test_translate_and_eval_without_repeated_ngrams(trained, capsys):
    tmp, _, model = trained
    from aiayn import load
    from aiayn.tasks.seq2seq import decode_ids
    translator = load(model)
    sources = (tmp / "valid.src").read_text(encoding="utf-8").splitlines()
    ids = [translator.encode_source(s) for s in sources]
    for beam in (1, 3):
        lengths = translator.length_limits()  # min_length 1: no empty translation
        free = decode_ids(translator.model, ids, beam=beam, **lengths)
        assert any(len(set(o)) < len(o) for o in free), free  # premise: some subword repeats
        out = decode_ids(translator.model, ids, beam=beam, no_repeat_ngram_size=1, **lengths)
        assert all(len(set(o)) == len(o) for o in out), out  # 1-grams: no subword twice
        code, text, _ = run(capsys, "translate", "--model", model, *sources, "--beam", str(beam),
                            "--no-repeat-ngram-size", "1")
        assert code == 0 and text.splitlines() == translator.tokenizer.decode_batch(out)
    code, text, _ = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src", "--ref",
                        tmp / "valid.tgt", "--json", "--no-repeat-ngram-size", "1",
                        "--hyp", tmp / "ngram.hyp")
    assert code == 0 and "bleu" in json.loads(text)
    assert (tmp / "ngram.hyp").read_text(encoding="utf-8").splitlines() == \
        translator.translate(sources, no_repeat_ngram_size=1)


def test_eval_reports_sacrebleu_chrf_exact_match_and_speed(trained, capsys):
    tmp, _, model = trained
    code, out, _ = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src",
                       "--ref", tmp / "valid.tgt", "--json", "--beam", "1", "--hyp", tmp / "hyp.txt",
                       "--device", "cpu")
    assert code == 0
    scores = json.loads(out)
    assert {"bleu", "chrf", "exact_match", "bleu_signature", "chrf_signature",
            "sentences_per_s", "tokens_per_s"} <= set(scores)
    assert scores["bleu_signature"].startswith("nrefs:1|") and scores["sentences"] == 8
    assert len((tmp / "hyp.txt").read_text().splitlines()) == 8
    code, out, _ = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src",
                       "--ref", tmp / "valid.tgt", "--beam", "1")
    assert code == 0 and out.startswith("BLEU ") and "chrF" in out and "exact match" in out
    import torch
    before = torch.get_num_threads()
    try:
        code, out, _ = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src",
                           "--ref", tmp / "valid.tgt", "--json", "--threads", "1")
        assert code == 0 and json.loads(out)["threads"] == 1 and json.loads(out)["workers"] == 1
        # The default, --workers auto: one process per thread (2 here), at most one per batch;
        # the translations of the first (one-process) run above.
        for batch, workers in (("3", 2), ("8", 1)):
            code, out, _ = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src",
                               "--ref", tmp / "valid.tgt", "--json", "--threads", "2", "--beam",
                               "1", "--batch-size", batch, "--hyp", tmp / f"hyp{batch}.txt",
                               "--device", "cpu")  # worker processes are a CPU mode
            assert code == 0 and json.loads(out)["workers"] == workers, out
            assert json.loads(out)["bleu"] == scores["bleu"]
            assert (tmp / f"hyp{batch}.txt").read_text() == (tmp / "hyp.txt").read_text()
    finally:
        torch.set_num_threads(before)


def test_average_last_two_checkpoints(trained, capsys, tmp_path):
    _, _, model = trained
    code, out, err = run(capsys, "average", "--model", model, "--last", "2", "--out", tmp_path / "avg")
    assert code == 0 and "steps 10, 20" in out
    # Steps 10..20 of a 20-step run: far wider than §6.1's last few percent.
    assert "warning: the checkpoints averaged (steps 10..20) span 50% of the 20-step run" in err
    # The run kept a running average (the default): each checkpoint holds one already.
    assert ("note: each checkpoint already holds the run's running average of the weights "
            "(train.average_width=0.02); averaging them widens that window") in err
    code, out, _ = run(capsys, "translate", "--model", tmp_path / "avg", "1 2")
    assert code == 0 and len(out.splitlines()) == 1


@pytest.mark.parametrize("experiment", [{"train": {"average_width": 0}}, {"train": {}}, "x"])
def test_running_average_note_only_for_averaged_runs(experiment):
    from aiayn.folder.checkpoint import running_average_note

    assert running_average_note({"experiment": experiment}) is None
    assert "average_width=0.05" in running_average_note(
        {"experiment": {"train": {"average_width": 0.05}}})


def test_average_refuses_fewer_checkpoints_than_asked(trained, capsys, tmp_path):
    _, _, model = trained
    code, _, err = run(capsys, "average", "--model", model, "--out", tmp_path / "avg")
    assert code == 2 and "only 2 checkpoints (steps 10, 20) for --last 5" in err
    assert not (tmp_path / "avg").exists()
    code, out, _ = run(capsys, "average", "--model", model, "--allow-fewer", "--out", tmp_path / "avg")
    assert code == 0 and "averaged 2 checkpoints" in out


def test_translate_and_eval_a_saved_step(trained, capsys, tmp_path):
    tmp, _, model = trained
    code, out, _ = run(capsys, "translate", "--model", model, "--checkpoint", "10", "1 2", "3")
    assert code == 0 and len(out.splitlines()) == 2
    code, out, _ = run(capsys, "eval", "--model", model, "--checkpoint", "20", "--src",
                       tmp / "valid.src", "--ref", tmp / "valid.tgt", "--json")
    final = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src", "--ref",
                tmp / "valid.tgt", "--json")[1]
    assert code == 0 and json.loads(out)["bleu"] == json.loads(final)["bleu"]  # step 20 = final
    code, _, err = run(capsys, "translate", "--model", model, "--checkpoint", "7", "1")
    assert code == 2 and "no checkpoint of step 7 (saved steps: 10, 20)" in err


def _bad_corpus_config(tmp, kind):
    config = write_config(tmp, name=f"{kind}.yaml")
    data = yaml.safe_load(config.read_text())
    src, tgt = tmp / f"{kind}.src", tmp / f"{kind}.tgt"
    if kind == "mismatched":
        src.write_text("1\n2\n3\n"), tgt.write_text("eins\nzwei\n")
    elif kind == "empty":
        src.write_text(""), tgt.write_text("")
    else:  # invalid UTF-8 on line 2
        src.write_bytes(b"1\n\xff\xfe\n"), tgt.write_text("eins\nzwei\n")
    data["data"].update(train_src=str(src), train_tgt=str(tgt))
    config.write_text(yaml.safe_dump(data))
    return config


@pytest.mark.parametrize("case, message", [
    ("mismatched", "mismatched line counts"),
    ("empty", "empty corpus"),
    ("invalid-utf8", "invalid UTF-8"),
    ("unknown-key", "unknown field for TrainConfig"),
    ("non-numeric", "max_steps='ten': must be int"),
    ("existing-folder", "already exists and holds a model"),
    ("missing-model", "model folder not found"),
    ("missing-config", "config file not found"),
    ("eval-mismatch", "mismatched line counts"),
    ("average-missing", "model folder not found"),
    # `aiayn train auto`'s ensemble folder (ensemble.json, no config.json): a one-model command
    # names it and where its models are
    ("average-ensemble", "ens holds an ensemble (ensemble.json), not one model: `aiayn translate`"),
    ("out-in-proc", "/proc/aiayn-test: No such file or directory"),
    ("out-under-a-file", "train.src/sub: Not a directory"),
    ("hyp-folder-missing", "--hyp"),
])
def test_bad_input_is_one_line_non_zero_and_leaves_folders_alone(trained, capsys, tmp_path,
                                                                 case, message):
    tmp, config, model = trained
    before = folder_digest(model)
    if case in ("mismatched", "empty", "invalid-utf8"):
        argv = ["train", _bad_corpus_config(tmp_path, case), "--out", tmp_path / "new"]
    elif case == "unknown-key":
        argv = ["train", config, "train.warmup=3", "--out", model, "--resume"]
    elif case == "non-numeric":
        argv = ["train", config, "train.max_steps=ten", "--out", model, "--resume"]
    elif case == "existing-folder":
        argv = ["train", config]
    elif case == "missing-model":
        argv = ["translate", "--model", tmp_path / "nope", "hello"]
    elif case == "missing-config":
        argv = ["train", tmp_path / "nope.yaml"]
    elif case == "eval-mismatch":
        (tmp_path / "ref.txt").write_text("eins\n")
        argv = ["eval", "--model", model, "--src", tmp / "valid.src", "--ref", tmp_path / "ref.txt"]
    elif case == "out-in-proc":
        argv = ["train", config, "--out", "/proc/aiayn-test/model"]
    elif case == "out-under-a-file":
        argv = ["train", config, "--out", tmp / "train.src" / "sub"]
    elif case == "hyp-folder-missing":  # refused before any decoding
        argv = ["eval", "--model", model, "--src", tmp / "valid.src", "--ref", tmp / "valid.tgt",
                "--hyp", tmp_path / "missing" / "hyp.txt"]
    elif case == "average-ensemble":
        (tmp_path / "ens").mkdir()
        (tmp_path / "ens" / "ensemble.json").write_text('{"members": ["first", "second"]}')
        argv = ["average", "--model", tmp_path / "ens", "--out", tmp_path / "avg"]
        message += f" and `aiayn eval` decode it as one; for one of its models give " \
                   f"{tmp_path / 'ens' / 'first'}"
    else:
        argv = ["average", "--model", tmp_path / "nope", "--out", tmp_path / "avg"]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("aiayn: error: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    assert folder_digest(model) == before
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("failure", ["oserror", "torch"])
def test_a_failed_save_is_one_line_naming_the_intact_step(tmp_path, capsys, monkeypatch, failure):
    import errno

    import aiayn.training.trainer_state as trainer_state

    real, calls = trainer_state.save_train_state, []

    def disk_full_on_second_save(out, state):
        calls.append(state["step"])
        if len(calls) == 2:
            if failure == "torch":  # what torch.save raises on a full disk
                raise RuntimeError("[enforce fail at inline_container.cc:778] . PytorchStreamWriter"
                                   " failed writing file data/0: No space left on device")
            raise OSError(errno.ENOSPC, "No space left on device", str(out / "train_state.pt"))
        real(out, state)

    monkeypatch.setattr(trainer_state, "save_train_state", disk_full_on_second_save)
    code, out, err = run(capsys, "train", write_config(tmp_path), "--out", tmp_path / "m")
    last = err.strip().splitlines()[-1]  # after the run's progress lines
    assert code == 2 and "Traceback" not in err and last.startswith("aiayn: error: ")
    assert "could not save step 20" in last and "No space left on device" in last
    assert "the train state of step 10 is intact" in last
    monkeypatch.undo()  # the folder resumes from step 10 and finishes
    code, out, err = run(capsys, "train", write_config(tmp_path), "--out", tmp_path / "m",
                         "--resume")
    assert code == 0, err


def test_over_long_input_and_a_cut_validation_file_are_warned(trained, capsys, tmp_path):
    tmp, config, model = trained
    code, out, err = run(capsys, "translate", "--model", model, "1 " * 200)
    assert code == 0 and "aiayn: warning: 1 input sentence(s) longer than" in err
    code, out, err = run(capsys, "train", config, "data.valid_pairs=5", "train.max_steps=1",
                         "--out", tmp_path / "m")
    assert code == 0 and "validation uses the first 5 of 8 pairs" in out + err


@pytest.mark.slow
def test_real_process_errors_and_invalid_utf8_stdin(trained):
    _, _, model = trained
    proc = subprocess.run([sys.executable, "-m", "aiayn", "translate", "--model", str(model)],
                          input=b"1 2\n\xc3\x28\n", capture_output=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.decode() == "aiayn: error: <stdin>:2: invalid UTF-8 (byte 0xc3)\n"
    assert proc.stdout == b""


@pytest.mark.parametrize("command", ["translate", "summarize", "eval"])
def test_invalid_utf8_in_an_argument_or_on_summarize_stdin_is_one_line(trained, command):
    """A TEXT argument (or any other) that is not UTF-8, and `summarize -` reading bytes that are
    not, were TypeError tracebacks from the tokenizer: now one line, exit 2, nothing printed."""
    tmp, _, model = trained
    cases = [([command, "--model", str(model), b"1 \xff 2"], b"",
              "argument 4 ('1 ? 2'): invalid UTF-8 (byte 0xff)")]
    if command == "summarize":
        cases.append(([command, "--model", str(model), "-"], b"1 2\n3 \xe2\x28\n",
                      "<stdin>:2: invalid UTF-8 (byte 0xe2)"))
    if command == "eval":
        cases = [([command, "--model", str(model), "--src", tmp / "valid.src", "--ref",
                   os.fsencode(tmp) + b"/\xff.tgt"], b"", "invalid UTF-8 (byte 0xff)")]
    for argv, stdin, message in cases:
        argv = [sys.executable, "-m", "aiayn", *argv]
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=120)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and err.count("\n") == 1 and message in err, err
        assert proc.stdout == b""


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_saves_and_exits_then_resume_finishes(tmp_path, sig, code):
    """Ctrl-C and SIGTERM (how Slurm, Docker and Kubernetes stop a job) both save the last
    completed update and exit 128 + the signal number."""
    config = write_config(tmp_path, max_steps=100_000, save_every=0, log_every=1)
    out = tmp_path / "model"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "aiayn", "train", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    while not (out / "metrics.jsonl").exists() or \
            len((out / "metrics.jsonl").read_text().splitlines()) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    lines = err.decode().strip().splitlines()
    how = "interrupted" if sig == signal.SIGINT else "stopped by SIGTERM"
    assert lines[-1].startswith(f"aiayn: {how} at step ") and "Traceback" not in err.decode()
    state_step = int(lines[-1].split("step ")[1].split(";")[0])
    import torch
    state = torch.load(out / "train_state.pt", weights_only=True)
    assert state["step"] == state_step >= 3
    code = main(["train", str(config), "--resume", f"train.max_steps={state_step + 2}"])
    assert code == 0
    assert torch.load(out / "train_state.pt", weights_only=True)["step"] == state_step + 2


def test_bf16_and_int8_decode_a_copy_of_the_weights_and_leave_the_folder(trained, capsys):
    """--precision bf16 / int8 of translate and eval: a reduced-precision copy of the model
    decodes (aiayn.nn.precision), not autocast; eval reports it; the folder is untouched."""
    import argparse

    import torch

    from aiayn.cli.common import precision_context

    tmp, _, model = trained
    before = folder_digest(model)
    for precision in ("bf16", "int8"):
        code, out, _ = run(capsys, "eval", "--model", model, "--src", tmp / "valid.src",
                           "--ref", tmp / "valid.tgt", "--json", "--precision", precision,
                           "--device", "cpu")
        assert code == 0 and json.loads(out)["precision"] == precision
        args = argparse.Namespace(precision=precision, device="cpu", precision_weights=True)
        with precision_context(args):
            assert not torch.is_autocast_enabled("cpu")
    with precision_context(argparse.Namespace(precision="bf16", device="cpu")):  # generate's
        assert torch.is_autocast_enabled("cpu")
    code, out, _ = run(capsys, "translate", "--model", model, "--precision", "int8", "--device",
                       "cpu", "3 1", "4")
    assert code == 0 and len(out.splitlines()) == 2
    assert folder_digest(model) == before


@pytest.mark.parametrize("argv, message", [
    (["translate", "--model", "m", "--beam", "0", "x"], "argument --beam: 0: must be a positive"),
    (["eval", "--model", "m", "--src", "s", "--ref", "r", "--batch-size", "-1"],
     "argument --batch-size: -1: must be a positive"),
    (["trian", "demo"], "invalid choice: 'trian'"),
    (["translate", "--model", "m", "--workers", "0", "x"], "argument --workers: 0: must be a positive"),
    (["eval", "--model", "m", "--src", "s", "--ref", "r", "--workers", "many"],
     "argument --workers: 'many' is neither an integer nor 'auto'"),
    (["translate", "--model", "m", "--device", "tpu", "x"], "argument --device: must be one of"),
    (["translate", "--model", "m", "--alpha", "nan", "x"], "argument --alpha: nan: must be a finite"),
    (["translate", "--model", "m", "--no-repeat-ngram-size", "-1", "x"],
     "argument --no-repeat-ngram-size: -1: must be a non-negative integer"),
    (["generate", "--model", "m", "--no-repeat-ngram-size", "two"],
     "argument --no-repeat-ngram-size: 'two' is not an integer"),
    (["generate", "--model", "m", "--precision", "int8"], "argument --precision: invalid choice"),
])
def test_bad_flags_are_one_line_errors_naming_the_flag(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and message in err, err


def test_translate_refuses_a_folder_of_another_family(tmp_path, capsys):
    from aiayn.config import lm_preset
    from aiayn.folder import save_model
    from aiayn.models import DecoderLM

    save_model(tmp_path / "lm", "decoder_lm", DecoderLM(lm_preset("tiny")))
    code, _, err = run(capsys, "translate", "--model", tmp_path / "lm", "hello")
    assert code == 2 and "a 'decoder_lm' model, not a translation model" in err


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_is_one_line_before_any_folder(capsys, tmp_path):
    code, _, err = run(capsys, "train", "demo", "train.device=cuda", "--out", tmp_path / "x")
    assert code == 2 and err.count("\n") == 1
    assert "train: device='cuda': CUDA is not available on this machine" in err
    assert not (tmp_path / "x").exists()
    with pytest.raises(SystemExit):
        main(["translate", "--model", str(tmp_path / "x"), "--device", "cuda", "hi"])
    assert "argument --device: CUDA is not available" in capsys.readouterr().err


def test_a_run_stopped_before_its_first_checkpoint_is_no_dead_end(tmp_path, capsys):
    """Killed after the tokenizer was written but before any checkpoint: --resume says to start
    again, and a fresh run in the same folder does (the leftovers are aiayn's own)."""
    from aiayn.folder.checkpoint import STARTED_MARKER

    config = write_config(tmp_path)
    out = tmp_path / "model"
    out.mkdir()
    (out / STARTED_MARKER).touch()
    (out / "tokenizer.json").write_text("{}")
    (out / "metrics.jsonl").write_text('{"step": 1, "loss": 9.0}\n')
    code, _, err = run(capsys, "train", config, "--resume")
    assert code == 2 and "stopped before its first checkpoint" in err
    code, out_text, _ = run(capsys, "train", config, "train.max_steps=2")
    assert code == 0 and "trained 2 steps" in out_text
    assert '"loss": 9.0' not in (out / "metrics.jsonl").read_text()
    mine = tmp_path / "mine"  # a folder of the user's own with the same names is never touched
    mine.mkdir()
    (mine / "tokenizer.json").write_text("{}")
    code, _, err = run(capsys, "train", config, "--out", mine)
    assert code == 2 and "already exists" in err and (mine / "tokenizer.json").exists()


@pytest.mark.slow
def test_a_run_logged_to_a_file_gets_plain_lines_and_one_line_per_evaluation(tmp_path):
    config = write_config(tmp_path, max_steps=6, log_every=2, eval_every=3, progress=True)
    proc = subprocess.run([sys.executable, "-m", "aiayn", "train", str(config)],
                          capture_output=True, timeout=300)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert "\r" not in err  # no carriage-return bar in a log file
    assert "step 2 | loss " in err and " tok/s | " in err and "left" in err
    evals = [line for line in err.splitlines() if "valid loss" in line]
    assert [line.split(" |")[0] for line in evals] == ["step 3", "step 6"]
    assert "valid bleu" in evals[0]


@pytest.mark.slow
def test_a_time_budget_ends_with_checkpoints_spaced_for_averaging(tmp_path, capsys):
    """§6.1 averages checkpoints written close together at the end of the run: with
    max_minutes, the last keep_last_n are written final_checkpoint_spacing x budget apart."""
    from aiayn.folder import list_checkpoints
    from aiayn.folder.checkpoint import load_train_state

    # device cpu: steps at an even pace (on a GPU the first ones also start CUDA: 13 of 69
    # steps were done at 60% of the budget on an H200)
    config = write_config(tmp_path, max_steps=1_000_000, max_minutes=0.1, save_every=0,
                          keep_last_n=3, final_checkpoint_spacing=0.2, log_every=1000,
                          device="cpu")
    code, _, _ = run(capsys, "train", config)
    assert code == 0
    steps = [s for s, _ in list_checkpoints(tmp_path / "model")]
    final = load_train_state(tmp_path / "model")["step"]
    assert len(steps) == 3 and steps[-1] == final
    assert steps[0] > 0.4 * final  # written at 60% and 80% of the budget, not early on


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_like_fp32(tmp_path, capsys, precision):
    """Autocast (CPU here) learns as fp32 does: the same falling loss within a few percent."""
    losses = {}
    for name in ("fp32", precision):
        (tmp_path / name).mkdir()
        config = write_config(tmp_path / name, max_steps=60, log_every=20, save_every=0,
                              precision=name)
        code, _, _ = run(capsys, "train", config)
        assert code == 0
        rows = [json.loads(line) for line in (tmp_path / name / "model" / "metrics.jsonl")
                .read_text().splitlines()]
        losses[name] = [r["loss"] for r in rows if "loss" in r]
    assert losses[precision][-1] < 0.8 * losses[precision][0]  # it learns
    # fp16's loss scaler skips the first updates while it finds its scale (overflows): a little
    # behind after 60 steps.
    tolerance = 0.05 if precision == "bf16" else 0.10
    assert abs(losses[precision][-1] - losses["fp32"][-1]) < tolerance * losses["fp32"][-1]
    if precision == "fp16":  # the loss scaler's state is saved for an exact resume
        import torch
        state = torch.load(tmp_path / "fp16" / "model" / "train_state.pt", weights_only=True)
        assert state["scaler"]["scale"] > 0


def test_reading_from_a_terminal_says_what_it_waits_for(trained, monkeypatch, capsys):
    import io

    class Terminal(io.TextIOWrapper):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal(io.BytesIO(b"12 3\n")))
    _, _, model = trained
    assert main(["translate", "--model", str(model)]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1
    assert "reading from the terminal, one per line; end with Ctrl-D" in err


@pytest.mark.slow
def test_a_time_budget_gives_the_terminal_bar_a_total_and_a_percentage(tmp_path):
    """On a terminal under max_minutes, the bar's total is the steps the budget allows at the
    run's pace (not max_steps, which the budget cuts short), so it shows a percentage and ETA."""
    import os

    config = write_config(tmp_path, max_steps=1_000_000, max_minutes=0.08, save_every=0,
                          log_every=1000, progress=True)
    import fcntl
    import struct
    import termios

    leader, follower = os.openpty()  # stderr is a terminal of 40 x 120 characters
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "aiayn", "train", str(config)],
                            stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=300) == 0
    os.close(leader)
    err = b"".join(chunks).decode(errors="replace")
    totals = [int(t) for t in re.findall(r"\| *\d+/(\d+) \[", err)]
    assert totals and "1000000" not in err
    assert max(totals) < 1_000_000 and re.search(r"\b\d{1,2}%\|", err)


def test_eval_rouge_on_request_and_for_a_summarization_model(trained, capsys):
    from aiayn.cli.translation import _summarizes

    tmp, _, model = trained
    argv = ["eval", "--model", model, "--src", tmp / "valid.src", "--ref", tmp / "valid.tgt",
            "--beam", "1", "--hyp", tmp / "rouge.hyp"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and "rouge1" not in json.loads(out)  # a translation model: not by default
    code, out, _ = run(capsys, *argv, "--json", "--rouge")
    scores = json.loads(out)
    hyps = (tmp / "rouge.hyp").read_text(encoding="utf-8").splitlines()
    refs = (tmp / "valid.tgt").read_text(encoding="utf-8").splitlines()
    from aiayn.summarization import rouge_scores
    assert {k: scores[k] for k in ("rouge1", "rouge2", "rougeL")} == rouge_scores(hyps, refs)
    code, out, _ = run(capsys, *argv, "--rouge")
    assert code == 0 and "ROUGE-1 " in out and "ROUGE-L " in out
    # unasked, as the folder's validation did (translation.reports_rouge of its data settings)
    assert _summarizes({"experiment": {"data": {"corpus": "stdlib-docstrings"}}})
    assert _summarizes({"experiment": {"data": {"corpus": "gettext", "valid_rouge": True}}})
    assert not _summarizes({"experiment": {"data": {"corpus": "stdlib-docstrings",
                                                    "objective": "span"}}})
    assert not _summarizes({"experiment": {"data": {"corpus": "gettext"}}})
    assert not _summarizes({"family": "transformer"})  # an imported folder


def test_summarize_is_translate_over_whole_texts(trained, capsys, monkeypatch):
    """`aiayn summarize` folds each text to one line (as the corpus's texts are) and decodes it
    as `translate` does; - reads all of stdin as one text."""
    import io

    _, _, model = trained
    code, want, _ = run(capsys, "translate", "--model", model, "1 2 3", "4 5")
    assert code == 0
    code, got, _ = run(capsys, "summarize", "--model", model, "1 2\n 3", "4   5")
    assert code == 0 and got == want
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"1\n2\n3\n")))
    code, got, _ = run(capsys, "summarize", "--model", model, "-")
    assert code == 0 and got == want.splitlines(keepends=True)[0]


@pytest.mark.parametrize("target", ["src", "ref", "ref-spelled-otherwise", "link-to-src",
                                    "weights", "checkpoint"])
def test_eval_writes_its_hyp_over_no_input_and_into_no_model_folder(trained, capsys, tmp_path,
                                                                    target):
    """`eval --hyp` wrote over its own --src or --ref, or over a model folder's weights: each is
    refused in one line before any decoding, every file as it was."""
    tmp, _, model = trained
    src, ref = tmp_path / "test.src", tmp_path / "test.tgt"
    src.write_bytes((tmp / "valid.src").read_bytes())
    ref.write_bytes((tmp / "valid.tgt").read_bytes())
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.txt").symlink_to(src)
    hyp = {"src": src, "ref": ref, "ref-spelled-otherwise": tmp_path / "sub" / ".." / "test.tgt",
           "link-to-src": tmp_path / "link.txt", "weights": model / "model.safetensors",
           "checkpoint": model / "checkpoints" / "new.txt"}[target]
    before, inputs = folder_digest(model), (src.read_bytes(), ref.read_bytes())
    code, _, err = run(capsys, "eval", "--model", model, "--src", src, "--ref", ref, "--hyp", hyp)
    assert code == 2 and err.count("\n") == 1 and "--hyp" in err, err
    assert ("an input of this command" in err) if target not in ("weights", "checkpoint") \
        else ("inside the model folder" in err)
    assert folder_digest(model) == before and (src.read_bytes(), ref.read_bytes()) == inputs


def test_the_precision_that_ran_is_stated_and_idle_engine_flags_are_refused(trained, capsys,
                                                                          monkeypatch):
    """`--precision auto` said nothing of its choice and eval --json recorded "auto"; bf16 on a
    CPU without bf16 ran emulated unsaid; --ct2-compute-type without the engine was ignored."""
    from aiayn import devices

    tmp, _, model = trained
    files = ["--src", tmp / "valid.src", "--ref", tmp / "valid.tgt"]
    for native, chosen in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(devices, "cpu_has_bf16", lambda native=native: native)
        code, out, err = run(capsys, "eval", "--model", model, *files, "--json", "--device", "cpu",
                             "--precision", "auto")
        assert code == 0 and f"aiayn: precision {chosen} (auto: " in err
        scores = json.loads(out)
        assert (scores["precision"], scores["precision_asked"]) == (chosen, "auto")
    code, out, err = run(capsys, "translate", "--model", model, "1 2", "--device", "cpu",
                         "--precision", "bf16")
    assert code == 0 and "aiayn: warning: precision bf16 (set; emulated" in err
    code, out, err = run(capsys, "translate", "--model", model, "1 2", "--ct2-compute-type", "int8")
    assert code == 2 and out == "" and "add --engine ctranslate2" in err


@pytest.mark.parametrize("flag", [["--alpha", "1.0"], ["--length-penalty", "avg"],
                                  ["--early-stopping", "first_k"]])
def test_a_beam_setting_with_greedy_search_is_refused(trained, capsys, flag):
    """Every flag that has no effect in its context is refused: the beam's length penalty and
    stopping rule change nothing at --beam 1."""
    tmp, _, model = trained
    code, out, err = run(capsys, "translate", "--model", model, "--beam", "1", *flag, "1 2")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{flag[0]} has no effect with greedy search" in err
    code, out, _ = run(capsys, "translate", "--model", model, "--beam", "2", *flag, "1 2")
    assert code == 0 and len(out.splitlines()) == 1


@pytest.mark.parametrize("command", ["average", "export", "viz", "train", "data"])
def test_no_command_writes_its_output_inside_a_model_folder(trained, capsys, tmp_path, command):
    """An output folder inside a model folder (its checkpoints/, a folder within it, or the
    folder itself for files) mixed another run's files with the model's: each is refused in one
    line before any work, the model folder as it was."""
    tmp, config, model = trained
    before = folder_digest(model)
    inside = model / "checkpoints" / "out"
    argv = {"average": ["average", "--model", model, "--last", "1", "--out", inside],
            "export": ["export", "hf", "--model", model, "--out", model / "hf"],
            "viz": ["viz", "attention", "--model", model, "--out", model, "1 2"],
            "train": ["train", config, "--out", inside],
            "data": ["data", "dates-numbers", "--n-train", "5", "--out", model]}[command]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "model folder" in err and ("inside" in err or command == "data")
    assert folder_digest(model) == before and not inside.exists() and not (model / "hf").exists()


def test_eval_scores_a_test_set_with_an_empty_line(trained, capsys, tmp_path):
    """A system's output may hold an empty line (translate --min-length 0), and a reference made
    from it too: eval scores it (sacreBLEU takes empty lines) instead of refusing it as
    'empty sentence', which training data still is."""
    tmp, _, model = trained
    src = (tmp / "valid.src").read_text(encoding="utf-8").splitlines()
    ref = (tmp / "valid.tgt").read_text(encoding="utf-8").splitlines()
    (tmp_path / "s.txt").write_text("\n".join(src[:3] + [""]) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(ref[:2] + ["", ref[3]]) + "\n", encoding="utf-8")
    code, out, err = run(capsys, "eval", "--model", model, "--src", tmp_path / "s.txt", "--ref",
                         tmp_path / "r.txt", "--json", "--hyp", tmp_path / "h.txt")
    assert code == 0, err
    assert json.loads(out)["sentences"] == 4
    assert (tmp_path / "h.txt").read_text(encoding="utf-8").splitlines()[3] == ""  # no source
