"""/models: the model registry, what `embedder` (POST /index) and `rerank.model` (/search) may name."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from service.api.json_body import JsonRoute
from service.deps import State
from service.model_registry import list_models

router = APIRouter(prefix="/models", tags=["models"], route_class=JsonRoute)


class EvalOut(BaseModel):
    name: str = Field(..., description="the recorded file's name (UTC time and label)")
    result: dict[str, Any] = Field(..., description="the evaluation as recorded, e.g. `vela eval --json` output")


class ModelOut(BaseModel):
    name: str = Field(..., description="what a request names it by")
    kind: Literal["embedder", "reranker"]
    dims: int | None = Field(None, description="an embedder's vector dims")
    created_at: float | None = Field(None, description="when it was registered (unix time); null for the built-in")
    builtin: bool = Field(False, description="the packaged default, not a registry folder")
    aliases: list[str] = Field(default_factory=list, description="other names of the built-in default")
    training: dict[str, Any] | None = Field(
        None, description="the arguments its trainer saved beside the weights (training_args.json, step log left out)"
    )
    evals: list[EvalOut] = Field(default_factory=list, description="evaluation results recorded for it")


class ModelList(BaseModel):
    models: list[ModelOut]


@router.get("", response_model=ModelList)
async def list_all(state: State) -> ModelList:
    """Every model a request may name: the built-in `default` first, then the registered ones."""
    models = await run_in_threadpool(list_models, settings=state.settings)
    return ModelList(models=[ModelOut(**m) for m in models])
