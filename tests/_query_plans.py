"""Reading PostgreSQL's JSON plans in tests that prove a query walks an index instead of sorting."""

from __future__ import annotations

import json
from typing import Any


def plan_nodes(plan: Any) -> list[str]:
    """Every node of an `EXPLAIN (FORMAT JSON)` plan, as `Node Type` plus its index name when it has one."""
    found: list[str] = []
    stack = [json.loads(plan) if isinstance(plan, str) else plan]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if "Node Type" in item:
                found.append(f"{item['Node Type']} {item.get('Index Name', '')}".strip())
            stack.extend(v for v in item.values() if isinstance(v, list | dict))
    return found
