"""`aiayn train auto --corpus DIR --minutes M [key=value ...]`: read the corpus and the budget,
choose a recipe (aiayn.training.auto_recipe), print what and why, train it, and leave the
choice in the model folder as an ordinary config (auto.yaml: read it, edit it, resume it with
`aiayn train FOLDER/auto.yaml --resume`, or train it again elsewhere with --out).

The corpus: --corpus DIR (train.src / train.tgt, optional valid.* and test.*, as `aiayn data`
writes them), or `data.train_src=... data.train_tgt=...` (and data.valid_*), or a built-in
corpus (`data.corpus=gettext`). Only the training split is read for the choice; a test split is
never read. Other key=value overrides apply over the chosen config.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from aiayn.errors import UserError
from aiayn.folder.format import ENSEMBLE_FILE

CONFIG_NAME = "auto.yaml"  # the chosen config, in the model folder
HEADER_LINES = 2  # auto.yaml's comment lines before the reasons (_write_config)
DEFAULT_OUT = "runs/auto"
# data.* keys that say where the corpus is: read before the choice
SOURCE_KEYS = ("corpus", "corpus_dir", "train_src", "train_tgt", "valid_src", "valid_tgt",
               "max_train_pairs")
BUILTIN_LANGUAGES = {"gettext": ("en", "de"), "dates-numbers": ("en", "de")}


def train_auto(args: argparse.Namespace, overrides: list[str]) -> int:
    from aiayn.cli.common import report_validated
    from aiayn.config.experiment import apply_overrides
    from aiayn.tasks.seq2seq import experiment
    from aiayn.training.auto_recipe import RULE

    if args.minutes is None:
        raise UserError("`aiayn train auto` needs --minutes M: the training budget it plans for")
    source = _source(args, overrides)
    facts = _facts(source)
    out = str(args.out or DEFAULT_OUT)
    ensemble = _earlier_ensemble(Path(out)) if args.resume else None
    earlier = _earlier_choice(Path(out)) if args.resume and ensemble is None else None
    if ensemble is not None:  # an ensemble's run continues with its choice, member by member
        raw, meta, members = ensemble
        raw["train"] = {**raw["train"], "max_minutes": args.minutes / members}
        reasons = [f"resuming the choice in {Path(out) / ENSEMBLE_FILE}", *meta["auto"]["why"]]
    elif earlier is not None:  # the run continues with the choice it started with (measured
        raw, meta = earlier  # speeds vary a little between two probes: not chosen again)
        raw["train"] = {**raw.get("train", {}), "max_minutes": args.minutes}  # the budget given
        reasons, members = [f"resuming the choice in {Path(out) / CONFIG_NAME}",
                            *meta["auto"]["why"]], 1
    resumed = ensemble is not None or earlier is not None
    if resumed and args.ensemble not in (None, members):  # an ensemble's size stays as it began
        raise UserError(f"--ensemble {args.ensemble}: the run in {out} trains "
                        + (f"an ensemble of {members} models ({ENSEMBLE_FILE})" if members > 1 else
                           f"one model ({CONFIG_NAME})")
                        + "; --resume continues it as it started (leave out --ensemble, or give "
                        "another --out)")
    if not resumed:
        recipe, speeds = _plan(facts, args.minutes, overrides, args.ensemble)
        raw = recipe.config(out)
        raw["data"] = {**source, **raw["data"]}
        reasons, members = recipe.reasons, recipe.members
        meta = {"auto": {"rule": RULE, "facts": asdict(facts), "minutes": args.minutes,
                         "why": recipe.reasons, "planned_updates": recipe.planned_updates,
                         "updates_per_s": speeds, "members": members}}
    if members > 1:
        return _train_ensemble(Path(out), raw, meta, members, reasons, overrides, args.resume)
    raw = _say_choice(raw, apply_overrides(raw, overrides, "train auto"), reasons)
    return report_validated(_train_one(experiment(raw), Path(out), raw, meta, args.resume))


def _train_one(exp, folder: Path, raw: dict[str, Any], meta: dict[str, Any], resume: bool):
    """Train (or resume) one model into `folder` and write its auto.yaml, however the training
    ends, both under the folder's writer lock: no other run starts there before the choice is
    written (the lock is re-entrant: train takes it too)."""
    from aiayn.folder.lock import writer_lock
    from aiayn.tasks.seq2seq import train

    with writer_lock(folder):
        try:
            return train(exp, resume=resume, say=lambda m: print(m, file=sys.stderr), meta=meta)
        finally:
            _write_config(folder, raw, meta["auto"]["why"])


def _train_ensemble(out: Path, raw: dict[str, Any], meta: dict[str, Any], members: int,
                    reasons: list[str], overrides: list[str], resume: bool) -> int:
    """Train the ensemble's models one after the other, each into out/member-K with the chosen
    config (its own seed: train.seed x N + K - 1 for N models; its share of the minutes), each
    an ordinary run with its own auto.yaml; out/ensemble.json (written first) lists them and
    keeps the choice, so that `--resume` continues where a run stopped and `aiayn translate
    --model OUT` decodes them as one (aiayn.generation.ensemble). A member interrupted stops
    the whole run. A folder that holds a model, or (without --resume) an ensemble, is refused
    before anything is written; so is one that another run is writing (the folder's writer
    lock, held throughout)."""
    from aiayn.cli.common import report_validated
    from aiayn.config.experiment import apply_overrides
    from aiayn.folder import atomic_write_text
    from aiayn.folder.lock import writer_lock
    from aiayn.tasks.seq2seq import experiment

    names = [f"member-{k}" for k in range(1, members + 1)]
    chosen = {**raw, "out": str(out)}
    given = _say_choice(chosen, apply_overrides(chosen, overrides, "train auto"), reasons)
    # one writer: the checks, ensemble.json and every model under the folder's lock (each
    # model's own folder has its own)
    with writer_lock(out):
        if (out / "config.json").is_file():
            raise UserError(f"--out {out}: it holds a model (config.json); an ensemble of {members} "
                            "goes into a folder of its own (give another --out)")
        if not resume and (out / ENSEMBLE_FILE).is_file():
            raise UserError(f"--out {out}: it holds an ensemble already ({ENSEMBLE_FILE}); continue "
                            "it with --resume, or give another --out")
        atomic_write_text(out / ENSEMBLE_FILE, json.dumps(
            {"members": names, "config": chosen, **meta}, indent=2, ensure_ascii=False) + "\n")
        # seeds S*N .. S*N + N-1 for train.seed S: two ensembles of other seeds share no model
        seeds = [int(given["train"].get("seed", 0)) * members + k for k in range(members)]
        for k, (name, seed) in enumerate(zip(names, seeds, strict=True)):
            folder = out / name
            member = {**given, "out": str(folder), "train": {**given["train"], "seed": seed}}
            print(f"auto: model {k + 1} of {members}: {folder} (train.seed={seed})", flush=True)
            result = _train_one(experiment(member), folder, member, meta,
                                resume and (folder / "config.json").is_file())
            code = report_validated(result)
            if code != 0:
                return code
        print(f"ensemble of {members} models in {out}: aiayn translate --model {out}")
        return 0


def _earlier_ensemble(folder: Path) -> tuple[dict[str, Any], dict[str, Any], int] | None:
    """(member config, meta, members) of the ensemble a run in `folder` started (its
    ensemble.json), or None where it holds none."""
    try:
        saved = json.loads((folder / ENSEMBLE_FILE).read_text(encoding="utf-8"))
        raw, auto, members = saved["config"], saved["auto"], saved["members"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(raw, dict) and isinstance(auto, dict) and isinstance(members, list)
            and all(isinstance(raw.get(k), dict) for k in ("model", "data", "train"))):
        return None
    return raw, {"auto": auto}, len(members)


def _say_choice(chosen: dict[str, Any], given: dict[str, Any], reasons: list[str]) -> dict[str, Any]:
    """Print the choice and why (the reasons name the choice), then the overrides that changed
    it; before the model folder is touched, so that a run refused there still shows them.
    Returns `given`, the config to train."""
    for line in reasons:
        print(f"auto: {line}")
    if changed := _changed(chosen, given):
        print("overrides of auto's choice: " + ", ".join(changed))
    sys.stdout.flush()
    return given


def _changed(chosen: dict[str, Any], raw: dict[str, Any]) -> list[str]:
    """'section.key old -> new' for each of auto's chosen settings that an override changed."""
    return [f"{section}.{key} {value} -> {raw[section][key]}"
            for section in ("model", "data", "train")
            for key, value in chosen.get(section, {}).items()
            if raw.get(section, {}).get(key, value) != value]


