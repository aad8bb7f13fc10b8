"""Settings files are read within bounds (aiayn.config.files, issue 37): a YAML alias bomb, a
deeply nested JSON or YAML file, a file over the size limit, a recursive alias or a value of no
JSON type is refused in one line naming the file (and the line or key), exit 2, before anything
expands it; ordinary configs, anchors and aliases in moderation included, still load."""

import json
import re
import resource
import subprocess
import sys

import pytest

from aiayn.cli import main
from aiayn.config import TrainConfig
from aiayn.config.experiment import load_experiment, read_config_file
from aiayn.config.files import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES, load_yaml
from aiayn.errors import ConfigError, UserError
from tests.builders import write_config


def alias_bomb(width: int = 9, levels: int = 10) -> str:
    """The "billion laughs": each anchor a list of `width` aliases of the one before; 1 KB of
    YAML that is width**levels values once expanded (9**10: 3.5 billion)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + f"\ndata: {{corpus: *a{levels - 1}}}\n"


def refused(capsys, *argv) -> str:
    """The one line of a refused command: exit 2, no traceback."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("aiayn: error: ")
    return err


def _limit_memory():  # the child's address space: 4 GiB (the bomb, expanded, is far more)
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


def test_an_alias_bomb_is_refused_in_one_line_with_bounded_memory(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    assert bomb.stat().st_size < 1024
    done = subprocess.run([sys.executable, "-m", "aiayn", "train", str(bomb)], capture_output=True,
                          text=True, preexec_fn=_limit_memory)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (f"aiayn: error: {bomb}:4: more than {MAX_ALIASES} YAML aliases "
                           f"(*name); a config may reuse an anchored value at most {MAX_ALIASES} "
                           "times: refused\n")


def test_a_bomb_within_the_alias_count_is_refused_by_its_expanded_size(tmp_path):
    """Few aliases of a wide list: 2 x 10 aliases of 1,000 values are 100,000 values."""
    path = tmp_path / "wide.yaml"
    path.write_text("a: &a [" + ", ".join(["0"] * 1000) + "]\nb: &b [" + ", ".join(["*a"] * 10)
                    + "]\ndata: {c: [" + ", ".join(["*b"] * 10) + "]}\n")
    with pytest.raises(UserError, match=f"{path}: more than {MAX_VALUES:,} values once its YAML "
                       r"aliases \(\*name\) are expanded \(an alias bomb\?\): refused"):
        read_config_file(path)


@pytest.mark.parametrize("name, text, message", [
    ("deep.json", "[" * 100_000 + "]" * 100_000, f"deep.json: nested deeper than {MAX_DEPTH}"),
    ("deep.yaml", "[" * 100_000 + "]" * 100_000, f"deep.yaml:1: nested deeper than {MAX_DEPTH}"),
    ("nest.json", json.dumps({"train": {"x": json.loads("[" * 101 + "]" * 101)}}),
     r"nest.json: train.x.0.0\.\.\.: nested deeper than 100 levels: refused"),
    ("loop.yaml", "data: &d {x: *d}\n", r"loop.yaml: data.x.x.x\.\.\.: nested "
                                        r"deeper than 100 levels \(a recursive YAML alias\?\)"),
    ("date.yaml", "train: {max_steps: 2020-01-01}\n",
     r"date.yaml: train.max_steps: a date \(datetime.date\(2020, 1, 1\)\) is not a setting; "
     "quote it"),
    ("set.yaml", "model: !!set {a, b}\n", "set.yaml: model: a set"),
], ids=["deep-json", "deep-yaml", "nested-json", "recursive-alias", "date", "set"])
def test_a_deep_or_strange_config_is_refused_naming_the_file(tmp_path, capsys, name, text,
                                                              message):
    path = tmp_path / name
    path.write_text(text)
    err = refused(capsys, "train", path)
    assert err.startswith(f"aiayn: error: {path}")
    assert re.search(message, err), err


def test_a_config_over_the_size_limit_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text("# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    err = refused(capsys, "train", path)
    assert f"{path}: {path.stat().st_size:,} bytes; a settings file may hold at most 8 MiB" in err


def test_a_deep_config_json_in_a_model_folder_is_refused_naming_it(tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "model.safetensors").write_bytes(b"")
    (tmp_path / "src.txt").write_text("a\n")
    line = f"aiayn: error: {folder / 'config.json'}: nested deeper than {MAX_DEPTH} levels: refused\n"
    assert refused(capsys, "translate", "--model", folder, "hello") == line
    assert refused(capsys, "eval", "--model", folder, "--src", tmp_path / "src.txt", "--ref",
                   tmp_path / "src.txt") == line
    assert refused(capsys, "serve", "--model", folder, "--port", "0") == line


def test_an_override_value_is_bounded_too(tmp_path, capsys):
    err = refused(capsys, "train", write_config(tmp_path), "data.x=&a [*a]")
    assert "override data.x: 0.0.0.0...: nested deeper than 100 levels" in err


def test_ordinary_configs_with_a_few_aliases_still_load(tmp_path):
    config = write_config(tmp_path)
    exp = load_experiment(config, task="translation")
    assert exp.model["d_model"] == 16 and exp.train.max_steps == 20
    assert load_yaml("x: &w 16\ny: [*w, *w]\n", "t") == {"x": 16, "y": [16, 16]}
    text = config.read_text() + "".join(f"# {i}: *w\n" for i in range(MAX_ALIASES + 1))
    widths = {"d_model": "&w 16", "head_dim": "*w", "value_dim": "*w"}  # anchors and aliases as ever
    anchored = tmp_path / "anchored.yaml"
    anchored.write_text(text.replace("  d_model: 16\n", "".join(
        f"  {k}: {v}\n" for k, v in widths.items())))
    exp = load_experiment(anchored, task="translation")
    assert [exp.model[k] for k in widths] == [16, 16, 16]


def test_config_from_json_is_bounded_and_stays_a_value_error():
    with pytest.raises(ConfigError, match="TrainConfig JSON: nested deeper than 100 levels"):
        TrainConfig.from_json("[" * 10_000 + "]" * 10_000)
    with pytest.raises(ConfigError, match="expected a JSON object"):
        TrainConfig.from_json("[1]")
    assert TrainConfig.from_json(TrainConfig(max_steps=7).to_json()).max_steps == 7


def test_a_deep_metrics_line_or_demo_config_is_one_line_not_a_traceback(tmp_path, capsys):
    """The other JSON readers are bounded the same way: a metrics.jsonl line nested 100,000 deep
    (viz curves) is refused naming the file and line; a folder whose config.json is so nested
    is not taken for a demo folder by `aiayn demo --out` (refused, not a RecursionError)."""
    from aiayn.viz.curves import read_metrics

    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n' + deep + "\n")
    with pytest.raises(UserError, match=r"metrics\.jsonl:2: nested deeper than"):
        read_metrics(tmp_path)
    out = tmp_path / "demo"
    out.mkdir()
    (out / "config.json").write_text(deep)
    assert main(["demo", "--out", str(out), "--minutes", "0.1"]) == 2
    assert "is not a demo model folder" in capsys.readouterr().err
