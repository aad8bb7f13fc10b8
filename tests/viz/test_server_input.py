"""The explorer's input at its edges (issue 37): a request body must be UTF-8 JSON within the size
bound, else a 400 or 413 with a one-line JSON reason (over HTTP too, a chunked body included); and
`aiayn serve` given a host or port it cannot listen on says so in one line naming --host or
--port and the value, exit 2, no traceback. Real sockets listen on 127.0.0.1 only."""

from __future__ import annotations

import errno
import json
import socket

import pytest

from aiayn.cli import main
from aiayn.viz import server as server_module
from aiayn.viz.server import MAX_BODY_BYTES, create_app
from tests.viz.test_attention import make_translation_folder
from tests.viz.test_server import _raw, serving


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_translation_folder(tmp_path_factory.mktemp("tr"))


@pytest.fixture(scope="module")
def app(folder):
    return create_app(folder)


@pytest.mark.parametrize("body, message", [
    (b'{"text": "caf\xe9"}', "the request body is not UTF-8 text (invalid continuation byte at "
                             "byte 13)"),
    (b'{"text": "\xff\xfe"}', "the request body is not UTF-8 text (invalid start byte at byte 10)"),
    ('{"text": "the cat"}'.encode("utf-16"), "the request body is not UTF-8 text"),
    ('{"text": "the cat"}'.encode("utf-32"), "the request body is not UTF-8 text"),
], ids=["latin-1", "bad-bytes", "utf-16", "utf-32"])
def test_a_body_that_is_not_utf8_gets_a_400_saying_so(app, body, message):
    r = app.test_client().post("/api/translate", data=body, content_type="application/json")
    assert r.status_code == 400
    error = r.get_json()["error"]
    assert error.startswith(message) and "\n" not in error


def test_a_utf8_body_with_a_byte_order_mark_or_non_ascii_text_is_read(app):
    client = app.test_client()
    for body in ('\ufeff{"text": "the cat"}'.encode(), '{"text": "the café"}'.encode()):
        assert client.post("/api/translate", data=body,
                           content_type="application/json").status_code == 200


def test_a_body_without_the_json_content_type_is_told_which(app):
    r = app.test_client().post("/api/translate", data=b'{"text": "x"}', content_type="text/plain")
    assert r.status_code == 400
    assert r.get_json()["error"].endswith("sent as Content-Type: application/json")


def _post(port: int, head: str, body: bytes) -> tuple[bytes, dict]:
    reply = _raw(port, (f"POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                        f"application/json\r\nConnection: close\r\n{head}\r\n").encode() + body)
    status, _, rest = reply.partition(b"\r\n")
    return status, json.loads(rest.split(b"\r\n\r\n", 1)[1])


def _chunked(data: bytes, size: int = 4096) -> bytes:
    parts = [data[i:i + size] for i in range(0, len(data), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def test_over_http_bad_bytes_get_a_400_and_a_long_chunked_body_a_413(app):
    with serving(app) as port:
        bad = b'{"text": "caf\xe9"}'
        status, data = _post(port, f"Content-Length: {len(bad)}\r\n", bad)
        assert b" 400 " in status and data["error"].startswith("the request body is not UTF-8")
        big = json.dumps({"text": "a" * MAX_BODY_BYTES}).encode()
        status, data = _post(port, "Transfer-Encoding: chunked\r\n", _chunked(big))
        assert b" 413 " in status and "error" in data
        fine = json.dumps({"text": "the cat"}).encode()
        status, data = _post(port, "Transfer-Encoding: chunked\r\n", _chunked(fine, 5))
        assert b" 200 " in status and "output" in data


def refused(capsys, *argv) -> str:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_serve_on_a_port_in_use_names_the_port(folder, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = refused(capsys, "serve", "--model", folder, "--host", "127.0.0.1", "--port", port)
    assert err.startswith(f"aiayn: error: --port {port}: already in use on 127.0.0.1")


def test_serve_on_a_host_that_does_not_resolve_names_the_host(folder, capsys, monkeypatch):
    err = refused(capsys, "serve", "--model", folder, "--host", "", "--port", "0")
    assert err.startswith("aiayn: error: --host '': not an address or a name of this machine")

    def no_such_name(host, *args, **kwargs):  # as the resolver answers for a junk name, offline
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_name)
    err = refused(capsys, "serve", "--model", folder, "--host", "junk", "--port", "0")
    assert err.startswith("aiayn: error: --host 'junk': not an address or a name of this machine")


@pytest.mark.parametrize("code, message", [
    (errno.EADDRNOTAVAIL, "--host '192.0.2.1': not an address of this machine"),
    (errno.EACCES, "--port 80: may not be opened on 192.0.2.1"),
    (errno.ENOBUFS, "--host '192.0.2.1' --port 80: cannot listen there"),
])
def test_every_failure_to_listen_is_one_line_naming_the_flag(app, monkeypatch, code, message):
    """What binding another address or a privileged port answers (nothing is bound here: the
    server's create_server fails as the socket would)."""
    import waitress.server

    def fails(*args, **kwargs):
        raise OSError(code, __import__("os").strerror(code))

    monkeypatch.setattr(waitress.server, "create_server", fails)
    with pytest.raises(server_module.UserError) as e:
        server_module.make_server(app, host="192.0.2.1", port=80)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
