"""Training and scoring the rows of Table 3, row by row, resumable, mergeable.

    plan = Plan(scale="cpu", corpus="gettext", groups="base,A,B,C,D,E", seeds=1, updates=600)
    table = run_table(plan, "runs/table3")                   # aiayn table3 --out runs/table3
    table = run_table(plan, "runs/table3", resume=True)      # skips finished rows, resumes a cut one
    merge_tables(["t3-ab", "t3-cde"], "runs/table3")         # rows run elsewhere: merge.py

The folder holds:
    table3-plan.json             what every row shares (scale, corpus, budget, overrides)
    rows/ROW/seedK/              each run: an ordinary translation model folder (`--resume`s)
    results/ROW-seedK.json       its dev scores once trained and scored: the row is done
    table3.md, table3.json, table3.png   the table so far, rewritten after every row

Every row is the translation recipe of the scale's built-in config (configs/table3-cpu.yaml,
table3-base.yaml) with the row's model and label smoothing (rows.model_overrides), the same
data, budget and seed. Every row is scored the same way, as the paper's Table 3: the dev split
(the corpus's "valid"), beam 4 with alpha 0.6 (§6.1), sacreBLEU, the final weights (no checkpoint
averaging: train.average_width=0), and PPL = exp of the dev NLL per target subword (</s>
included) without label smoothing. The folder has one writer (aiayn.folder.lock), as a model folder.
What the rows share, and each row's experiment: plan.py.

Rows run one after another, or `jobs` at a time in processes of their own (a row per CPU core).
Under torchrun (`torchrun --nproc_per_node=N -m aiayn table3 ...`) each row trains data-parallel
on the N processes, as `aiayn train` does, one row at a time; rank 0 alone scores the rows and
keeps the folder.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiayn.config.files import load_json, read_text
from aiayn.errors import UserError
from aiayn.folder import atomic_write_text
from aiayn.folder.lock import writer_lock
from aiayn.table3.plan import (
    PLAN_FILE,
    SHARED,
    Plan,
    check_plan,
    check_rows,
    default_updates,
    read_plan,
    row_device,
    row_experiment,
    row_settings,
    steps_ratio,
)
from aiayn.table3.rows import (
    PAPER_VOCAB,
    SCALES,
    Row,
    count_parameters,
    select_rows,
    settings,
)
from aiayn.table3.table import AGAIN, build_table, check_record, write_table
from aiayn.training import distributed

BEAM, ALPHA = 4, 0.6  # §6.1; Table 3 decodes with beam search and no checkpoint averaging


# -- one row -------------------------------------------------------------------------------------

def dev_pairs(exp, limit: int | None, splits: dict[str, Any] | None = None
              ) -> list[tuple[str, str]]:
    """The dev split the row is scored on: the corpus's validation pairs (the first `limit`), of
    `splits` (what the row's training read: train's result.splits), else read here."""
    from aiayn.tasks.seq2seq import load_pairs

    pairs = (splits if splits is not None else load_pairs(exp.data))["valid"]
    return pairs[:limit] if limit else pairs


def evaluate_run(model, dev: Sequence[tuple[str, str]], device: str = "cpu") -> dict[str, Any]:
    """Table 3's scores of a trained run: dev sacreBLEU with beam 4 (alpha 0.6) and PPL = exp
    of the NLL per target subword (no label smoothing), of `model`: the Translator training
    left in memory (train's result.trained, the folder's final weights), or a run's folder,
    loaded on `device`."""
    from aiayn.tasks.evaluation import evaluate
    from aiayn.tasks.translator import Translator

    translator = model if isinstance(model, Translator) else Translator.load(model, device=device)
    sources, refs = [s for s, _ in dev], [t for _, t in dev]
    # one process: worker processes (translate's --workers) cost more to start than they save
    # on a dev split of a small model
    scores = evaluate(translator, sources, refs, beam=BEAM, alpha=ALPHA, length_penalty="gnmt",
                      rouge=False).record
    scored = translator.score(sources, refs)
    nll = -sum(x["logprob"] for x in scored) / max(sum(x["tokens"] for x in scored), 1)
    return {"bleu": scores["bleu"], "chrf": scores["chrf"], "ppl": math.exp(nll), "nll": nll,
            "bleu_signature": scores["bleu_signature"], "dev_pairs": len(dev)}


def run_row(row: Row, seed: int, plan: Plan, out: Path, resume: bool,
            say: Callable[[str], None]) -> dict[str, Any] | None:
    """Train (or resume) and score one row and seed; its result record, also written to
    results/ROW-seedK.json. Under torchrun every process trains the row (data-parallel, as
    `aiayn train` does) and rank 0 scores it, the model training left in memory on the pairs it
    read; the others return None. The processes are those run_table joined, once per table (a
    row run alone under torchrun joins them as it trains)."""
    from aiayn.devices import launched
    from aiayn.folder.checkpoint import TRAIN_STATE_FILE
    from aiayn.tasks.seq2seq import train

    folder = out / "rows" / row.name / f"seed{seed}"
    exp = row_experiment(row, seed, plan, folder)
    start = time.monotonic()
    again = (folder / TRAIN_STATE_FILE).is_file()
    if again:
        say(f"  {row.name} seed {seed}: resuming the run in {folder}")
    elif folder.is_dir() and resume:
        say(f"  {row.name} seed {seed}: cut before its first checkpoint; starting it again")
    world = distributed.world()
    joined = world.active or not launched()
    result = train(exp, resume=again, say=lambda m: say(f"  {row.name} seed {seed}: {m}"),
                   world=world if joined else None)
    if result.interrupted:
        raise KeyboardInterrupt
    if not world.is_main:  # under torchrun rank 0 alone scores and writes
        distributed.all_sum([0.0])  # waits for it, so the next row starts together
        return None
    try:
        return _score_row(row, seed, plan, out, exp, folder, result, start)
    finally:
        distributed.all_sum([0.0])  # (one process: returns at once)


def _score_row(row: Row, seed: int, plan: Plan, out: Path, exp, folder: Path, result,
               start: float) -> dict[str, Any]:
    """run_row's second half: score the trained row on the dev split, write its record."""
    import torch

    from aiayn.devices import resolve_device

    device = resolve_device(exp.train.device)
    t0 = time.monotonic()
    threads = torch.get_num_threads()
    try:  # decode on the threads the row trained on (one at the cpu scale: --jobs rows a core each)
        torch.set_num_threads(exp.train.threads or threads)
        scores = evaluate_run(result.trained, dev_pairs(exp, plan.dev_pairs, result.splits))
    finally:
        torch.set_num_threads(threads)
    s = row_settings(row, plan)
    record = {"row": row.name, "seed": seed, "settings": {**s, "steps": result.step}, **scores,
              "params": count_parameters(s, _vocab(folder), exp.model_config().max_len),
              "params_paper_size": count_parameters(settings(row, "base"), PAPER_VOCAB),
              "steps": result.step, "train_seconds": round(result.seconds, 1),
              "eval_seconds": round(time.monotonic() - t0, 1),
              "seconds": round(time.monotonic() - start, 1), "device": device,
              "folder": str(folder.relative_to(out))}
    path = out / "results" / f"{row.name}-seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return record


