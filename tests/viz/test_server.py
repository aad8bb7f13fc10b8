"""The explorer's JSON API: results equal the Inspector's, bad requests get a 4xx JSON error,
concurrent requests are all served correctly (a lock around the model, a threaded server)."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from aiayn.viz.inspect import Inspector
from aiayn.viz.server import MAX_BODY_BYTES, create_app, make_server
from tests.viz.test_attention import make_lm_folder, make_translation_folder, make_vit_folder


@pytest.fixture(scope="module")
def tr_app(tmp_path_factory):
    folder = make_translation_folder(tmp_path_factory.mktemp("tr"))
    return folder, create_app(folder)


@pytest.fixture(scope="module")
def client(tr_app):
    return tr_app[1].test_client()


def test_translate_returns_translation_tokens_and_attention(tr_app, client):
    folder, _ = tr_app
    r = client.post("/api/translate", json={"text": "the cat sat", "beam": 2})
    assert r.status_code == 200
    data = r.get_json()
    expected = Inspector.load(folder).run("the cat sat", beam=2)
    assert data["output"] == expected.output
    assert data["tokens"] == expected.labels
    assert [k["kind"] for k in data["kinds"]] == ["encoder", "decoder_self", "cross"]
    for m in expected.maps:
        got = np.array(data["attention"][m.kind])  # (L, H, T_q, T_k)
        assert got.shape == (m.n_layers, m.n_heads, len(m.q_labels), len(m.k_labels))
        np.testing.assert_allclose(got, np.stack(m.layers), atol=1e-5)
    one = client.post("/api/translate", json={"text": "the cat sat", "beam": 2, "kind": "cross"})
    assert list(one.get_json()["attention"]) == ["cross"]
    info = client.get("/api/info").get_json()
    assert info["family"] == "transformer" and info["endpoint"] == "translate"


def test_page_and_static_files_are_served(client):
    page = client.get("/")
    assert page.status_code == 200 and b'id="heatmap"' in page.data
    for name in ("app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200
    for name in ("index.html", "app.js", "style.css"):  # no CDN: nothing loaded from elsewhere
        text = client.get("/" if name == "index.html" else f"/static/{name}").data
        assert b"http://" not in text and b"https://" not in text and b'src="//' not in text


@pytest.mark.parametrize("body, content_type, status, message", [
    (b"{not json", "application/json", 400, "must be a JSON object"),
    (b'["a list"]', "application/json", 400, "must be a JSON object"),
    (b'{"text": "x"}', "text/plain", 400, "must be a JSON object"),
    (b'{"text": ""}', "application/json", 400, "'text' is empty"),
    (b'{"text": "   "}', "application/json", 400, "'text' is empty"),
    (b'{"text": 5}', "application/json", 400, "'text' must be a string"),
    (json.dumps({"text": "a" * 501}).encode(), "application/json", 400, "the limit is 500"),
    (b'{"text": "the cat", "beam": 0}', "application/json", 400, "'beam' must be an integer"),
    (b'{"text": "the cat", "beam": "4"}', "application/json", 400, "'beam' must be an integer"),
    (b'{"text": "the cat", "kind": "bogus"}', "application/json", 400, "unknown attention kind"),
    (json.dumps({"text": "a" * (MAX_BODY_BYTES + 1)}).encode(), "application/json", 413,
     "Too Large"),
    (b'{"text": "\\ud800"}', "application/json", 400, "unpaired surrogate"),
    (b'{"text": "a \\udfff b"}', "application/json", 400, "unpaired surrogate"),
    (b"[" * 7000 + b"]" * 7000, "application/json", 400, "nests deeper than"),
    (b'{"text": "x", "k": ' + b"[" * 7000 + b"]" * 7000 + b"}", "application/json", 400,
     "nests deeper than"),
])
def test_bad_requests_get_a_json_4xx(client, body, content_type, status, message):
    r = client.post("/api/translate", data=body, content_type=content_type)
    assert r.status_code == status
    data = r.get_json()
    assert message in data["error"] and "Traceback" not in r.get_data(as_text=True)


def test_wrong_endpoint_method_and_path(client):
    r = client.post("/api/generate", json={"prompt": "x"})
    assert r.status_code == 400 and "use /api/translate" in r.get_json()["error"]
    assert client.get("/api/translate").status_code == 405
    for path in ("/", "/api/info", "/api/translate", "/static/app.js"):
        r = client.options(path)
        assert r.status_code == 405 and "error" in r.get_json(), path
    r = client.get("/api/nothing")
    assert r.status_code == 404 and "error" in r.get_json()


def test_lm_generate(tmp_path):
    folder = make_lm_folder(tmp_path / "lm")
    client = create_app(folder).test_client()
    r = client.post("/api/generate", json={"prompt": "the ", "max_new_tokens": 6})
    assert r.status_code == 200
    data = r.get_json()
    expected = Inspector.load(folder).run("the ", max_new_tokens=6)
    assert data["output"] == expected.output and data["tokens"] == expected.labels
    np.testing.assert_allclose(np.array(data["attention"]["self"]), np.stack(expected.maps[0].layers),
                               atol=1e-5)
    assert client.post("/api/generate", json={"prompt": "x", "max_new_tokens": 999}).status_code == 400


def test_serve_refuses_a_vit_folder_with_one_line(tmp_path, capsys):
    from aiayn.cli import main
    folder = make_vit_folder(tmp_path / "vit")
    assert main(["serve", "--model", str(folder), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aiayn: error:") and "not 'vit'" in err and "viz attention" in err
    assert "Traceback" not in err


@contextlib.contextmanager
def serving(app, threads: int = 4):
    """Serve `app` with waitress on a free loopback port in a thread; yields the port. The server
    is stopped from inside its own event loop: emptying its channel map ends the loop after the
    current select; the sockets are closed only once the loop has returned (closing them from
    another thread, or inside a callback, races that select: EBADF)."""
    server = make_server(app, host="127.0.0.1", port=0, threads=threads)
    channels = server._map  # the listener, the trigger, connections
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield server.effective_port
    finally:
        held = []
        def stop():
            held.extend(channels.values())
            channels.clear()
        server.trigger.pull_trigger(stop)
        thread.join(10)
        server.task_dispatcher.shutdown()
        for channel in held:
            channel.close()
        assert not thread.is_alive(), "waitress did not stop"


@pytest.mark.slow
def test_twenty_concurrent_requests_through_waitress(tr_app):
    folder, app = tr_app
    sentences = [f"the cat sat on the mat {i}" for i in range(20)]
    inspector = Inspector.load(folder)
    expected = {s: inspector.run(s, beam=2) for s in sentences}

    def ask(port, text):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/translate",
                                     data=json.dumps({"text": text, "beam": 2}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return text, resp.status, json.loads(resp.read())

    with serving(app, threads=8) as port:
        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(lambda text: ask(port, text), sentences))
        for text, status, data in results:
            assert status == 200
            assert data["output"] == expected[text].output
            assert data["tokens"] == expected[text].labels
            np.testing.assert_allclose(np.array(data["attention"]["cross"]),
                                       np.stack(expected[text].maps[2].layers), atol=1e-5)
        # A bad request over real HTTP: still a JSON 4xx.
        with pytest.raises(urllib.error.HTTPError) as e:
            ask(port, "")
        assert e.value.code == 400 and "empty" in json.loads(e.value.read())["error"]


@pytest.mark.parametrize("host, ok", [("localhost", True), ("127.0.0.1:8000", True),
                                      ("[::1]:8000", True), ("LOCALHOST", True),
                                      ("evil.example", False), ("evil.example:8000", False),
                                      ("127.0.0.1.evil.example", False)])
def test_only_local_host_headers_are_answered(client, host, ok):
    """A page on another site that rebinds its name to 127.0.0.1 sends its own Host: refused."""
    r = client.get("/api/info", headers={"Host": host})
    if ok:
        assert r.status_code == 200
    else:
        assert r.status_code == 400 and "is not served here" in r.get_json()["error"]
        r = client.post("/api/translate", json={"text": "the cat"}, headers={"Host": host})
        assert r.status_code == 400


def test_the_host_given_to_serve_is_allowed(tr_app):
    folder, _ = tr_app
    app = create_app(Inspector.load(folder), host="myhost.lan")
    assert app.test_client().get("/api/info", headers={"Host": "myhost.lan:8000"}).status_code == 200


def _raw(port, data: bytes, timeout=10) -> bytes:
    import socket
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)  # the server may answer and close before the body is all sent
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def test_waitress_limits_answer_json(tr_app):
    _, app = tr_app
    with serving(app) as port:
        for claimed, body in [(100_000_000, b""), (1_000_000, b"x" * 1_000_000)]:
            head = (f"POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                    f"application/json\r\nContent-Length: {claimed}\r\n\r\n").encode()
            reply = _raw(port, head + body)
            status, _, rest = reply.partition(b"\r\n")
            assert b" 413 " in status, reply[:200]
            assert b"application/json" in rest.split(b"\r\n\r\n")[0].lower()
            assert "error" in json.loads(rest.split(b"\r\n\r\n", 1)[1])


def test_idle_connections_do_not_lock_others_out(tr_app):
    """150 idle connections (more than the request threads) and a request is still answered:
    a server whose threads waited on them would answer only once they timed out (waitress:
    after 120 s), past this request's own timeout, which then fails the test."""
    import socket
    _, app = tr_app
    with serving(app) as port:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(150)]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/info", timeout=30) as r:
                assert r.status == 200
        finally:
            for sock in idle:
                sock.close()


