"""The simulated judge: a real HTTP server on loopback that answers like the judges' APIs.

`persona` decides replies and faults, `wire` speaks the OpenAI and Anthropic formats,
`app` is the Starlette app with its endpoints and state, `server` runs it in-process or
as a subprocess.
"""

from tasks.simjudge.app import CALL_KEY_HEADER, SimJudge
from tasks.simjudge.persona import (
    PRESETS,
    FaultKind,
    Faults,
    Persona,
    ReasoningShift,
    Slot,
    choose_fault,
    invalid_reply,
    latent_slot,
    persona_file_text,
    rng_for,
    simulate_reply,
)
from tasks.simjudge.server import SimJudgeServer, bind_loopback, make_server, simjudge_subprocess
from tasks.simjudge.wire import (
    anthropic_error,
    anthropic_reply,
    messages_of,
    openai_error,
    openai_reply,
)

__all__ = [
    "CALL_KEY_HEADER",
    "FaultKind",
    "Faults",
    "PRESETS",
    "Persona",
    "ReasoningShift",
    "SimJudge",
    "SimJudgeServer",
    "Slot",
    "anthropic_error",
    "anthropic_reply",
    "bind_loopback",
    "choose_fault",
    "invalid_reply",
    "latent_slot",
    "make_server",
    "messages_of",
    "openai_error",
    "openai_reply",
    "persona_file_text",
    "rng_for",
    "simjudge_subprocess",
    "simulate_reply",
]
