"""LangChain adapters (``pip install 'agentreach[langchain]'``).

Serve any Runnable as a capability::

    agent = Agent("summarizer-1")
    serve_runnable(agent, "text.summarize", prompt | model | StrOutputParser())

Call a capability through Agent-Reach as a LangChain tool::

    tool = AgentReachTool(name="summarize", description="Summarizes a text.",
                          capability="text.summarize", client=Client())
    tool.invoke({"input": "a long text"})    # the payload is the tool's arguments
"""

from __future__ import annotations

from typing import Any, Mapping

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from ._base import AgentBase, Handler, JobContext
from ._tool import CapabilityFailed, acall_capability, as_text, call_capability
from .client import AsyncClient, Client

__all__ = ["runnable_handler", "serve_runnable", "to_json", "AgentReachTool", "ToolInput"]


def to_json(value: Any) -> Any:
    """A Runnable's output as JSON: messages as ``{"type", "content"}``, pydantic models dumped."""
    if isinstance(value, BaseMessage):
        return {"type": value.type, "content": value.content}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def runnable_handler(runnable: Runnable[Any, Any], config: RunnableConfig | None = None) -> Handler:
    """A handler that invokes ``runnable`` with the job's payload and answers its output as JSON.

    The job's id, attempt and trace id go into the run's metadata (and so
    into LangSmith traces, if enabled). The run is awaited, so a cancel or the
    deadline cancels it; an exception fails the attempt (it is retried).
    """

    async def handle(job: JobContext) -> Any:
        run: RunnableConfig = dict(config or {})  # type: ignore[assignment]
        run["metadata"] = {**(run.get("metadata") or {}), "agentreach_job_id": job.job_id,
                           "agentreach_attempt": job.attempt, "agentreach_trace_id": job.trace_id}
        run.setdefault("run_name", job.capability)
        return to_json(await runnable.ainvoke(job.payload, config=run))

    return handle


def serve_runnable(agent: AgentBase, capability: str, runnable: Runnable[Any, Any], *,
                   accept: bool = False, config: RunnableConfig | None = None) -> None:
    """Serves ``runnable`` as ``capability`` on a push agent or a pull worker (see :func:`runnable_handler`)."""
    agent.add_handler(capability, runnable_handler(runnable, config), accept=accept)


class ToolInput(BaseModel):
    """The default arguments of an :class:`AgentReachTool`: one text input."""

    input: str = Field(description="What to send to the capability.")


class AgentReachTool(BaseTool):
    """A LangChain tool that runs a capability through Agent-Reach and answers its result.

    The tool's arguments (``args_schema``, by default one ``input`` string)
    are the job's payload. A string result is answered as it is, anything
    else as JSON; a job that does not succeed raises ``ToolException`` (see
    ``handle_tool_error``). Give ``client`` for ``invoke`` and
    ``async_client`` for ``ainvoke`` (one is made from the environment when
    missing).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    capability: str
    args_schema: type[BaseModel] = ToolInput
    client: Client | None = Field(default=None, exclude=True)
    async_client: AsyncClient | None = Field(default=None, exclude=True)
    timeout: float = 120.0
    submit_options: dict[str, Any] = Field(default_factory=dict)

    def _run(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> str:
        if self.client is None:
            self.client = Client()
        try:
            return as_text(call_capability(self.client, self.capability, kwargs, self.timeout, self.submit_options))
        except CapabilityFailed as e:
            raise ToolException(str(e)) from e

    async def _arun(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> str:
        if self.async_client is None:
            self.async_client = AsyncClient()
        try:
            return as_text(await acall_capability(self.async_client, self.capability, kwargs, self.timeout,
                                                  self.submit_options))
        except CapabilityFailed as e:
            raise ToolException(str(e)) from e
