"""One Table 3 from rows run apart: other processes, other machines (`aiayn table3 --merge`).

    table = merge_tables(["t3-ab", "t3-cde"], "runs/table3")

Each folder is one `run_table` wrote (runs.py); they must share the plan's settings (scale,
corpus, budget, dev pairs, overrides, and the corpus's content: its pairs' SHA-256), and no row and seed may be in two of them. The merged
folder holds every result record (pointing at its run's folder, which stays where it is) and
the table, figure and plan, as a folder run_table wrote; it has one writer (aiayn.folder.lock).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aiayn.errors import UserError
from aiayn.folder.files import atomic_write_text
from aiayn.folder.lock import writer_lock
from aiayn.table3.plan import PLAN_FILE, SHARED, read_plan, same_setting
from aiayn.table3.runs import read_results, write_outputs


def merge_tables(folders: Sequence[str | Path], out: str | Path,
                 say: Callable[[str], None] = print) -> dict[str, Any]:
    """One table from the rows of tables run elsewhere (each a folder `run_table` wrote); they
    must share their plan's settings, and no row and seed may be in two of them."""
    out = Path(out)
    if not folders:
        raise UserError("--merge: name the table folders to merge")
    with writer_lock(out):
        shared, seen, results = None, {}, []
        for folder in map(Path, folders):
            plan = read_plan(folder)
            if shared is None:
                shared, first = plan, folder
            for key in SHARED:
                if not same_setting(key, plan, shared):
                    raise UserError(f"--merge: {folder} has {key}={plan.get(key)!r} but {first} "
                                    f"has {shared.get(key)!r}; rows of one table share it")
            for record in read_results(folder):
                key = (record["row"], int(record["seed"]))
                if key in seen and seen[key] != folder:
                    raise UserError(f"--merge: {key[0]} seed {key[1]} is in both {seen[key]} "
                                    f"and {folder}; keep one")
                if key not in seen:
                    seen[key] = folder
                    results.append(record)
        if not results:
            raise UserError(f"--merge: no finished row in {', '.join(map(str, folders))}")
        out.mkdir(parents=True, exist_ok=True)
        if (out / PLAN_FILE).is_file() and read_plan(out) != shared:
            raise UserError(f"--merge: {out} holds a table with other settings; choose another --out")
        atomic_write_text(out / PLAN_FILE, json.dumps(shared, indent=1) + "\n")
        for record in results:  # the merged folder holds every result (their runs stay put)
            path = out / "results" / f"{record['row']}-seed{record['seed']}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file():
                record = {**record, "folder": str(Path(seen[(record["row"], int(record["seed"]))])
                                                   / record["folder"])}
                atomic_write_text(path, json.dumps(record, indent=1) + "\n")
        table = write_outputs(out, results, shared)
        say(f"table3: merged {len(results)} row run(s) from {len(folders)} folder(s)")
        say(f"table3: {table['summary']}")
        return table


__all__ = ["merge_tables"]