def test_the_folders_search_is_used_unless_a_beam_is_given(tmp_path, monkeypatch, capsys):
    """A translation folder's own search settings (meta "generation", as an imported model's
    generation_config.json gives them) drive the explorer, `aiayn viz attention` and Inspector.run
    as they drive `aiayn translate`: its beam unless one is asked for, its other settings always."""
    from aiayn.cli import main
    from aiayn.generation import decoder
    from aiayn.tasks import seq2seq

    search = {"beam": 3, "alpha": 1.0, "no_repeat_ngram_size": 2}
    folder = make_translation_folder(tmp_path / "m", meta={"generation": search})
    seen = []
    decode_ids = decoder.decode_ids

    def spy(*args, **kwargs):
        seen.append({k: kwargs[k] for k in search})
        return decode_ids(*args, **kwargs)

    monkeypatch.setattr(decoder, "decode_ids", spy)  # the Translator's and Inspector's
    client = create_app(folder).test_client()
    assert client.get("/api/info").get_json()["beam"] == 3  # the page starts with it
    assert client.post("/api/translate", json={"text": "the cat sat"}).status_code == 200
    assert client.post("/api/translate", json={"text": "the cat", "beam": 2}).status_code == 200
    assert Inspector.load(folder).run("the cat").output == \
        seq2seq.Translator.load(folder).translate("the cat")[0]
    assert main(["viz", "attention", "--model", str(folder), "the cat", "--out",
                 str(tmp_path / "figs"), "--kind", "cross", "--layer", "1"]) == 0
    assert seen == [search, {**search, "beam": 2}, search, search, search]
    # a folder without its own search: §6.1's beam 4, as translate's default
    plain = create_app(make_translation_folder(tmp_path / "plain")).test_client()
    assert plain.get("/api/info").get_json()["beam"] == 4
    capsys.readouterr()
