"""Small inputs shared by several test modules: a word-for-word digit task a tiny model learns
in seconds, the files and config of a tiny translation run, and a CLI call that captures its
output."""

import random

import yaml

from aiayn.cli import main

WORDS = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]


def digit_pairs(n, seed):
    """'3 1 4' -> 'drei eins vier': a word-for-word task a tiny model learns in seconds."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        digits = [rng.randrange(10) for _ in range(rng.randint(1, 6))]
        pairs.append((" ".join(map(str, digits)), " ".join(WORDS[d] for d in digits)))
    return pairs


def write_pairs(pairs, src, tgt):
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")


def run(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


def write_config(tmp, name="exp.yaml", **train):
    write_pairs(digit_pairs(300, 1), tmp / "train.src", tmp / "train.tgt")
    write_pairs(digit_pairs(8, 2), tmp / "valid.src", tmp / "valid.tgt")
    config = {"out": str(tmp / "model"),
              "model": {"preset": "tiny", "d_model": 16, "d_ff": 32},
              "data": {"train_src": str(tmp / "train.src"), "train_tgt": str(tmp / "train.tgt"),
                       "valid_src": str(tmp / "valid.src"), "valid_tgt": str(tmp / "valid.tgt"),
                       "vocab_size": 120, "valid_pairs": 8},
              "train": {"max_steps": 20, "max_tokens": 400, "lr": 3e-3, "warmup_steps": 5,
                        "eval_every": 0, "save_every": 10, "log_every": 5, "tensorboard": False,
                        "progress": False, "threads": 1, **train}}
    (tmp / name).write_text(yaml.safe_dump(config), encoding="utf-8")
    return tmp / name
