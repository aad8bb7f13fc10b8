"""`aiayn train auto`: prints its choice and why, trains it, leaves it in the model folder as an
ordinary config that resumes; bad input is one line, exit 2, no traceback."""

import json

import pytest
import yaml

from aiayn.folder.lock import LOCK_FILE
from aiayn.training.auto_recipe import RULE
from tests.builders import digit_pairs, run, write_pairs
from tests.test_lock import hold

QUICK = ["train.max_steps=12", "train.threads=1", "train.progress=false",
         "train.tensorboard=false", "train.save_every=6", "train.eval_every=0"]


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_pairs(digit_pairs(1100, 1), folder / "train.src", folder / "train.tgt")
    return folder


@pytest.mark.slow
def test_train_auto_chooses_trains_writes_its_config_and_resumes(corpus, tmp_path, capsys):
    out = tmp_path / "m"
    # one model (--ensemble 1): on a fast machine the rule would train two in 2 minutes
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--ensemble", 1, "--out", out, *QUICK)
    assert code == 0, err
    why = [line for line in text.splitlines() if line.startswith("auto: ")]
    assert len(why) == 6 and "1,078 pairs" in why[0] and "vocabulary 1,000 BPE" in why[1]
    assert "trained 12 steps" in text
    written = yaml.safe_load((out / "auto.yaml").read_text(encoding="utf-8"))
    assert written["model"]["d_model"] == 128 and written["data"]["vocab_size"] == 1000
    assert written["data"]["corpus_dir"] == str(corpus.resolve())
    assert written["train"]["max_steps"] == 12 and written["train"]["max_minutes"] == 2
    # the speeds it planned with were measured here, and are kept with the rule's version
    assert "measured here" in why[3] and "speed measured in" in why[3]
    auto = json.loads((out / "config.json").read_text(encoding="utf-8"))["auto"]
    assert auto["rule"] == RULE and auto["planned_updates"] > 0
    assert auto["updates_per_s"] and all(v > 0 for v in auto["updates_per_s"].values())
    # the written config is an ordinary one: it resumes the run (train.* may change) ...
    code, text, err = run(capsys, "train", out / "auto.yaml", "--resume", "train.max_steps=18")
    assert code == 0, err
    assert "trained 18 steps" in text
    # ... and so does the same command, which keeps the choice the run started with (speeds
    # measured again could differ a little, and with them the dropout or the warmup)
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--out", out, "--resume", *QUICK[1:], "train.max_steps=20")
    assert code == 0, err
    assert f"auto: resuming the choice in {out / 'auto.yaml'}" in text
    assert "trained 20 steps" in text
    again = yaml.safe_load((out / "auto.yaml").read_text(encoding="utf-8"))
    assert again["model"] == written["model"] and again["train"]["max_steps"] == 20
    # a run killed before its end never wrote auto.yaml: the choice is read back from the
    # experiment config.json recorded at the first save (not measured and chosen again)
    (out / "auto.yaml").unlink()
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--out", out, "--resume", *QUICK[1:], "train.max_steps=22")
    assert code == 0, err
    assert "auto: resuming the choice" in text and "trained 22 steps" in text
    assert [line for line in text.splitlines() if line.startswith("auto: ")][1:] == why  # kept
    third = yaml.safe_load((out / "auto.yaml").read_text(encoding="utf-8"))
    assert third["model"] == written["model"]
    assert all(third["data"][k] == v for k, v in written["data"].items())
    assert json.loads((out / "config.json").read_text(encoding="utf-8"))["auto"]["rule"] == RULE
    # one model stays one: --ensemble 2 with --resume is refused, nothing written
    before = {f: f.read_bytes() for f in out.rglob("*") if f.is_file()}
    code, _, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2, "--ensemble",
                       2, "--out", out, "--resume", *QUICK[1:], "train.max_steps=24")
    assert code == 2 and "trains one model (auto.yaml)" in err and "Traceback" not in err
    assert {f: f.read_bytes() for f in out.rglob("*") if f.is_file()} == before


