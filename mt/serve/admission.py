"""A request's way in: its body within the server's limits (413, 408), its client's API key (403) and request rate
(429), then its parameters as its route's schema (400)."""

from __future__ import annotations

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter
from starlette.requests import Request

from mt.serve.bodies import read_params
from mt.serve.errors import ApiError
from mt.serve.requests import Bounds, S, parse


class Admission:
    """The checks every request of the APIs passes, in LibreTranslate's order: a client without a key is refused
    before its parameters are checked."""

    def __init__(self, bounds: Bounds, api_keys: frozenset[str]):
        self.bounds, self.api_keys = bounds, api_keys
        req_limit = bounds.limits.req_limit
        # --req-limit with the package LibreTranslate's limiter (Flask-Limiter) is built on: its fixed windows count
        # as LibreTranslate's do, and each client's count expires with its window.
        self.rate = RateLimitItemPerMinute(req_limit) if req_limit else None
        self.limiter = FixedWindowRateLimiter(MemoryStorage()) if self.rate else None

    async def admit(self, request: Request, schema: type[S]) -> S:
        """The request's parameters as `schema`, once its body is read and its client admitted."""
        params = await read_params(request, self.bounds.limits)
        self.check_client(request, params.get("api_key"))
        return parse(schema, params, self.bounds)

    def check_client(self, request: Request, key: object) -> None:
        """The API key (when the server has keys) and the client's request rate."""
        if self.api_keys and not key:
            raise ApiError(403, "Invalid request: this server needs an API key (api_key)")
        if self.api_keys and (not isinstance(key, str) or key not in self.api_keys):
            raise ApiError(403, "Invalid API key")
        # A client is its API key where the server has keys, else its address: a made-up key is no new client.
        client = key if self.api_keys else request.client.host if request.client else ""
        if self.rate and not self.limiter.hit(self.rate, client):
            raise ApiError(429, f"Slowdown: {self.rate}")  # "Slowdown: 3 per 1 minute", as LibreTranslate says
