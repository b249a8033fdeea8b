"""A LangChain Runnable served as an Agent-Reach capability, and called back as a LangChain tool.

    pip install './sdk/python[langchain]'
    export AGENTREACH_KEY=ark_dev_...
    python examples/langchain_agent.py          # serves text.outline on 127.0.0.1:8002
    python examples/langchain_agent.py --ask "Reach layer. Routes jobs. Retries."   # the tool side

The chain here needs no model, so the example runs anywhere; put a chat model
in it (``prompt | ChatOpenAI() | StrOutputParser()``) and nothing else changes.
"""

from __future__ import annotations

import logging
import os
import sys

from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda

from agentreach import Agent, Client
from agentreach.langchain import AgentReachTool, serve_runnable

CAPABILITY = "text.outline"



def outline(prompt: PromptValue) -> str:
    """Stands in for a model: one line per sentence of the prompt's text."""
    text = prompt.to_string().split("\n", 1)[1]
    return "\n".join("- " + s.strip() for s in text.split(".") if s.strip())


# payload {"input": "..."} -> prompt -> an outline.
chain: Runnable[dict[str, str], str] = PromptTemplate.from_template("Outline:\n{input}") | RunnableLambda(outline)


def serve() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    agent = Agent(os.environ.get("AGENT_ID", "outliner-1"), start_jitter=1.0)
    serve_runnable(agent, CAPABILITY, chain)
    agent.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8002")))


def ask(text: str) -> None:
    with Client() as client:
        tool = AgentReachTool(name="outline", description="Outlines a text, one line per sentence.",
                              capability=CAPABILITY, client=client, timeout=60)
        print(tool.invoke({"input": text}))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--ask":
        ask(sys.argv[2])
    else:
        serve()