@pytest.mark.slow
def test_train_auto_trains_an_ensemble_that_translates_as_one_and_resumes(corpus, tmp_path,
                                                                          capsys):
    from aiayn.tasks.translator import Translator

    out = tmp_path / "e"
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--ensemble", 2, "--out", out, *QUICK)
    assert code == 0, err
    assert "an ensemble of 2 such models, 1 minute(s) and a seed each" in text
    assert text.count("trained 12 steps") == 2
    listed = json.loads((out / "ensemble.json").read_text(encoding="utf-8"))
    assert listed["members"] == ["member-1", "member-2"] and listed["auto"]["members"] == 2
    folders = [out / name for name in listed["members"]]
    for seed, folder in enumerate(folders):  # each an ordinary run with its own seed
        written = yaml.safe_load((folder / "auto.yaml").read_text(encoding="utf-8"))
        assert written["train"]["seed"] == seed and written["train"]["max_minutes"] == 1
        assert written["out"] == str(folder)
    assert (folders[0] / "tokenizer.json").read_bytes() == \
        (folders[1] / "tokenizer.json").read_bytes()  # one corpus, one tokenizer
    assert (folders[0] / "model.safetensors").read_bytes() != \
        (folders[1] / "model.safetensors").read_bytes()
    # the folder translates as the two models together
    code, translated, err = run(capsys, "translate", "--model", out, "--beam", 2, "3 1 4", "2 7")
    assert code == 0, err
    assert translated.splitlines() == Translator.load(folders).translate(["3 1 4", "2 7"],
                                                                         beam=2)
    # the same command with --resume continues both models with the choice they started with
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--out", out, "--resume", *QUICK[1:], "train.max_steps=14")
    assert code == 0, err
    assert f"auto: resuming the choice in {out / 'ensemble.json'}" in text
    assert text.count("trained 14 steps") == 2
    # an ensemble keeps its size: another --ensemble with --resume is refused, nothing trained
    before = {f: f.read_bytes() for f in out.rglob("*") if f.is_file()}
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--ensemble", 3, "--out", out, "--resume", *QUICK[1:])
    assert code == 2 and "--ensemble 3: the run in" in err and "an ensemble of 2 models" in err
    assert {f: f.read_bytes() for f in out.rglob("*") if f.is_file()} == before
    # nothing is lost: without --resume the ensemble's folder is refused, and so is a folder
    # that holds one model, before a file is written
    before = {f: f.read_bytes() for f in out.rglob("*") if f.is_file()}
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--ensemble", 2, "--out", out, *QUICK)
    assert code == 2 and "holds an ensemble already" in err and "Traceback" not in err
    assert {f: f.read_bytes() for f in out.rglob("*") if f.is_file()} == before
    code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                          "--ensemble", 2, "--out", folders[0], *QUICK)
    assert code == 2 and "holds a model" in err
    assert not (folders[0] / "ensemble.json").exists()
    # one writer: while another process writes the folder, the run is refused, touching nothing
    before = {f: f.read_bytes() for f in out.rglob("*") if f.is_file()}
    proc = hold(out)
    try:
        code, text, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2,
                              "--out", out, "--resume", *QUICK[1:], "train.max_steps=16")
        assert code == 2 and f"{out} is being written by pid {proc.pid}" in err
    finally:
        proc.kill()
        proc.wait()
    assert {f: f.read_bytes() for f in out.rglob("*") if f.is_file()
            and f.name != LOCK_FILE} == before


@pytest.mark.parametrize("members", [["--ensemble", 1], ["--ensemble", 2]],
                         ids=["one model", "an ensemble"])
def test_train_auto_reads_data_files_given_as_overrides(members, tmp_path, capsys):
    """data.train_src / data.train_tgt name the corpus; the choice is printed before training
    (which fails here on an impossible out folder, leaving no config behind), for one model and
    for an ensemble (which one the rule picks by itself depends on this machine's speed)."""
    write_pairs(digit_pairs(1100, 1), tmp_path / "a.src", tmp_path / "a.tgt")
    (tmp_path / "file").write_text("x")
    code, text, err = run(capsys, "train", "auto", "--minutes", 2, *members,
                          "--out", tmp_path / "file" / "m",
                          f"data.train_src={tmp_path / 'a.src'}",
                          f"data.train_tgt={tmp_path / 'a.tgt'}", *QUICK, "train.lr=2e-3")
    assert "auto: model xs" in text and code == 2 and "Not a directory" in err
    assert ("an ensemble of 2 such models" in text) == (members[1] == 2)
    # an override of a chosen setting is said beside the reasons, which name the choice; one
    # auto does not choose (train.threads) is not
    lines = text.splitlines()
    said = next(line for line in lines if line.startswith("overrides of auto's choice: "))
    assert "train.lr 0.0028 -> 0.002" in said and "train.max_steps 1000000 -> 12" in said
    assert "threads" not in said and any("peak lr 0.0028" in line for line in lines)
    assert not (tmp_path / "file" / "m").exists()