def _source(args: argparse.Namespace, overrides: list[str]) -> dict[str, Any]:
    """The data fields that name the corpus: --corpus DIR or the data.* overrides."""
    from aiayn.config.experiment import apply_overrides

    given = apply_overrides({}, [o for o in overrides if o.split("=")[0].removeprefix("data.")
                                 in SOURCE_KEYS and o.startswith("data.")], "train auto")
    fields = dict(given.get("data", {}))
    if args.corpus is not None:
        if fields.get("corpus") or fields.get("corpus_dir") or fields.get("train_src"):
            raise UserError("--corpus: give the corpus once: --corpus DIR or data.* files")
        folder = Path(args.corpus)
        if not (folder / "train.src").is_file() or not (folder / "train.tgt").is_file():
            raise UserError(f"--corpus {folder}: no train.src and train.tgt there (a folder "
                            "written by `aiayn data`, or two aligned files of your own)")
        fields["corpus_dir"] = str(folder.resolve())
    if not (fields.get("corpus") or fields.get("corpus_dir") or fields.get("train_src")):
        raise UserError("`aiayn train auto` needs a corpus: --corpus DIR (train.src, train.tgt), "
                        "data.train_src=FILE data.train_tgt=FILE, or data.corpus=gettext")
    for key in ("corpus_dir", "train_src", "train_tgt", "valid_src", "valid_tgt"):
        if fields.get(key):  # absolute: the written config works from any folder
            fields[key] = str(Path(fields[key]).resolve())
    return fields


