"""LangChain: a Runnable served as a capability, and a tool that calls a capability through Agent-Reach."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.runnables import RunnableConfig, RunnableLambda  # noqa: E402
from langchain_core.tools import ToolException  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from agentreach import Agent, AsyncClient, Client, Worker  # noqa: E402
from agentreach.langchain import AgentReachTool, serve_runnable  # noqa: E402
from conftest import Service, healthy, serving, unique, working  # noqa: E402

pytestmark = pytest.mark.anyio


class Shout(BaseModel):
    text: str
    times: int = 1


async def test_a_runnable_served_by_an_agent_is_a_tool_of_another(service: Service) -> None:
    cap = unique("text.shout")
    seen: list[dict[str, Any]] = []

    def shout(payload: dict[str, Any], config: RunnableConfig) -> AIMessage:
        seen.append(dict(config.get("metadata") or {}))
        return AIMessage(content=" ".join([str(payload["text"]).upper()] * int(payload.get("times", 1))))

    agent = Agent(unique("lc"), server_url=service.url, start_jitter=0, ttl_seconds=5)
    serve_runnable(agent, cap, RunnableLambda(shout))
    async with serving(agent):
        await healthy(service, agent.agent_id)
        async with AsyncClient(service.url) as ac:
            tool = AgentReachTool(name="shout", description="Shouts a text.", capability=cap,
                                  args_schema=Shout, async_client=ac, timeout=20)
            out = await tool.ainvoke({"text": "hello", "times": 2})
        assert out == '{"type": "ai", "content": "HELLO HELLO"}'
        assert seen[0]["agentreach_attempt"] == 1 and seen[0]["agentreach_job_id"]

        # The sync tool, with the default one-string schema, from a thread (it blocks).
        with Client(service.url) as c:
            plain = AgentReachTool(name="shout_plain", description="Shouts.", capability=cap, client=c, timeout=20,
                                   submit_options={"max_attempts": 1})
            with pytest.raises(ToolException):
                await asyncio.to_thread(plain.invoke, {"input": "no text key"})


async def test_a_runnable_served_by_a_pull_worker(service: Service) -> None:
    cap = unique("text.count")
    worker = Worker(unique("lc-pull"), server_url=service.url, start_jitter=0, ttl_seconds=5, claim_wait=2)
    serve_runnable(worker, cap, RunnableLambda(lambda p: {"words": len(str(p["input"]).split())}))
    async with working(worker), AsyncClient(service.url) as ac:
        tool = AgentReachTool(name="count", description="Counts words.", capability=cap, async_client=ac,
                              timeout=20)
        assert await tool.ainvoke({"input": "one two three"}) == '{"words": 3}'
