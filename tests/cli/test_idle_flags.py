"""Every flag that has no effect in its context is refused in one line, not ignored: a user who
gave it expected it to change something (issue 37). The CTranslate2 flags and the beam's
settings with greedy search are tested beside their commands (test_translation.py); here the
language model's sampling flags with greedy decoding."""

import pytest

from tests.builders import run
from tests.cli.test_bounds import lm_folder  # noqa: F401 (a fixture)

# ruff: noqa: F811 (the fixture is the tests' argument)


@pytest.mark.parametrize("flag", [["--top-k", "5"], ["--top-p", "0.9"], ["--seed", "3"]])
def test_sampling_flags_with_greedy_decoding_are_refused(lm_folder, capsys, flag):
    code, out, err = run(capsys, "generate", "--model", lm_folder, "--temperature", "0", *flag,
                         "--max-new-tokens", "3")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"{flag[0]} has no effect with --temperature 0" in err
    code, out, _ = run(capsys, "generate", "--model", lm_folder, "--temperature", "0.5", *flag,
                       "--max-new-tokens", "3")
    assert code == 0 and out.endswith("\n")


def test_serve_refuses_the_ctranslate2_compute_type_without_the_engine(lm_folder, capsys):
    code, out, err = run(capsys, "serve", "--model", lm_folder, "--ct2-compute-type", "int8",
                         "--port", "0")
    assert code == 2 and out == "" and "add --engine ctranslate2" in err and err.count("\n") == 1
