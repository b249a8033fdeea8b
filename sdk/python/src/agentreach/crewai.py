"""A CrewAI tool that runs a capability through Agent-Reach (``pip install 'agentreach[crewai]'``).

    tool = AgentReachCrewTool(name="summarize", description="Summarizes a text.",
                              capability="text.summarize", client=Client())
    Agent(role=..., tools=[tool])

The tool's arguments (``args_schema``, by default one ``input`` string) are
the job's payload; the result comes back as text (a string as it is,
anything else as JSON). A job that does not succeed raises
:class:`~agentreach._tool.CapabilityFailed`, which CrewAI shows the agent.
"""

from __future__ import annotations

from typing import Any

from crewai.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from ._tool import CapabilityFailed, acall_capability, as_text, call_capability
from .client import AsyncClient, Client

__all__ = ["AgentReachCrewTool", "CrewToolInput", "CapabilityFailed"]


class CrewToolInput(BaseModel):
    """The default arguments of an :class:`AgentReachCrewTool`: one text input."""

    input: str = Field(description="What to send to the capability.")


class AgentReachCrewTool(BaseTool):
    """Runs ``capability`` through Agent-Reach with the tool's arguments as its payload."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    capability: str
    args_schema: type[BaseModel] = CrewToolInput
    client: Client | None = Field(default=None, exclude=True)
    async_client: AsyncClient | None = Field(default=None, exclude=True)
    timeout: float = 120.0
    submit_options: dict[str, Any] = Field(default_factory=dict)

    def _run(self, *args: Any, **kwargs: Any) -> str:
        if self.client is None:
            self.client = Client()
        return as_text(call_capability(self.client, self.capability, kwargs, self.timeout, self.submit_options))

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        if self.async_client is None:
            self.async_client = AsyncClient()
        return as_text(await acall_capability(self.async_client, self.capability, kwargs, self.timeout,
                                              self.submit_options))
