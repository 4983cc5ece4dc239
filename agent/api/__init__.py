"""MRC's host API in Python: OCP's application API (``mrc.h``) and controller API
(``mrc_ctl.h``), bound to the host's running agent over its control socket.

``Context`` is the application's entry point (``agent.api.client``), ``Controller`` the
node controller's (``agent.api.controller``); ``docs/api.md`` lists every call beside OCP's.
Inside the agent, ``agent.api.service`` serves both; ``agent.api.ev_document`` expands EV
profiles written as JSON without an agent (``mrc-agent ctl ev expand``).
"""

from agent.api.client import CQ, MR, PD, QP, CompChannel, Context
from agent.api.controller import Controller, EvEventCQ
from agent.api.errors import (
    AgentGone,
    ApiError,
    Busy,
    InvalidArgument,
    NotFound,
    NotSupported,
    OutOfResources,
    PermissionDenied,
    TimedOut,
    TooBig,
)
from agent.api.types import (
    Access,
    AsyncEvent,
    CtlEvState,
    DeviceAttr,
    EpRequest,
    EpResponse,
    Ev,
    EventType,
    EvEvent,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    PortAdminState,
    ProfileState,
    QpState,
    QpType,
    RecvWR,
    SendFlags,
    SendWR,
    Sge,
    WcOpcode,
    WcStatus,
    WorkCompletion,
    WrOpcode,
)
from agent.core.ev_expansion import EvField

__all__ = [
    "CQ",
    "MR",
    "PD",
    "QP",
    "Access",
    "AgentGone",
    "ApiError",
    "AsyncEvent",
    "Busy",
    "CompChannel",
    "Context",
    "Controller",
    "CtlEvState",
    "DeviceAttr",
    "EpRequest",
    "EpResponse",
    "Ev",
    "EvEvent",
    "EvEventCQ",
    "EvField",
    "EvMode",
    "EvOp",
    "EvOpEntry",
    "EventType",
    "FormatMode",
    "InvalidArgument",
    "NotFound",
    "NotSupported",
    "OutOfResources",
    "PermissionDenied",
    "PortAdminState",
    "ProfileState",
    "QpState",
    "QpType",
    "RecvWR",
    "SendFlags",
    "SendWR",
    "Sge",
    "TimedOut",
    "TooBig",
    "WcOpcode",
    "WcStatus",
    "WorkCompletion",
    "WrOpcode",
]
