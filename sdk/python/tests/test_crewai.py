"""CrewAI: a tool that calls a capability through Agent-Reach.

CrewAI is a heavy optional extra (about 1 GB installed); ``make test`` does
not install it, and this module is skipped where it is missing
(``make test PY_EXTRAS=test,langchain,crewai`` brings it in).
"""

from __future__ import annotations

import asyncio
import os

import pytest

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
pytest.importorskip("crewai")

from agentreach import Agent, Client, JobContext, Result, failure, success  # noqa: E402
from agentreach._tool import CapabilityFailed  # noqa: E402
from agentreach.crewai import AgentReachCrewTool  # noqa: E402
from conftest import Service, healthy, serving, unique  # noqa: E402

pytestmark = pytest.mark.anyio


async def test_a_crewai_tool_runs_a_capability(service: Service) -> None:
    cap = unique("text.reverse")
    agent = Agent(unique("crew"), server_url=service.url, start_jitter=0, ttl_seconds=5)

    @agent.handler(cap)
    async def reverse(job: JobContext) -> Result:
        if job.payload["input"] == "fail":
            return failure("refused_word")
        return success(str(job.payload["input"])[::-1])

    async with serving(agent):
        await healthy(service, agent.agent_id)
        with Client(service.url) as c:
            tool = AgentReachCrewTool(name="reverse", description="Reverses a text.", capability=cap, client=c,
                                      timeout=20)
            assert await asyncio.to_thread(tool.run, input="stressed") == "desserts"
            with pytest.raises(CapabilityFailed) as e:
                await asyncio.to_thread(tool.run, input="fail")
            assert e.value.job.biz_code == "refused_word"
