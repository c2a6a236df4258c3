"""A request's parameters as they arrive: its query string, then its JSON or form body, read within the server's
body limits. What each route makes of them is its schema's (mt/serve/requests.py)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.requests import Request

from mt.serve.errors import ApiError
from mt.serve.limits import ServeConfig


@dataclass
class Upload:
    """A file sent in a multipart form: the name its client gave it (never used as a path) and its bytes."""

    name: str
    data: bytes


async def read_params(request: Request, limits: ServeConfig) -> dict:
    """The request's parameters: its query string, then its JSON or form body (a multipart form's files as
    Uploads)."""
    params = dict(request.query_params)
    body = await _read_body(request, limits)
    if not body:
        return params
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if kind == "application/json":
            data = json.loads(body)
            if not isinstance(data, dict):
                raise ApiError(400, "Invalid JSON format")
            return params | data
        if kind == "application/x-www-form-urlencoded":
            form = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict"))
        elif kind == "multipart/form-data":
            form = await _multipart(request, body)
        else:
            raise ApiError(400, f"Invalid request: send JSON or a form, not {kind or 'a body without a type'}")
    except UnicodeDecodeError:
        raise ApiError(400, "Invalid request: the body is not valid UTF-8")
    except ValueError:  # json.JSONDecodeError, and multipart's parse errors
        raise ApiError(400, "Invalid JSON format" if kind == "application/json" else "Invalid request: bad form")
    if isinstance(form.get("q"), str):  # as LibreTranslate does: a form's line ends become \n
        form["q"] = "\n".join(form["q"].splitlines())
    return params | form


async def _read_body(request: Request, limits: ServeConfig) -> bytes:
    """The body, refused when longer than the limit (413) or slower than the timeout (408)."""
    limit = limits.body_limit
    if int(request.headers.get("content-length") or 0) > limit:
        raise ApiError(413, f"Request body over the limit of {limit:,} bytes")

    async def read() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"Request body over the limit of {limit:,} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(read(), limits.body_timeout)
    except asyncio.TimeoutError:
        raise ApiError(408, f"Request body not received within {limits.body_timeout:g} s")


async def _multipart(request: Request, body: bytes) -> dict:
    async def replay():
        return {"type": "http.request", "body": body, "more_body": False}

    form = await Request(request.scope, replay).form()
    try:
        return {key: value if isinstance(value, str) else Upload(value.filename or "", await value.read())
                for key, value in form.items()}
    finally:
        await form.close()