@pytest.mark.parametrize("case, words", [
    ("small", ["500 training pairs", "needs 1,000"]),
    ("misaligned", ["mismatched line counts", "train.src has 1100 lines", "train.tgt has 1099"]),
    ("short", ["--minutes 0.001 is too short", "give --minutes"]),
    ("no corpus", ["needs a corpus"]),
    ("no minutes", ["needs --minutes"]),
    ("not a corpus", ["no train.src and train.tgt"]),
    ("without auto", ["--corpus, --minutes and --ensemble go with `aiayn train auto`"]),
    ("bad rdrop", ["rdrop='abc'", "must be float"]),
])
def test_bad_input_is_one_line_exit_2(case, words, corpus, tmp_path, capsys):
    args = ["train", "auto", "--corpus", corpus, "--minutes", 30, "--out", tmp_path / "m", *QUICK]
    if case == "small":
        write_pairs(digit_pairs(510, 1), corpus / "train.src", corpus / "train.tgt")
    elif case == "misaligned":
        lines = (corpus / "train.tgt").read_text(encoding="utf-8").splitlines(True)
        (corpus / "train.tgt").write_text("".join(lines[:-1]), encoding="utf-8")
    elif case == "short":
        args[5] = 0.001
    elif case == "no corpus":
        args[2:4] = []
    elif case == "no minutes":
        args[4:6] = []
    elif case == "not a corpus":
        args[3] = tmp_path
    elif case == "bad rdrop":  # read by the speed probe's config, before any training
        args.append("train.rdrop=abc")
    else:
        args[1] = "demo"
    code, out, err = run(capsys, *args)
    assert code == 2 and "Traceback" not in err
    message = [line for line in err.splitlines() if line.strip()]
    assert len(message) == 1 and all(w in message[0] for w in words), err
    assert not (tmp_path / "m").exists()


def test_the_speed_probe_times_the_r_drop_the_run_is_given(monkeypatch):
    """train.rdrop=5 over auto's choice reads each batch twice: the probe that plans the run's
    updates (and from them its dropout and warmup) is given it, and so times those updates."""
    from aiayn.cli import auto
    from aiayn.tasks import speed_probe
    from aiayn.training.auto_recipe import facts_of

    given = []

    class Probe:
        def __init__(self, lengths, train, device):
            given.append(train)
            self.measured, self.seconds = {}, 0.0

        def __call__(self, shape, vocab, tokens):
            self.measured[(shape, vocab, tokens)] = 5.0
            return 5.0

    monkeypatch.setattr(speed_probe, "SpeedProbe", Probe)
    facts = facts_of(digit_pairs(1100, 1))
    auto._plan(facts, 10, ["train.threads=1"])
    auto._plan(facts, 10, ["train.threads=1", "train.rdrop=5"])
    assert [t.rdrop for t in given] == [0.0, 5.0]


@pytest.mark.parametrize("members", [1, 2], ids=["one model", "an ensemble"])
def test_auto_yaml_is_written_before_the_folder_is_released(members, corpus, tmp_path, capsys,
                                                            monkeypatch):
    """Each model's auto.yaml is written while its folder's writer lock is still held (no
    other run can start there before the choice is in it), and the lock is gone after."""
    from aiayn.cli import auto
    from aiayn.folder.lock import is_locked
    from aiayn.tasks import speed_probe

    class Probe:  # a fixed speed: no timing in the quick tier
        def __init__(self, lengths, train, device):
            self.measured, self.seconds = {}, 0.0

        def __call__(self, shape, vocab, tokens):
            return 5.0

    monkeypatch.setattr(speed_probe, "SpeedProbe", Probe)
    written, write = [], auto._write_config

    def spy(folder, raw, reasons):
        written.append((folder, is_locked(folder)))
        write(folder, raw, reasons)

    monkeypatch.setattr(auto, "_write_config", spy)
    out = tmp_path / "m"
    code, _, err = run(capsys, "train", "auto", "--corpus", corpus, "--minutes", 2, "--ensemble",
                       members, "--out", out, *QUICK, "train.max_steps=2", "train.save_every=2")
    assert code == 0, err
    folders = [out] if members == 1 else [out / f"member-{k}" for k in (1, 2)]
    assert written == [(f, True) for f in folders]
    assert all((f / "auto.yaml").is_file() for f in folders)
    assert not any(is_locked(f) or (f / LOCK_FILE).exists() for f in [*folders, out])
