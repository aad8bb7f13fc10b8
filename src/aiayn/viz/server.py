"""The attention explorer: a local web page and the JSON API behind it (docs/explorer.md).

    aiayn serve --model DIR            # http://127.0.0.1:8000/

The page (static/index.html + app.js + style.css, no CDN) posts a sentence to the API and draws
the attention heatmaps it gets back. Every request runs through one Inspector under a lock: the
model is not re-entrant-safe (a KV cache per call is, but torch's intra-op threads are shared),
and the server (waitress) handles requests on several threads.

Security: binds 127.0.0.1 unless told otherwise; only requests whose Host header names this
machine (127.0.0.1, localhost, ::1) or the --host given are answered, so a web page cannot reach
the server through DNS rebinding; request bodies are capped (16 KiB, refused from the
Content-Length header before reading); inputs are bounded in characters and in tokens (the
model's max_len); idle connections are closed after IDLE_SECONDS and up to MAX_CONNECTIONS are
held, so idle sockets cannot lock others out; every error, including waitress's own (413, 400),
is a JSON object {"error": "..."} with a 4xx status (a 500 never carries a stack trace).
"""

from __future__ import annotations

import errno
import json
import logging
import socket
import threading
from pathlib import Path
from typing import Any

from flask import Flask, jsonify, request, send_from_directory
from werkzeug.exceptions import HTTPException

from aiayn.errors import UserError
from aiayn.folder.families import ENCODER, LANGUAGE_MODEL, SEQ2SEQ, VIT
from aiayn.folder.load import folder_family
from aiayn.viz.inspect import Inspector

STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 16 * 1024
MAX_CHARS = 500
MAX_BEAM = 8
MAX_NEW_TOKENS = 64
MAX_JSON_DEPTH = 32  # request bodies are flat objects; deeper nesting is refused unparsed
IDLE_SECONDS = 10  # an idle connection is closed after this long (waitress's default is 120)
MAX_CONNECTIONS = 1000  # connections held at once (waitress's default is 100)
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
ENDPOINT_FAMILIES = {"translate": SEQ2SEQ, "generate": LANGUAGE_MODEL, "encode": ENCODER}
log = logging.getLogger("aiayn.serve")


class BadRequest(Exception):
    """A client mistake: answered with status 400 and {"error": message}."""


def create_app(model: str | Path | Inspector, max_chars: int = MAX_CHARS,
               host: str = "127.0.0.1") -> Flask:
    """The Flask app for one model folder (or a loaded Inspector); `host` (the address served)
    joins the Host-header allow-list."""
    family = model.family if isinstance(model, Inspector) else folder_family(model).name
    if family not in ENDPOINT_FAMILIES.values():  # checked before any weights are loaded
        hint = " (for a ViT: aiayn viz attention --model DIR IMAGE)" if family == VIT else ""
        raise UserError(f"{model}: the explorer serves translation, language-model and encoder "
                        f"folders, not {family!r}{hint}")
    inspector = model if isinstance(model, Inspector) else Inspector.load(model)
    lock = threading.Lock()
    app = Flask(__name__, static_folder=str(STATIC), static_url_path="/static")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.json.sort_keys = False
    _json_errors(app)
    allowed = {*LOCAL_HOSTS, host.strip("[]").lower()}

    @app.before_request
    def check_host():
        name = _host_name(request.host)
        if name not in allowed:
            raise BadRequest(f"Host {request.host!r} is not served here (allowed: "
                             f"{', '.join(sorted(allowed))}); start the server with --host "
                             "NAME to answer to another name")

    @app.get("/", provide_automatic_options=False)
    def index():
        return send_from_directory(STATIC, "index.html")

    @app.get("/api/info", provide_automatic_options=False)
    def info():
        search = inspector.search  # a translation folder's own beam (the page starts with it)
        return jsonify(family=inspector.family, endpoint=_endpoint(inspector.family),
                       max_chars=max_chars, max_len=inspector.max_len, max_beam=MAX_BEAM,
                       beam=search and search["beam"], max_new_tokens=MAX_NEW_TOKENS,
                       example=inspector.example[:max_chars])

    def run(endpoint: str):
        family = ENDPOINT_FAMILIES[endpoint]
        if inspector.family != family:
            raise BadRequest(f"this server holds a {inspector.family!r} model: use "
                             f"/api/{_endpoint(inspector.family)}, not /api/{endpoint}")
        body = _json_body()
        text = _text(body, "prompt" if endpoint == "generate" else "text", max_chars)
        beam = _int(body, "beam", None, 1, MAX_BEAM)  # none: the folder's search
        new = _int(body, "max_new_tokens", 30, 0, MAX_NEW_TOKENS)
        kind = body.get("kind")
        with lock:
            try:
                result = inspector.run(text, beam=beam, max_new_tokens=new)
            except UserError as e:
                raise BadRequest(str(e)) from None
        data = result.to_json()
        if kind is not None:
            have = [k["kind"] for k in data["kinds"]]
            if kind not in have:
                raise BadRequest(f"unknown attention kind {kind!r}: this model has "
                                 f"{', '.join(have)}")
            data["kinds"] = [k for k in data["kinds"] if k["kind"] == kind]
            data["attention"] = {kind: data["attention"][kind]}
        return jsonify(data)

    for endpoint in ENDPOINT_FAMILIES:
        app.add_url_rule(f"/api/{endpoint}", endpoint, lambda e=endpoint: run(e), methods=["POST"],
                         provide_automatic_options=False)
    # The static files' rule, too, answers OPTIONS with a JSON 405 rather than an empty 200.
    for rule in app.url_map.iter_rules():
        rule.provide_automatic_options = False
        rule.methods.discard("OPTIONS")
    return app


