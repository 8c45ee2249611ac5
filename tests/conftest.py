"""Shared fixtures: where the benchmark data lives, and offline model settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
BEIR_DIR = Path(os.environ.get("VELA_BEIR_DIR", REPO_ROOT.parent / "shared" / "data" / "beir"))


@pytest.fixture(scope="session")
def beir_dir() -> Path:
    """The shared BEIR-layout datasets (../shared/data/beir); tests that need them skip without them."""
    if not (BEIR_DIR / "scifact" / "corpus.jsonl").exists():
        pytest.skip(f"benchmark data not found at {BEIR_DIR}")
    return BEIR_DIR
