"""Assembles the FastAPI app: settings, lifespan, middleware, error handlers and routers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.routes import collections, health, index, jobs, search
from service.deps import require_api_key
from service.errors import error_response, install_error_handlers
from service.settings import Settings
from service.state import build_state, start, stop

log = logging.getLogger("vela.service")


class _Wrap:
    """Adapts a function `factory(app) -> app` to Starlette's `add_middleware(cls, **options)`."""

    def __init__(self, app: ASGIApp, factory: Callable[[ASGIApp], ASGIApp]) -> None:
        self.app = factory(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    state = build_state(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if not settings.api_key_set:
            log.warning("API keys are off: set VELA_API_KEYS to require a key on every resource route")
        await run_in_threadpool(start, state)
        log.info("ready", extra={"data_dir": str(settings.data_dir), "embedder": settings.embedder})
        yield
        await run_in_threadpool(stop, state)

    app = FastAPI(
        title="Vela",
        version="0.1.0",
        summary="Retrieval serving: dense, BM25 and hybrid search over learned embedders",
        lifespan=lifespan,
    )
    app.state.vela = state

    def limit_body(inner: ASGIApp) -> ASGIApp:
        """Refuses a declared body over the limit before reading it (pure ASGI: no per-request task)."""

        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                length = Headers(scope=scope).get("content-length")
                if length is not None and length.isdigit() and int(length) > settings.max_request_bytes:
                    message = f"request body over {settings.max_request_bytes} bytes: split it"
                    await error_response(413, "payload_too_large", message)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        return middleware

    # Starlette wraps middleware in reverse order of adding: metrics outermost, so it sees the 413s too.
    app.add_middleware(_Wrap, factory=limit_body)
    app.add_middleware(_Wrap, factory=state.metrics.asgi)
    install_error_handlers(app)
    secured = [Depends(require_api_key)]
    for router in (index.router, jobs.router, collections.router, search.router):
        app.include_router(router, dependencies=secured)
    app.include_router(health.router)
    return app
