from __future__ import annotations

from fastapi import APIRouter, Response

from service.api.json_body import JsonRoute
from service.deps import State
from service.errors import ApiError
from service.state import queue_status

router = APIRouter(tags=["health"], route_class=JsonRoute)
# Apart from the probes: VELA_PROTECT_METRICS puts it behind the API key.
metrics_router = APIRouter(tags=["health"], route_class=JsonRoute)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


# Load balancers and uptime checkers often probe with HEAD; same answer, no body (kept out of the schema).
router.add_api_route("/healthz", healthz, methods=["HEAD"], include_in_schema=False)


@router.get("/readyz", responses={503: {"description": "the process is stopping"}})
def readyz(state: State) -> dict[str, object]:
    """Readiness: models loaded, collections checked, the job queue running. `queue` is `unreachable` while Redis
    does not answer: writes are refused with 503 `queue_unavailable` meanwhile, but searches are served, so the
    process stays ready (200)."""
    if not state.ready:
        raise ApiError(503, "not_ready", "not serving: the process is stopping")
    # Counts and states only: the probe is public even with keys on, and must not show install paths or the
    # Redis URL.
    return {
        "status": "ready",
        "collections": len(state.collections.names()),
        "embedders": len(state.embedders.loaded()),
        "queue": queue_status(state),
    }


router.add_api_route("/readyz", readyz, methods=["HEAD"], include_in_schema=False)


@metrics_router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"description": "the exposition", "content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def metrics(state: State) -> Response:
    """Prometheus text format (version 0.0.4)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


metrics_router.add_api_route("/metrics", metrics, methods=["HEAD"], include_in_schema=False)
