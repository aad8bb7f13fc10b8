"""Ctrl-C while torch or numpy imports is held until the module is whole (aiayn.cli's import
finder): the interrupt then ends the command cleanly, and no half-made module is left behind."""

import signal
import sys

import pytest

import aiayn.cli as cli

PACKAGE = '''
import os, signal, sys
sys.modules["heldpkg_started"] = True
os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the import
for _ in range(1000):  # bytecode boundaries where Python would raise KeyboardInterrupt
    pass
sys.modules["heldpkg_finished"] = True
'''


@pytest.fixture
def held(tmp_path, monkeypatch):
    (tmp_path / "heldpkg").mkdir()
    (tmp_path / "heldpkg" / "__init__.py").write_text(PACKAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli._WholeImports, "NAMES", ("heldpkg",))
    monkeypatch.setattr(cli, "_SIGINT_SEEN", [])
    hook = cli._WholeImports()
    previous = signal.signal(signal.SIGINT, cli._note_sigint)
    sys.meta_path.insert(0, hook)
    yield
    sys.meta_path.remove(hook)
    signal.signal(signal.SIGINT, previous)
    for name in ("heldpkg", "heldpkg_started", "heldpkg_finished"):
        sys.modules.pop(name, None)


def test_ctrl_c_during_a_held_import_waits_for_the_whole_module(held):
    with pytest.raises(KeyboardInterrupt):
        import heldpkg  # noqa: F401
    assert "heldpkg_started" in sys.modules
    assert "heldpkg_finished" in sys.modules  # the module ran to its end before the interrupt
    assert cli._SIGINT_SEEN and not cli._DEFERRING


def test_without_the_finder_the_same_interrupt_cuts_the_module_short(held, monkeypatch):
    monkeypatch.setattr(cli._WholeImports, "NAMES", ("another",))  # heldpkg not held
    with pytest.raises(KeyboardInterrupt):
        import heldpkg  # noqa: F401
    assert "heldpkg_started" in sys.modules and "heldpkg_finished" not in sys.modules

