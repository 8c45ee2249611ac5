"""Assembles the FastAPI app: settings, lifespan, middleware, error handlers and routers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from models import Embedder as _torch_first  # noqa: F401  (torch before the routes load FAISS: models/_openmp.py)
from service.api.routes import (
    aliases,
    collections,
    documents,
    health,
    index,
    jobs,
    limits,
    models,
    search,
    snapshots,
    ui,
)
from service.api_keys import require_key
from service.deps import require_api_key
from service.errors import install_error_handlers
from service.middleware import limit_body, request_guard
from service.openapi import install_openapi
from service.schemas import ErrorResponse
from service.settings import Settings
from service.snapshot_uploads import sweep_uploads
from service.state import build_state, start, stop

log = logging.getLogger("vela.service")


class _Wrap:
    """Adapts a function `factory(app) -> app` to Starlette's `add_middleware(cls, **options)`."""

    def __init__(self, app: ASGIApp, factory: Callable[[ASGIApp], ASGIApp]) -> None:
        self.app = factory(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def public_paths(settings: Settings) -> frozenset[str]:
    """Paths that need no key when keys are on: the probes and the console always; metrics and the docs unless
    protected."""
    public = {"/healthz", "/readyz", *ui.PUBLIC_PATHS}  # the console's page asks for the key itself
    if not settings.protect_metrics:
        public.add("/metrics")
    if not settings.protect_docs:
        public |= {"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
    return frozenset(public)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    state = build_state(settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if not settings.auth_on:
            log.warning("API keys are off: set VELA_API_KEYS to require a key on every resource route")
        await run_in_threadpool(start, state)
        await run_in_threadpool(sweep_uploads, state)  # after start: jobs a crash interrupted are queued again
        log.info("ready", extra={"data_dir": str(settings.data_dir), "embedder": settings.embedder})
        yield
        await run_in_threadpool(stop, state)

    app = FastAPI(
        title="Vela",
        version="0.1.0",
        summary="Retrieval serving: dense, BM25 and hybrid search over learned embedders",
        lifespan=lifespan,
        # A path with a slash too many or too few (`/collections/notes/`) is a 404 in the error shape like any other
        # unknown path, not a bare 307 to the other spelling: an API client follows no redirect it did not expect.
        redirect_slashes=False,
    )
    app.state.vela = state

    # Starlette wraps middleware in reverse order of adding. Outermost first: metrics (sees every answer, 5xx
    # included), the request guard (id, deadline, catch-all), the key check (before any body byte is read), then
    # the body limits.
    app.add_middleware(
        _Wrap,
        factory=partial(
            limit_body,
            max_bytes=settings.max_request_bytes,
            timeout_s=settings.body_timeout_s,
            max_json_bytes=settings.max_json_bytes,
            raw_paths=frozenset({snapshots.UPLOAD_PATH}),  # streamed to disk; every other body is JSON
        ),
    )
    app.add_middleware(
        _Wrap,
        factory=partial(
            require_key, keys=settings.api_key_set, read_keys=settings.read_key_set, public=public_paths(settings)
        ),
    )
    app.add_middleware(
        _Wrap,
        factory=partial(
            request_guard,
            timeout_s=settings.request_timeout_s,
            access_log=settings.access_log,
            data_dir=settings.data_dir,
        ),
    )
    app.add_middleware(_Wrap, factory=partial(state.metrics.asgi, routes=lambda: app.routes))
    install_error_handlers(app)
    # The key dependency (security schemes in the OpenAPI document, 401 on each operation) only when keys are on,
    # so that the document says what the server does.
    secured: dict[str, Any] = {}
    if settings.auth_on:
        secured = {"dependencies": [Depends(require_api_key)], "responses": {401: {"model": ErrorResponse}}}
        if settings.read_key_set:
            secured["responses"][403] = {"model": ErrorResponse, "description": "a read-only key on a write"}
    routers = (index.router, jobs.router, collections.router, documents.router, search.router)
    for router in (
        *routers,
        search.recommend_router,
        aliases.router,
        models.router,
        limits.router,
        snapshots.router,
        snapshots.upload_router,
    ):
        app.include_router(router, **secured)
    app.include_router(health.router)
    app.include_router(ui.router)
    if settings.auth_on and settings.protect_metrics:
        app.include_router(health.metrics_router, **secured)
    else:
        app.include_router(health.metrics_router)
    install_openapi(app)  # every 422 in the document is the error shape the handlers send
    return app