def _vocab(folder: Path) -> int:
    from aiayn.folder import read_meta

    return int(read_meta(folder)["model"]["vocab_size"])


# -- the table -----------------------------------------------------------------------------------

def read_results(out: Path) -> list[dict[str, Any]]:
    """The finished rows' records in DIR/results, each read within bounds (aiayn.config.files)
    and checked (table.check_record): a damaged one is a UserError naming the file and the key."""
    records = []
    for path in sorted((out / "results").glob("*.json")):
        try:
            record = load_json(read_text(path), path)
        except (OSError, json.JSONDecodeError) as e:
            raise UserError(f"{path}: unreadable result ({e}){AGAIN}") from None
        except UserError as e:  # too large or too deep; it names the file
            raise UserError(f"{e}{AGAIN}") from None
        records.append(check_record(record, path))
    return records


def header(plan_shared: dict[str, Any], dev: int | None, seeds: list[int]) -> dict[str, Any]:
    """What table.markdown says above the rows."""
    plan = Plan(**{k: v for k, v in plan_shared.items() if k in SHARED and k != "corpus_content"})
    scale = SCALES[plan.scale]
    base = row_settings(select_rows("base")[0], plan)
    return {"scale": plan.scale, "rule": scale.rule, "corpus": plan.corpus,
            "budget": plan.budget, "updates": plan.updates,
            "minutes_per_row": plan.minutes_per_row, "overrides": plan.overrides,
            "seeds": seeds, "dev_pairs": dev, "beam": BEAM, "alpha": ALPHA,
            "paper_vocab": PAPER_VOCAB, "vocab_size": scale.vocab_size,
            "base_settings": base}


