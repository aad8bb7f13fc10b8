"""Property-based fuzzing (hypothesis) of the config loader, the corpus reader and the explorer
API: whatever comes in, the answer is a value or a one-line UserError / 4xx JSON, never a crash."""

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiayn.config.experiment import load_experiment
from aiayn.data.parallel import read_parallel, read_tsv
from aiayn.errors import UserError
from aiayn.tasks import seq2seq

# derandomize: the same examples on every run, so CI is reproducible (a fresh search is
# `pytest tests/test_fuzz.py --hypothesis-seed=N`).
FAST = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
SECTIONS = st.sampled_from(["train", "model", "data", "out", "task", "train.lr", "model.d_model",
                            "train.max_steps", "data.vocab_size", "model.preset", "train.clip_norm",
                            "model.dropout", "data.corpus", "train.device", "train.precision"])
VALUES = st.one_of(st.text(max_size=12), st.sampled_from(
    ["nan", "-inf", "1e400", "-1", "0", "[1, 2]", "{a: 1}", "null", "true", "'x'", "1e9", "!!str",
     "{", "]", "&a", "*a", "0x10", "1_000"]))


@FAST
@given(st.lists(st.tuples(SECTIONS, VALUES), max_size=4))
@example([("model.preset", "[1, 2]")])  # found by this test: was a TypeError (unhashable list)
def test_config_overrides_load_or_fail_with_a_user_error(pairs):
    overrides = [f"{k}={v}" for k, v in pairs]
    try:
        load_experiment("demo", overrides, task=seq2seq.TASK, out="unused")
    except UserError as e:
        assert "\n" not in str(e).strip()


@FAST
@given(st.binary(max_size=200), st.binary(max_size=200))
def test_the_corpus_reader_reads_or_fails_with_a_user_error(tmp_path, src, tgt):
    (tmp_path / "a").write_bytes(src)
    (tmp_path / "b").write_bytes(tgt)
    for read in (lambda: read_parallel(tmp_path / "a", tmp_path / "b"),
                 lambda: read_tsv(tmp_path / "a")):
        try:
            pairs = read()
        except UserError as e:
            assert "\n" not in str(e).strip()
        else:
            assert all(isinstance(s, str) and isinstance(t, str) and s and t for s, t in pairs)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
BODIES = st.one_of(
    st.dictionaries(st.sampled_from(["text", "prompt", "beam", "kind", "max_new_tokens", "x"]), JSON,
                    max_size=4).map(lambda d: json.dumps(d).encode()),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=300),
    st.text(max_size=60).map(lambda t: json.dumps({"text": t}).encode()),
)


@pytest.fixture(scope="module")
def explorer(tmp_path_factory):
    from aiayn.viz.server import create_app
    from tests.viz.test_attention import make_translation_folder

    return create_app(make_translation_folder(tmp_path_factory.mktemp("fz"))).test_client()


@FAST
@given(BODIES, st.sampled_from(["/api/translate", "/api/generate", "/api/encode", "/api/info",
                                "/", "/api/x"]),
       st.sampled_from(["POST", "GET", "PUT", "OPTIONS", "DELETE"]),
       st.sampled_from(["application/json", "text/plain", ""]))
def test_the_explorer_never_answers_5xx(explorer, body, path, method, content_type):
    r = explorer.open(path, method=method, data=body, content_type=content_type or None)
    assert r.status_code < 500, (r.status_code, r.get_data(as_text=True)[:200])
    if r.status_code >= 400:
        assert "error" in r.get_json()
