"""The metrics log of a training run: DIR/metrics.jsonl (or .csv) and TensorBoard scalars.

One row per logged step. On resume, rows written after the resumed step (by a run that went on
past its last checkpoint) are dropped first, so the log reads as one uninterrupted run.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from aiayn.config.files import load_json
from aiayn.errors import UserError
from aiayn.folder.files import atomic_write_text


def scalar_tag(key: str) -> str:
    """TensorBoard's name for a logged value, grouped by what it measures: "valid_bleu" ->
    "valid/bleu", "loss" -> "train/loss" (TensorBoard draws one section per group)."""
    return f"valid/{key.removeprefix('valid_')}" if key.startswith("valid_") else f"train/{key}"


class MetricsLog:
    def __init__(self, folder: str | Path, fmt: str = "jsonl", tensorboard: bool = True,
                 resume_step: int | None = None):
        """A log in `folder`; `resume_step` (a resumed run) drops what was logged after it."""
        self.path = Path(folder) / f"metrics.{fmt}"
        self.fmt = fmt
        self._writer = None
        if resume_step is not None:
            self.truncate_after(resume_step)
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional at run time
                SummaryWriter = None
            if SummaryWriter is not None:
                purge = None if resume_step is None else resume_step + 1
                self._writer = SummaryWriter(log_dir=str(Path(folder) / "tb"), purge_step=purge)

    def truncate_after(self, step: int) -> None:
        """Drop rows with step > `step` (a resumed run rewrites them)."""
        rows = [r for r in self.read() if int(r.get("step", 0)) <= step]
        if not self.path.exists():
            return
        if self.fmt == "jsonl":
            atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in rows))
        else:
            self.path.unlink()
            for r in rows:
                self._append_csv(r)

    def log(self, step: int, values: dict[str, Any]) -> None:
        row = {"step": step, **{k: _plain(v) for k, v in values.items()}}
        if self.fmt == "jsonl":
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
        else:
            self._append_csv(row)
        if self._writer is not None:
            for key, value in row.items():
                if key != "step" and isinstance(value, (int, float)) and math.isfinite(value):
                    self._writer.add_scalar(scalar_tag(key), value, step)
            self._writer.flush()

    def _append_csv(self, row: dict[str, Any]) -> None:
        # Rows differ in their columns (training vs validation): append while the header covers
        # the row, otherwise rewrite the file once with the union of the columns.
        header = self._header() if self.path.exists() else []
        if header and set(row) <= set(header):
            with self.path.open("a", encoding="utf-8", newline="") as f:
                csv.DictWriter(f, header).writerow(row)
            return
        rows = self.read() + [row]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.path, buf.getvalue())

    def _header(self) -> list[str]:
        with self.path.open(encoding="utf-8", newline="") as f:
            return next(csv.reader(f), [])

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        if self.fmt == "jsonl":
            rows = []
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    rows.append(load_json(line, f"{self.path}:{i + 1}"))  # bounded in depth
                except json.JSONDecodeError:
                    if i == len(lines) - 1:  # cut off by a crash mid-write: the step redoes it
                        break
                    raise UserError(f"{self.path}:{i + 1}: not a JSON line") from None
            return rows
        with self.path.open(encoding="utf-8", newline="") as f:
            return [{k: _parse(v) for k, v in r.items() if v != ""} for r in csv.DictReader(f)]

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    return value


def _parse(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