def _facts(source: dict[str, Any]):
    from aiayn.config import ConfigError
    from aiayn.tasks.seq2seq import DataConfig, load_pairs
    from aiayn.training.auto_recipe import facts_of

    try:
        data = DataConfig.from_dict(source)
    except ConfigError as e:
        raise UserError(f"train auto: data: {e}") from None
    splits = load_pairs(data)  # misaligned or unreadable files: one line naming them
    return facts_of(splits["train"], *_languages(data))


def _languages(data) -> tuple[str, str]:
    if data.corpus:
        return BUILTIN_LANGUAGES.get(data.corpus, ("?", "?"))
    if data.corpus_dir and (Path(data.corpus_dir) / "stats.json").is_file():
        try:
            stats = json.loads((Path(data.corpus_dir) / "stats.json").read_text(encoding="utf-8"))
            return str(stats.get("src_lang", "?")), str(stats.get("tgt_lang", "?"))
        except (OSError, ValueError, AttributeError):
            pass
    return "?", "?"


def _plan(facts, minutes: float, overrides: list[str], members: int | None = None):
    """The recipe for the budget: --minutes on the device and threads the run will use
    (train.device, train.threads overrides; else this machine's), at the speeds measured there;
    and those speeds ({"SHAPE VOCAB TOKENS": updates/s}, for config.json)."""
    import torch

    from aiayn.config.experiment import apply_overrides
    from aiayn.config.train import TrainConfig
    from aiayn.devices import resolve_device
    from aiayn.tasks.speed_probe import SpeedProbe
    from aiayn.training.auto_recipe import PIECES_PER_WORD, Budget, plan

    train = apply_overrides({}, [o for o in overrides if o.startswith("train.")],
                            "train auto").get("train", {})
    device = resolve_device(str(train.get("device", "auto")))
    threads = int(train.get("threads") or torch.get_num_threads())
    budget = Budget(minutes, "cuda" if device.startswith("cuda") else "cpu", threads)
    # measured when first asked for: a corpus too small or a bad --minutes is refused before
    probe = SpeedProbe((facts.src_mean * PIECES_PER_WORD, facts.tgt_mean * PIECES_PER_WORD),
                       TrainConfig(threads=threads, precision=str(train.get("precision", "auto")),
                                   rdrop=train.get("rdrop", 0.0)),  # R-Drop reads twice
                       device)
    recipe = plan(facts, budget, probe, members)
    recipe.reasons[3] += f" (speed measured in {probe.seconds:.0f} s: {len(probe.measured)} " \
                         "model(s), an epoch of its batches to warm up, then timed until two windows agree)"
    return recipe, {" ".join(map(str, k)): round(v, 3) for k, v in probe.measured.items()}


def _earlier_choice(folder: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(config, meta) of the choice a run in `folder` started with: its auto.yaml, and the
    "auto" record of its config.json (where a run from before the trainer kept that record on a
    plain `aiayn train auto.yaml --resume` has none: the reasons in auto.yaml's header). A run
    killed before it wrote auto.yaml (at its end) has the choice in config.json alone, as the
    experiment it recorded at its first save. None where neither holds it."""
    try:
        saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        record, auto = saved.get("experiment"), saved.get("auto")
    except (OSError, ValueError, AttributeError):
        record = auto = None
    try:
        text = (folder / CONFIG_NAME).read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError):
        text, raw = "", None
    if not isinstance(raw, dict):  # no auto.yaml: the choice as config.json recorded it
        if not isinstance(auto, dict) or "why" not in auto or not isinstance(record, dict) \
                or not all(isinstance(record.get(k), dict) for k in ("model", "data", "train")):
            return None
        raw = {"task": record.get("task", "seq2seq"), "out": str(folder),
               **{k: record[k] for k in ("model", "data", "train")}}
    if not isinstance(auto, dict) or "why" not in auto:
        header = [line for line in text.splitlines()[:HEADER_LINES + 10] if line.startswith("# ")]
        auto = {"why": [line[2:] for line in header[HEADER_LINES:]]}
    return raw, {"auto": auto}


def _write_config(folder: Path, raw: dict[str, Any], reasons: list[str]) -> None:
    """auto.yaml in a model folder the run wrote (not in one that failed before its first file)."""
    if not (folder / "config.json").is_file():
        return
    from aiayn.folder import atomic_write_text

    head = ["# Chosen by `aiayn train auto` (aiayn/training/auto_recipe.py); an ordinary config:",
            f"#   aiayn train {folder / CONFIG_NAME} --resume      continue this run",
            *(f"# {line}" for line in reasons)]  # HEADER_LINES, then the reasons
    body = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    atomic_write_text(folder / CONFIG_NAME, "\n".join(head) + "\n" + body)
