"""The small corpus the snapshot tests (engine and HTTP) back up and restore: four topics, a keyword and an integer
field declared in a schema, and a filter on the integer one."""

from __future__ import annotations

from typing import Any

TOPICS = ["tides", "volcano", "insulin", "graphene"]
SCHEMA = {"fields": {"topic": "keyword", "year": "integer"}, "strict": False}
YEAR_FILTER = {"must": [{"key": "year", "range": {"gte": 2010}}]}


def documents(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"d{i}",
            "title": f"{TOPICS[i % 4]} {i}",
            "text": f"{TOPICS[i % 4]} study {i}: notes on {TOPICS[i % 4]} and the number {i}",
            "metadata": {"topic": TOPICS[i % 4], "year": 2000 + i},
        }
        for i in range(n)
    ]
