"""Subcommands `server status|start|stop`: the user's local Prefect server, which the commands
of every work dir share (`flows.localserver`)."""

from __future__ import annotations

import datetime as dt
import os
from typing import Annotated

import typer
from rich.markup import escape

from flows.cli.app import app, console, state

server_app = typer.Typer(
    help="The local Prefect server your commands share (one per user, whatever the work "
    "dir): started by the first command that runs a flow, stopped after an idle period.",
    no_args_is_help=True,
)
app.add_typer(server_app, name="server")


def _say(text: str) -> None:
    console.print(escape(text), highlight=False, soft_wrap=True)


def _describe(info: object, auth_file: object) -> None:
    from flows.localserver import ServerInfo

    assert isinstance(info, ServerInfo)
    started = dt.datetime.fromtimestamp(info.started_at).strftime("%Y-%m-%d %H:%M:%S")
    _say(
        f"local Prefect server: pid {info.pid}, Prefect {info.prefect_version}, started "
        f"{started}; stops after {info.idle_seconds:.0f} s with no command or browser using it"
    )
    _say(f"UI: {info.url}  (API: {info.api_url})")
    _say(
        f"log in with the auth string in {auth_file} (`judgeline:` and a secret, made anew at "
        "each start): only you can read it, and the server answers nobody without it"
    )


@server_app.command("status")
def status() -> None:
    """Say whether your local Prefect server runs, its UI's address and how to log in, and
    which commands use it; exits 1 if none runs."""
    from flows.localserver import ServerFiles, live_server
    from flows.runtime import prefect_home

    if os.environ.get("PREFECT_API_URL"):
        _say(
            f"PREFECT_API_URL names {os.environ['PREFECT_API_URL']}: commands use that server, "
            "not a local one"
        )
    home = prefect_home(state.work)
    files = ServerFiles(home)
    info = live_server(files)
    if info is None:
        _say(f"no local Prefect server runs for {home}")
        raise typer.Exit(1)
    _describe(info, files.auth)
    using = files.active_clients()
    _say(f"in use by {'; '.join(using)}" if using else "idle: no command uses it now")
    _say(f"its home (database, log): {home}")


@server_app.command("start")
def start() -> None:
    """Start your local Prefect server now, if none runs (the first command that runs a flow
    does this anyway); prints its UI's address, where Prefect shows every run."""
    from flows.localserver import ServerFiles, ensure_server
    from flows.runtime import prefect_home

    home = prefect_home(state.work)
    _describe(ensure_server(home), ServerFiles(home).auth)


@server_app.command("stop")
def stop(
    force: Annotated[
        bool,
        typer.Option("--force", help="Stop it even while commands use it (they stop too)."),
    ] = False,
) -> None:
    """Stop your local Prefect server. Refused while commands use it, unless --force: each
    of them then stops within seconds, keeping every stored reply and its record
    (`judgeline runs` shows how to resume it)."""
    from flows.localserver import stop_server
    from flows.runtime import prefect_home

    home = prefect_home(state.work)
    info = stop_server(home, force=force)
    if info is None:
        _say(f"no local Prefect server runs for {home}")
        return
    _say(f"stopped the local Prefect server (pid {info.pid}, {info.url})")
