"""Assembles the FastAPI app: settings, lifespan, middleware, error handlers and routers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool

from service.api.routes import collections, health, index, jobs, search
from service.deps import require_api_key
from service.errors import error_response, install_error_handlers
from service.settings import Settings
from service.state import build_state, start, stop

log = logging.getLogger("vela.service")


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

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > settings.max_request_bytes:
            return error_response(
                413, "payload_too_large", f"request body over {settings.max_request_bytes} bytes: split it"
            )
        return await call_next(request)

    app.middleware("http")(state.metrics.middleware)
    install_error_handlers(app)
    secured = [Depends(require_api_key)]
    for router in (index.router, jobs.router, collections.router, search.router):
        app.include_router(router, dependencies=secured)
    app.include_router(health.router)
    return app
