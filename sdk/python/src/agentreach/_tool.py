"""What the framework tools share: call a capability through Agent-Reach and answer its result."""

from __future__ import annotations

import json
from typing import Any, Mapping

from .client import AsyncClient, Client
from .errors import AgentReachError
from .models import Job

__all__ = ["CapabilityFailed", "call_capability", "acall_capability", "as_text"]


class CapabilityFailed(AgentReachError):
    """The job a tool submitted did not end in SUCCESS."""

    def __init__(self, job: Job) -> None:
        self.job = job
        detail = job.biz_code or job.error or ""
        super().__init__(f"{job.capability} ended {job.status}" + (f": {detail}" if detail else ""))


def call_capability(client: Client, capability: str, payload: Any, timeout: float,
                    options: Mapping[str, Any]) -> Any:
    """Submits, waits, and answers the result; raises :class:`CapabilityFailed` otherwise."""
    job = client.run(capability, payload, timeout=timeout, **dict(options))
    if not job.succeeded:
        raise CapabilityFailed(job)
    return job.result


async def acall_capability(client: AsyncClient, capability: str, payload: Any, timeout: float,
                           options: Mapping[str, Any]) -> Any:
    """The asyncio twin of :func:`call_capability`."""
    job = await client.run(capability, payload, timeout=timeout, **dict(options))
    if not job.succeeded:
        raise CapabilityFailed(job)
    return job.result


def as_text(result: Any) -> str:
    """A result as an LLM reads it: a string as it is, anything else as JSON."""
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