def write_outputs(out: Path, results: list[dict[str, Any]], shared: dict[str, Any]) -> dict:
    """table3.md, .json and .png of `results`: the table so far."""
    from aiayn.viz.style import save_figure
    from aiayn.viz.table3 import table3_figure

    seeds = sorted({int(r["seed"]) for r in results})
    dev = max((r.get("dev_pairs", 0) for r in results), default=None)
    table = build_table(results, header(shared, dev, seeds))
    write_table(table, out)
    save_figure(table3_figure(table), out / "table3", formats=("png",))
    return table


def _weight(row: Row, plan: Plan) -> float:
    """A row's expected time relative to the others: its steps (or minutes) x (its parameters
    + base's). A token's work grows with the parameters (the output layer's vocabulary
    included) over a fixed cost per update: on a CPU, each row's time per update at the cpu
    scale was within 25% of this (0.33 s for C-N2 .. 0.80 s for C-d1024, base 0.51 s)."""
    if plan.minutes_per_row is not None:
        return steps_ratio(row)
    vocab = SCALES[plan.scale].vocab_size
    s, base = row_settings(row, plan), row_settings(select_rows("base")[0], plan)
    return s["steps"] * (count_parameters(s, vocab, 256) + count_parameters(base, vocab, 256))


def run_table(plan: Plan, out: str | Path, resume: bool = False,
              say: Callable[[str], None] = print, jobs: int | str = 1) -> dict[str, Any]:
    """Train and score every row of the plan into `out` (see the module's doc); the table.
    `jobs` > 1: that many rows train side by side, each in a process of its own (on a CPU, one
    thread each: the cpu scale's config sets train.threads=1); "auto": one per CPU core when the
    rows train on the CPU, else 1."""
    out = Path(out)
    rows = select_rows(plan.groups)
    check_rows(plan, rows)  # a row's bad setting: refused before anything is written
    world = distributed.setup(row_device(plan))  # under torchrun: join its processes, once
    if world.active:
        if jobs not in (1, "auto"):
            raise UserError(f"--jobs {jobs}: under torchrun every row trains on all "
                            f"{world.size} processes, one row at a time; leave --jobs out")
        jobs = 1
    elif jobs == "auto":
        jobs = auto_jobs(plan)
    with writer_lock(out) if world.is_main else contextlib.nullcontext():
        # Rank 0 checks and reads the folder; every process then runs rank 0's list of rows.
        error, results, shared = None, [], {}
        if world.is_main:
            try:
                shared = check_plan(out, plan, resume)  # with the corpus's content
                out.mkdir(parents=True, exist_ok=True)
                atomic_write_text(out / PLAN_FILE, json.dumps(shared, indent=1) + "\n")
                results = read_results(out)
            except UserError as e:
                error = str(e)
        done = {(r["row"], int(r["seed"])) for r in results}
        todo_names = [(row.name, seed) for seed in range(plan.seeds) for row in rows
                      if (row.name, seed) not in done]
        error, todo_names = distributed.gather((error, todo_names))[0]
        if error:
            raise UserError(error)
        by_name = {row.name: row for row in rows}
        todo = [(by_name[name], seed) for name, seed in todo_names]
        if done and todo:
            say(f"table3: {len(done)} row run(s) already done in {out}; {len(todo)} to go")
        weights = {row.name: _weight(row, plan) for row in rows}
        if jobs > 1:  # the longest rows first: the last to finish is a short one
            todo.sort(key=lambda row_seed: -weights[row_seed[0].name])
        left_weight = sum(weights[row.name] for row, _ in todo)
        spent = spent_weight = 0.0
        table = None
        for i, (row, seed, record) in enumerate(_run_rows(todo, plan, out, resume, say, jobs), 1):
            if record is None:  # torchrun, not rank 0: rank 0 keeps the table
                continue
            results.append(record)
            spent += record["seconds"]
            spent_weight += weights[row.name]
            left_weight -= weights[row.name]
            left = left_weight * spent / spent_weight / max(1, min(jobs, len(todo) - i))
            say(f"table3: [{i}/{len(todo)}] {row.name} seed {seed}: dev BLEU "
                f"{record['bleu']:.2f}, PPL {record['ppl']:.2f} after {record['steps']:,} "
                f"updates ({_clock(record['seconds'])}); the table: about {_clock(left)} left")
            table = write_outputs(out, results, shared)
        if not world.is_main:
            return None
        if table is None:
            table = write_outputs(out, results, shared)
        say(f"table3: {table['summary']}")
        say(f"table3: wrote {out / 'table3.md'}, table3.json, table3.png")
        return table


