"""The simulated judge: a real HTTP server on loopback that answers like the judges' APIs.

`persona` decides replies and faults, `cast` which persona a request's model picks (a
vendor's model name no persona has: a stand-in), `rules` holds what each API refuses (model
profiles, `anthropic-version`, extended thinking), `compose` fits replies into the token
limit, `wire` speaks the OpenAI, Azure OpenAI and Anthropic formats, `failures` the error
replies, `limits` request ids and rate-limit headers, `app` is the Starlette app with its
endpoints and state, `server` runs it in-process or as a subprocess. `demo` and
`demo_nights` are the demo job's configuration and nights against it. A test double and the
demo's judge: the pipeline's stages (`tasks/`, `flows/` but the command line) never import it.
"""

from simjudge.app import CALL_KEY_HEADER, SimJudge
from simjudge.persona import (
    ACCEPTED_EFFORTS,
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
from simjudge.rules import is_reasoning_model
from simjudge.server import SimJudgeServer, bind_loopback, make_server, simjudge_subprocess
from simjudge.wire import (
    anthropic_error,
    anthropic_reply,
    azure_error,
    messages_digest,
    messages_of,
    openai_error,
    openai_reply,
)

__all__ = [
    "ACCEPTED_EFFORTS",
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
    "azure_error",
    "bind_loopback",
    "choose_fault",
    "invalid_reply",
    "is_reasoning_model",
    "latent_slot",
    "make_server",
    "messages_digest",
    "messages_of",
    "openai_error",
    "openai_reply",
    "persona_file_text",
    "rng_for",
    "simjudge_subprocess",
    "simulate_reply",
]