def _host_name(host: str) -> str:
    """The name in a Host header, without the port ("[::1]:8000" -> "::1")."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _json_errors(app: Flask) -> None:
    """Every error answers JSON {"error": message}, as docs/explorer.md documents."""

    @app.errorhandler(BadRequest)
    def bad_request(e):
        return jsonify(error=str(e)), 400

    @app.errorhandler(HTTPException)
    def http_error(e):  # 404, 405, 413 (body too large), ... as JSON
        return jsonify(error=f"{e.code} {e.name}: {e.description}"), e.code

    @app.errorhandler(Exception)
    def internal_error(e):
        log.exception("request failed")  # the trace goes to the server's log, not to the client
        return jsonify(error="internal error (see the server log)"), 500


def _endpoint(family: str) -> str:
    return next(e for e, f in ENDPOINT_FAMILIES.items() if f == family)


def _json_body() -> dict[str, Any]:
    """The request's JSON object: UTF-8 (RFC 8259; json.loads would also take UTF-16 and -32),
    within MAX_BODY_BYTES (Flask's MAX_CONTENT_LENGTH, waitress's max_request_body_size) and
    MAX_JSON_DEPTH; anything else is a 400 saying which."""
    must = "the request body must be a JSON object, e.g. {\"text\": \"...\"}"
    if not request.is_json:
        raise BadRequest(f"{must} sent as Content-Type: application/json")
    raw = request.get_data(cache=True)
    try:
        text = raw.decode("utf-8-sig")  # (a leading byte-order mark is allowed)
    except UnicodeDecodeError as e:
        raise BadRequest(f"the request body is not UTF-8 text ({e.reason} at byte {e.start})") \
            from None
    if _nesting(raw) > MAX_JSON_DEPTH:  # refused before the parser recurses
        raise BadRequest(f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise BadRequest(must)
    return body


def _nesting(raw: bytes) -> int:
    """The deepest bracket nesting of a JSON text (brackets inside strings are not counted)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def _text(body: dict[str, Any], key: str, max_chars: int) -> str:
    text = body.get(key)
    if not isinstance(text, str):
        raise BadRequest(f"{key!r} must be a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # JSON allows "\ud800"; no tokenizer can read it
        raise BadRequest(f"{key!r} holds an unpaired surrogate (not valid Unicode text)") from None
    if not text.strip():
        raise BadRequest(f"{key!r} is empty")
    if len(text) > max_chars:
        raise BadRequest(f"{key!r} has {len(text)} characters; the limit is {max_chars}")
    return text


def _int(body: dict[str, Any], key: str, default: int | None, lo: int, hi: int) -> int | None:
    if key not in body:
        return default
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadRequest(f"{key!r} must be an integer from {lo} to {hi} (got {value!r})")
    return value


def make_server(app: Flask, host: str = "127.0.0.1", port: int = 8000, threads: int = 4):
    """A waitress server for `app` with the explorer's limits; `.run()` serves until stopped.

    Errors waitress answers itself, before the app sees the request (a body over the limit as it
    streams in, a malformed request line), are JSON like the app's."""
    from waitress.channel import HTTPChannel
    from waitress.server import create_server
    from waitress.task import ErrorTask

    class JsonErrorTask(ErrorTask):
        def execute(self):
            e = self.request.error
            body = json.dumps({"error": f"{e.code} {e.reason}: {e.body}".strip()}).encode()
            self.status = f"{e.code} {e.reason}"
            self.response_headers.append(("Content-Type", "application/json"))
            self.set_close_on_finish()
            self.content_length = len(body)
            self.write(body)

    class JsonErrorChannel(HTTPChannel):
        error_task_class = JsonErrorTask

    try:  # resolves `host` and binds the socket
        server = create_server(app, host=host, port=port, threads=threads,
                               max_request_body_size=MAX_BODY_BYTES, channel_timeout=IDLE_SECONDS,
                               cleanup_interval=2, connection_limit=MAX_CONNECTIONS)
    except (OSError, ValueError) as e:
        if isinstance(e, ValueError) and "host/port" not in str(e):
            raise
        raise UserError(_cannot_listen(host, port, e)) from None
    server.channel_class = JsonErrorChannel
    return server


def _cannot_listen(host: str, port: int, e: OSError | ValueError) -> str:
    """One line for a failure to listen on host:port, naming the flag at fault."""
    if isinstance(e, (ValueError, socket.gaierror)):  # waitress: getaddrinfo found nothing
        return (f"--host {host!r}: not an address or a name of this machine (e.g. 127.0.0.1, "
                "localhost, or 0.0.0.0 for every interface)")
    reason = e.strerror or str(e)
    if e.errno == errno.EADDRINUSE:
        return (f"--port {port}: already in use on {host} ({reason}): another server is there; "
                "choose another --port, or 0 for a free one")
    if e.errno == errno.EADDRNOTAVAIL:
        return f"--host {host!r}: not an address of this machine ({reason})"
    if e.errno == errno.EACCES:
        return (f"--port {port}: may not be opened on {host} ({reason}; ports below 1024 need "
                "privileges): choose another --port")
    return f"--host {host!r} --port {port}: cannot listen there ({reason})"


def serve(model: str | Path, host: str = "127.0.0.1", port: int = 8000, threads: int = 4,
          say=print, engine: str = "torch", **engine_options: Any) -> None:
    """Load the model and serve the explorer with waitress (a threaded production server).
    engine="ctranslate2": translations decoded by CTranslate2 (Inspector.load)."""
    if engine != "torch":
        model = Inspector.load(model, engine=engine, **engine_options)
    server = make_server(create_app(model, host=host), host, port, threads)
    say(f"aiayn explorer: http://{host}:{server.effective_port}/ (Ctrl-C to stop)")
    server.run()


__all__ = ["create_app", "make_server", "serve"]