def auto_jobs(plan: Plan) -> int:
    """One row per CPU core where the rows train on the CPU (train.device); 1 on a GPU."""
    import os

    from aiayn.devices import resolve_device

    return (os.cpu_count() or 1) if resolve_device(row_device(plan)) == "cpu" else 1


def _announce(row: Row, seed: int, plan: Plan, say: Callable[[str], None]) -> None:
    s = row_settings(row, plan)
    say(f"table3: {row.name} seed {seed}: N {s['N']}, d_model {s['d_model']}, d_ff {s['d_ff']}, "
        f"h {s['h']}, d_k {s['d_k']}, d_v {s['d_v']}, P_drop {s['P_drop']}, eps_ls "
        f"{s['eps_ls']}, {s['positions']}, {s['steps']:,} updates")


def _run_rows(todo: list[tuple[Row, int]], plan: Plan, out: Path, resume: bool,
              say: Callable[[str], None], jobs: int):
    """(row, seed, record) of each of `todo` as it finishes: here one after another, or in
    `jobs` processes (spawned: a fresh interpreter each, as torch wants)."""
    if jobs <= 1 or len(todo) <= 1:
        for row, seed in todo:
            _announce(row, seed, plan, say)
            yield row, seed, run_row(row, seed, plan, out, resume, say)
        return
    import concurrent.futures as cf
    import multiprocessing

    pool = cf.ProcessPoolExecutor(min(jobs, len(todo)),
                                  mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(_run_row_in_process, row.name, seed, plan, out, resume):
                   (row, seed) for row, seed in todo}
        for future in cf.as_completed(futures):
            row, seed = futures[future]
            yield row, seed, future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_row_in_process(name: str, seed: int, plan: Plan, out: Path, resume: bool) -> dict:
    """run_row in a process of the pool, speaking on its own stdout."""
    from aiayn.table3.rows import ROWS

    _announce(ROWS[name], seed, plan, _say_line)
    return run_row(ROWS[name], seed, plan, out, resume, _say_line)


def _say_line(message: str) -> None:
    """A line on stdout in one write: the pool's processes share it, and with PYTHONUNBUFFERED
    print() writes a line's text and its newline apart (lines ran together)."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, m, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


__all__ = ["PLAN_FILE", "SHARED", "Plan", "auto_jobs", "default_updates", "dev_pairs",
           "evaluate_run", "read_plan", "read_results", "row_experiment", "run_row", "run_table",
           "write_outputs"]
