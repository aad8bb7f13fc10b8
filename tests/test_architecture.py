"""The package's layers, checked on the import graph of every module (imports inside functions
included): no task imports another task, models and building blocks import nothing above them,
the generic layers (data, training, generation) import no task, CLI or figure code, the model
folder's modules (aiayn.folder) are layered among themselves, and there is no import cycle.
Every module also imports cleanly on its own, and the folder's torch-free modules load no torch."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "aiayn"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The aiayn modules `name` imports, anywhere in its body."""
    path = MODULES[name]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
                       else node.module for a in node.names]
        else:
            continue
        found.update(t for t in targets if t == "aiayn" or t.startswith("aiayn."))
    found.discard(name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def layer(name: str) -> str:
    """A module's layer: its subpackage ("data"), or for the model folder's modules and the
    experiment loader, the module itself ("folder.files", "config.experiment"): they sit at
    different heights (the data layer writes through folder.files; folder.load builds models)."""
    parts = name.split(".")
    if len(parts) > 2 and (parts[1] == "folder" or name == "aiayn.config.experiment"):
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else ""


FOLDER = {"folder", "folder.files", "folder.lock", "folder.format", "folder.weights",
          "folder.checkpoint", "folder.families", "folder.load"}


@pytest.mark.parametrize("name", sorted(set(MODULES) - {"aiayn.__main__"}))
def test_every_module_imports_on_its_own(name):
    importlib.import_module(name)


# A task's modules beyond its own: the module -> the task it belongs to
TASK_PARTS = {"aiayn.tasks.translator": "aiayn.tasks.seq2seq",  # its user-facing object
              "aiayn.tasks.seq2seq_loss": "aiayn.tasks.seq2seq",  # its loss
              "aiayn.tasks.evaluation": "aiayn.tasks.seq2seq",  # a test set scored
              "aiayn.tasks.speed_probe": "aiayn.tasks.seq2seq",  # its updates/s, for train auto
              "aiayn.tasks.translation": "aiayn.tasks.seq2seq",  # its old name, an alias
              "aiayn.tasks.language_model_loss": "aiayn.tasks.language_model",  # loss, scores
              "aiayn.tasks.text_encoder": "aiayn.tasks.text_classification"}  # its object


def test_no_task_imports_another_task():
    tasks = [n for n in MODULES if n.startswith("aiayn.tasks.")]
    assert len({TASK_PARTS.get(n, n) for n in tasks}) == 4
    for name in tasks:
        task = TASK_PARTS.get(name, name)
        others = {t for t in GRAPH[name] if t.startswith("aiayn.tasks") and t != name
                  and TASK_PARTS.get(t, t) != task}
        assert not others, f"{name} imports {others}"


@pytest.mark.parametrize("low, allowed", [
    ("nn", {"nn", "masks", "config", "errors"}),
    ("models", {"nn", "models", "masks", "config", "errors"}),
    ("data", {"data", "errors", "config", "folder.files"}),
    ("generation", {"generation", "data", "masks", "errors", "config"}),
    ("training", {"training", "data", "errors", "config", "config.experiment", "devices",
                  "models", "nn", "masks", "sizes", *FOLDER}),
    ("sizes", {"errors", "config", "models"}),  # counts a config's model on the meta device
    # the typed configs and their presets sit below everything; the experiment loader above
    # the family table
    ("config", {"config", "errors", "devices"}),
    ("config.experiment", {"config", "errors", "devices", "folder.families", "sizes"}),
    # the model folder, bottom up: files and lock are torch-free and import no other part of it
    ("folder.files", {"errors"}),
    ("folder.lock", {"errors"}),
    ("folder.format", {"errors", "config", "folder.files", "folder.lock"}),
    ("folder", {"errors", "lazy", "folder.files", "folder.format", "folder.lock"}),
    ("folder.weights", {"errors", "folder.files"}),
    ("folder.checkpoint", {"errors", "folder.files", "folder.format"}),
    ("folder.families", {"config", "data", "errors", "models"}),
    ("folder.load", {"errors", "sizes", "folder.families", "folder.files", "folder.format",
                     "folder.weights"}),
])
def test_lower_layers_import_nothing_above_them(low, allowed):
    for name in (n for n in MODULES if layer(n) == low):
        above = {t for t in GRAPH[name] if layer(t) not in allowed}
        assert not above, f"{name} imports {above}"


def test_the_family_table_is_the_only_dispatch_on_family_names():
    """Family names are written once (aiayn.folder.families); other modules use its constants."""
    families = {'"transformer"', '"decoder_lm"', '"encoder"', '"vit"'}
    for name, path in MODULES.items():
        if name in ("aiayn.folder.families",):
            continue
        text = path.read_text(encoding="utf-8")
        hits = [f for f in families if f"== {f}" in text or f"family={f}" in text]
        assert not hits, f"{name} compares with family name literal(s) {hits}"


def test_no_import_cycle():
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(GRAPH.get(node, ())):
            if nxt not in GRAPH:
                continue
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt] if nxt in path else [node, nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if state.get(nxt) is None:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(GRAPH):
        if state.get(name) is None:
            visit(name, [name])


def test_the_folders_torch_free_modules_load_no_torch():
    """The command line and the data layer read and write model folders through these; the
    package's torch-using names are imported on first use."""
    probe = ("import sys, aiayn.folder, aiayn.folder.files, aiayn.folder.format, "
             "aiayn.folder.lock\n"
             "print(sorted(m for m in ('torch', 'numpy', 'safetensors') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out
