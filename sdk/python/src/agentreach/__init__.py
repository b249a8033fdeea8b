"""Agent-Reach for Python: agents that take work (push or pull) and callers that hand it out.

Agent side::

    from agentreach import Agent, JobContext

    agent = Agent("ocr-1", server_url="http://127.0.0.1:8080", api_key="ark_...")

    @agent.handler("document:parse:ocr")
    async def ocr(job: JobContext) -> dict:
        return {"text": "..."}

    agent.run(port=8001)

Caller side::

    from agentreach import Client

    with Client("http://127.0.0.1:8080", api_key="ark_...") as c:
        job = c.run("document:parse:ocr", {"url": "x.pdf"}, timeout=30)      # brokered
        res = c.invoke("document:parse:ocr", {"url": "x.pdf"})                # lookup mode: directly
"""

from ._base import DEFERRED, HealthReport, JobCancelled, JobContext, Refused, RegistrationError
from ._version import __version__
from .agent import Agent
from .client import AsyncClient, Client
from .direct import AgentChange, Attempt, Candidate, DirectReport, InvokeResult, LookupResult, NoCandidates
from .errors import (
    AgentReachError,
    APIError,
    Conflict,
    FanoutExceeded,
    HeadersTooLarge,
    Internal,
    InvalidArgument,
    NotFound,
    NotPull,
    Overloaded,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    SignatureError,
    TransportError,
    Unauthenticated,
    Unavailable,
    WaitTimeout,
)
from .grant import GRANT_HEADER, Grant, InvalidGrant, verify_grant
from .models import (
    TERMINAL_STATUSES,
    CallbackEvent,
    Delivery,
    Job,
    JobEvent,
    JobPage,
    JobSummary,
    Result,
    Submitted,
    failure,
    success,
)
from .signing import verify_callback, verify_delivery
from .worker import Worker

__all__ = [
    "__version__",
    "Agent",
    "Worker",
    "JobContext",
    "HealthReport",
    "DEFERRED",
    "Refused",
    "JobCancelled",
    "RegistrationError",
    "Client",
    "AsyncClient",
    "Delivery",
    "Candidate",
    "LookupResult",
    "InvokeResult",
    "Attempt",
    "AgentChange",
    "DirectReport",
    "NoCandidates",
    "Result",
    "success",
    "failure",
    "Submitted",
    "Job",
    "JobSummary",
    "JobPage",
    "JobEvent",
    "CallbackEvent",
    "TERMINAL_STATUSES",
    "verify_callback",
    "verify_delivery",
    "verify_grant",
    "Grant",
    "GRANT_HEADER",
    "InvalidGrant",
    "AgentReachError",
    "APIError",
    "InvalidArgument",
    "Unauthenticated",
    "PermissionDenied",
    "NotFound",
    "Conflict",
    "NotPull",
    "PayloadTooLarge",
    "FanoutExceeded",
    "RateLimited",
    "Overloaded",
    "HeadersTooLarge",
    "Unavailable",
    "Internal",
    "TransportError",
    "SignatureError",
    "WaitTimeout",
]
