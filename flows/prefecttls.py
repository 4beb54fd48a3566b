"""One verifying SSL context per CA file for Prefect's own HTTP clients.

Reading certifi's bundle into a context costs 30-45 ms of CPU, and Prefect reads it for every
API client it makes (four to six a command, some on its service threads) and for two
transports `prefect.blocks.webhook` makes when it is imported. None of them changes its
context after, so they can share one. Contexts made with a client certificate, or to skip
verification (PREFECT_API_TLS_INSECURE_SKIP_VERIFY, which Prefect changes after making it),
are still made each time. judgeline's judge clients make their own (`tasks.judging.client`).
"""

from __future__ import annotations

import contextlib
import os
import ssl
import sys
import types
from collections.abc import Iterator
from typing import Any

PREFECT_TLS_USERS = (
    "prefect.client.orchestration", "prefect._internal.version_checking",
    "prefect._internal.websockets",
)  # fmt: skip
"""Prefect's modules that make their API clients' contexts with `ssl.create_default_context`."""


class _SharedTLS(types.ModuleType):
    """The `ssl` module, except that a verifying context for a CA file is made once."""

    def __init__(self) -> None:
        super().__init__("ssl")
        # Every name of `ssl` but the one this class defines: a function in the instance's
        # dict would be found before the method.
        self.__dict__.update((k, v) for k, v in vars(ssl).items() if k != "create_default_context")
        self._made: dict[str, ssl.SSLContext] = {}

    def create_default_context(  # type: ignore[no-untyped-def]
        self, purpose=ssl.Purpose.SERVER_AUTH, *, cafile=None, capath=None, cadata=None
    ) -> ssl.SSLContext:
        if cafile is None or capath is not None or cadata is not None:
            return ssl.create_default_context(purpose, cafile=cafile, capath=capath, cadata=cadata)
        key = f"{purpose}\0{cafile}"
        if key not in self._made:
            self._made[key] = ssl.create_default_context(purpose, cafile=cafile)
        return self._made[key]


SHARED = _SharedTLS()


def share_tls_contexts() -> None:
    """Prefect's API clients made from now on take their verifying context from SHARED."""
    for name in PREFECT_TLS_USERS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "ssl", None) is ssl:
            module.ssl = SHARED  # type: ignore[attr-defined]


@contextlib.contextmanager
def shared_while_importing() -> Iterator[None]:
    """While Prefect is imported, an httpx transport made to verify with a CA file (httpx's
    default: SSL_CERT_FILE if set, else certifi's bundle; no client certificate) takes
    SHARED's context for that file."""
    import certifi
    from httpx._transports import default

    make = default.create_ssl_context

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        chosen = os.environ.get("SSL_CERT_FILE") if trust_env else None
        by_dir = trust_env and os.environ.get("SSL_CERT_DIR") and not chosen
        if verify is True and cert is None and not by_dir:
            return SHARED.create_default_context(cafile=chosen or certifi.where())
        return make(verify=verify, cert=cert, trust_env=trust_env)

    default.create_ssl_context = create_ssl_context
    try:
        yield
    finally:
        default.create_ssl_context = make
