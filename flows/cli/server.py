"""Subcommands `server status|start|stop`: the user's local Prefect server, which the commands
of every work dir share (`flows.localserver`)."""

from __future__ import annotations

import datetime as dt
import os

import typer
from rich.markup import escape

from flows.cli.app import app, console, state

server_app = typer.Typer(
    help="The local Prefect server your commands share (one per user, whatever the work "
    "dir): started by the first command that runs a flow, stopped after an idle period.",
    no_args_is_help=True,
)
app.add_typer(server_app, name="server")


def _describe(info: object) -> None:
    from flows.localserver import ServerInfo

    assert isinstance(info, ServerInfo)
    started = dt.datetime.fromtimestamp(info.started_at).strftime("%Y-%m-%d %H:%M:%S")
    console.print(
        f"local Prefect server: pid {info.pid}, {info.url} (UI and API), Prefect "
        f"{info.prefect_version}, started {started}; stops after {info.idle_seconds:.0f} s "
        "with no command using it",
        highlight=False,
        soft_wrap=True,
    )


@server_app.command("status")
def status() -> None:
    """Say whether your local Prefect server runs, where, and whether commands are
    using it; exits 1 if none runs."""
    from flows.localserver import ServerFiles, live_server
    from flows.runtime import prefect_home

    if os.environ.get("PREFECT_API_URL"):
        console.print(
            f"PREFECT_API_URL names {escape(os.environ['PREFECT_API_URL'])}: commands use that "
            "server, not a local one",
            highlight=False,
            soft_wrap=True,
        )
    home = prefect_home(state.work)
    files = ServerFiles(home)
    info = live_server(files)
    if info is None:
        console.print(f"no local Prefect server runs for {escape(str(home))}", highlight=False)
        raise typer.Exit(1)
    _describe(info)
    busy = "in use by a command now" if files.clients_active() else "idle"
    console.print(f"{busy}; its home (database, log): {escape(str(home))}", highlight=False)
    console.print(
        f"only you can use it: its UI and API ask for the auth string `judgeline:` followed by "
        f"the secret in {escape(str(files.secret))}",
        highlight=False,
        soft_wrap=True,
    )


@server_app.command("start")
def start() -> None:
    """Start your local Prefect server now, if none runs (the first command that
    runs a flow does this anyway); prints its address, where Prefect's UI shows every run."""
    from flows.localserver import ensure_server
    from flows.runtime import prefect_home

    _describe(ensure_server(prefect_home(state.work)))


@server_app.command("stop")
def stop() -> None:
    """Stop your local Prefect server. A run using it at the time keeps every
    stored reply and its record; `judgeline runs` shows how to resume it."""
    from flows.localserver import stop_server
    from flows.runtime import prefect_home

    home = prefect_home(state.work)
    info = stop_server(home)
    if info is None:
        console.print(f"no local Prefect server runs for {escape(str(home))}", highlight=False)
        return
    console.print(f"stopped the local Prefect server (pid {info.pid}, {info.url})", highlight=False)
