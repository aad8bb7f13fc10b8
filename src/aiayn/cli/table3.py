"""`aiayn table3`: the paper's Table 3 (variations on the base model), trained and scored.

    aiayn table3 --out DIR [--corpus gettext|dates-numbers|FOLDER] [--rows base,A,B,C,D,E,big]
                 [--seeds N] [--updates U | --minutes-per-row M] [--scale cpu|base]
                 [--dev-pairs N] [--jobs N|auto] [--resume] [key=value ...]
    aiayn table3 --merge DIR1 DIR2 ... --out DIR    rows run in other processes or machines

Writes DIR/table3.md, table3.json and table3.png (aiayn.table3: the rows, their runs, the table).
"""

from __future__ import annotations

import argparse

from aiayn.cli.common import finite_float, positive_int, say, thread_count_or_auto

RAW = argparse.RawDescriptionHelpFormatter


def register(sub) -> None:
    """Add `aiayn table3` to the `aiayn` parser."""
    p = sub.add_parser(
        "table3", help="the paper's Table 3: train base and every variation, our numbers beside "
        "the paper's", formatter_class=RAW,
        description="Train the base model and the paper's Table 3 variations (rows A-E: heads, "
        "d_k, size, dropout and label smoothing, learned positions), each an ordinary "
        "translation run in DIR/rows/ROW/seedK, score each on the dev split (beam 4, sacreBLEU, "
        "PPL per subword, no checkpoint averaging) and write DIR/table3.md, table3.json and "
        "table3.png beside the paper's numbers.\n\n"
        "  aiayn table3 --out runs/table3            # scale cpu, gettext, a row per CPU core\n"
        "  aiayn table3 --out runs/table3 --resume   # skip finished rows, resume a cut one\n"
        "  aiayn table3 --rows base,A,B --out t1 & aiayn table3 --rows C,D,E --out t2; wait\n"
        "  aiayn table3 --merge t1 t2 --out runs/table3\n"
        "  torchrun --nproc_per_node=8 -m aiayn table3 --scale base --corpus DIR --out T  "
        "# each row on 8 GPUs")
    p.add_argument("--out", required=True, help="the table's folder")
    p.add_argument("--corpus", default="gettext",
                   help="a built-in corpus (gettext, dates-numbers) or a folder of "
                        "{train,valid}.{src,tgt} files, e.g. from `aiayn data` (default gettext)")
    p.add_argument("--rows", default=None, metavar="GROUPS",
                   help="comma-separated groups (base, A, B, C, D, E, big) or rows (C-N2, ...); "
                        "default base,A,B,C,D,E")
    p.add_argument("--seeds", type=positive_int, default=1,
                   help="seeds 0..N-1 per row: mean and spread (default 1)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--updates", type=positive_int, default=None,
                        help="the base row's updates; every row the paper's share of them (big "
                             "3x) (default: train.max_steps of the scale's config, "
                             "configs/table3-cpu.yaml or table3-base.yaml)")
    budget.add_argument("--minutes-per-row", type=finite_float, default=None, metavar="M",
                        help="a wall-clock budget per row instead (results then depend on the "
                             "machine's speed)")
    p.add_argument("--scale", default="cpu", choices=("cpu", "base"),
                   help="cpu: the paper's widths and vocabulary / 4, depth / 2 (default); base: its "
                        "sizes")
    p.add_argument("--dev-pairs", type=positive_int, default=None, metavar="N",
                   help="score the first N dev pairs (default: the whole dev split)")
    p.add_argument("--jobs", type=thread_count_or_auto, default="auto", metavar="N|auto",
                   help="rows trained side by side, a process each (at --scale cpu one thread "
                        "each); default auto: one per CPU core on a CPU, 1 on a GPU or under "
                        "torchrun (each row on all its processes)")
    p.add_argument("--resume", action="store_true",
                   help="continue the table in --out: finished rows are kept, a cut one resumes")
    p.add_argument("--merge", nargs="+", metavar="DIR", default=None,
                   help="merge the rows of these table folders into --out (nothing is trained)")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="settings for every row's run, e.g. train.device=cuda train.threads=2")
    p.set_defaults(func=_table3, distributed=True)  # torchrun: each row data-parallel


def _table3(args: argparse.Namespace) -> int:
    from aiayn.errors import UserError
    from aiayn.table3.merge import merge_tables
    from aiayn.table3.runs import Plan, run_table

    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        raise UserError(f"{bad[0]!r}: expected KEY=VALUE (e.g. train.threads=2)")
    if args.merge is not None:
        given = [f for f in ("rows", "updates", "minutes_per_row", "dev_pairs") if
                 getattr(args, f) is not None] + (["resume"] if args.resume else []) + \
            (["jobs"] if args.jobs != "auto" else []) + \
            (["key=value"] if args.overrides else [])
        if given:
            raise UserError(f"--merge takes only the folders and --out (not --{given[0]})"
                            .replace("_", "-"))
        from aiayn.devices import launched

        if launched():  # every process would write the one table
            raise UserError("--merge trains nothing: run it as a single process, not under "
                            "torchrun")
        merge_tables(args.merge, args.out, say=say)
        return 0
    plan = Plan(scale=args.scale, corpus=args.corpus, groups=args.rows, seeds=args.seeds,
                updates=args.updates, minutes_per_row=args.minutes_per_row,
                dev_pairs=args.dev_pairs, overrides=list(args.overrides))
    run_table(plan, args.out, resume=args.resume, say=say, jobs=args.jobs)
    return 0
