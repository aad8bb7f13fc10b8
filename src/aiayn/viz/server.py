"""The attention explorer: a local web page and the JSON API behind it (docs/explorer.md).

    aiayn serve --model DIR            # http://127.0.0.1:8000/

The page (static/index.html + app.js + style.css, no CDN) posts a sentence to the API and draws
the attention heatmaps it gets back. Every request runs through one Inspector under a lock: the
model is not re-entrant-safe (a KV cache per call is, but torch's intra-op threads are shared),
and the server (waitress) handles requests on several threads.

Security: binds 127.0.0.1 unless told otherwise; request bodies are capped (MAX_CONTENT_LENGTH);
inputs are bounded in characters and in tokens (the model's max_len); every error is a JSON
object {"error": "..."} with a 4xx status (a 500 never carries a stack trace).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from flask import Flask, jsonify, request, send_from_directory
from werkzeug.exceptions import HTTPException

from aiayn.errors import UserError
from aiayn.families import ENCODER, LANGUAGE_MODEL, TRANSLATION, VIT
from aiayn.folder import folder_family
from aiayn.viz.inspect import Inspector

STATIC = Path(__file__).parent / "static"
MAX_BODY_BYTES = 16 * 1024
MAX_CHARS = 500
MAX_BEAM = 8
MAX_NEW_TOKENS = 64
ENDPOINT_FAMILIES = {"translate": TRANSLATION, "generate": LANGUAGE_MODEL, "encode": ENCODER}
log = logging.getLogger("aiayn.serve")


class BadRequest(Exception):
    """A client mistake: answered with status 400 and {"error": message}."""


def create_app(model: str | Path | Inspector, max_chars: int = MAX_CHARS) -> Flask:
    """The Flask app for one model folder (or a loaded Inspector)."""
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

    @app.get("/")
    def index():
        return send_from_directory(STATIC, "index.html")

    @app.get("/api/info")
    def info():
        return jsonify(family=inspector.family, endpoint=_endpoint(inspector.family),
                       max_chars=max_chars, max_len=inspector.max_len, max_beam=MAX_BEAM,
                       max_new_tokens=MAX_NEW_TOKENS)

    def run(endpoint: str):
        family = ENDPOINT_FAMILIES[endpoint]
        if inspector.family != family:
            raise BadRequest(f"this server holds a {inspector.family!r} model: use "
                             f"/api/{_endpoint(inspector.family)}, not /api/{endpoint}")
        body = _json_body()
        text = _text(body, "prompt" if endpoint == "generate" else "text", max_chars)
        beam = _int(body, "beam", 4, 1, MAX_BEAM)
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
        app.add_url_rule(f"/api/{endpoint}", endpoint, lambda e=endpoint: run(e), methods=["POST"])
    return app


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
    body = request.get_json(silent=True)  # None for a missing, malformed or non-JSON body
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object, e.g. {\"text\": \"...\"}")
    return body


def _text(body: dict[str, Any], key: str, max_chars: int) -> str:
    text = body.get(key)
    if not isinstance(text, str):
        raise BadRequest(f"{key!r} must be a string")
    if not text.strip():
        raise BadRequest(f"{key!r} is empty")
    if len(text) > max_chars:
        raise BadRequest(f"{key!r} has {len(text)} characters; the limit is {max_chars}")
    return text


def _int(body: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadRequest(f"{key!r} must be an integer from {lo} to {hi} (got {value!r})")
    return value


def serve(model: str | Path, host: str = "127.0.0.1", port: int = 8000, threads: int = 4,
          say=print) -> None:
    """Load the model and serve the explorer with waitress (a threaded production server)."""
    from waitress import serve as waitress_serve
    app = create_app(model)
    say(f"aiayn explorer: http://{host}:{port}/ (Ctrl-C to stop)")
    waitress_serve(app, host=host, port=port, threads=threads, max_request_body_size=MAX_BODY_BYTES)


__all__ = ["create_app", "serve"]
