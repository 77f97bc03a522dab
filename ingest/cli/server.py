"""``sci-ingest server``: start, stop, report the embedded SecantusDB server; add users."""

from __future__ import annotations

from ingest.config import Settings
from ingest.errors import ConfigError
from ingest.server.access import add_user, credentials_path, load_credentials, with_credentials
from ingest.server.embedded import holder, running_server, server_state, start_background, stop_background

__all__ = ["cmd_server"]


def cmd_server(args) -> int:
    settings = Settings.from_env(db_name=args.db)
    if args.action == "start":
        state = start_background(settings.state_dir, port=args.port, auth=args.auth)
        verb = "already running" if state["already_running"] else "started"
        print(f"SecantusDB {verb}: pid {state['pid']}, {state['uri']}, data in {state['data_dir']}")
        if state.get("was_idle_s"):
            print(f"it was the per-home server of a command (stopping after {state['was_idle_s']:g} s idle); "
                  "it now runs until `sci-ingest server stop`")
        if state.get("auth"):
            print(f"authentication on: commands of this home log in as the user in "
                  f"{credentials_path(settings.state_dir)} (readable by you only); "
                  f"`sci-ingest server add-user NAME --read-only` adds an analyst")
        else:
            print(f"use it from other shells with: export MONGODB_URI='{state['uri']}'")
    elif args.action == "add-user":
        return _add_user(args, settings)
    elif args.action == "stop":
        outcome = stop_background(settings.state_dir)
        print({"stopped": "stopped",
               "dead": "the recorded server was no longer running (it died); its record is removed",
               "absent": "no server was running"}[outcome])
    else:
        status, state = server_state(settings.state_dir)
        if status == "unresponsive":
            print(f"unresponsive: pid {state['pid']} runs but does not answer at {state['uri']} "
                  f"(stopped with SIGSTOP? `kill -CONT {state['pid']}` resumes it)")
            return 1
        if status != "running":
            busy = holder(settings.db_dir)
            if busy is not None:  # e.g. the private server of a command running now
                print(f"not running as the shared server, but SecantusDB pid {busy['pid']} (port {busy['port']}) "
                      f"has its data directory open: the private server of another command")
                return 1
            print("not running" + (" (the recorded server died; `sci-ingest server stop` removes its record)"
                                   if status == "dead" else ""))
            return 3
        from ingest.store.mongo import connect, describe  # lazy: pymongo (0.3 s), only for a running server

        client = connect(with_credentials(state["uri"], load_credentials(settings.state_dir)))
        try:
            info = describe(client)
        finally:
            client.close()
        print(f"running: pid {state['pid']}, {state['uri']}, {info.label()}")
        print(_server_kind(state))
    return 0


def _server_kind(state: dict) -> str:
    """What kind of server the record names: per-home (its idle timeout), or kept until `server stop`."""
    keeper = (state.get("keeper") or {}).get("pid")
    if state.get("idle_s"):
        return (f"per-home server (kept by pid {keeper}): stops after {state['idle_s']:g} s without a client "
                "(SCI_INGEST_SERVER_IDLE), or at `sci-ingest server stop`")
    owner = f"kept by pid {keeper}, " if keeper else ""
    return f"long-lived server ({owner}started or adopted by `sci-ingest server start`): runs until `sci-ingest server stop`"


def _add_user(args, settings) -> int:
    if not args.name:
        raise ConfigError("add-user needs a user name: sci-ingest server add-user NAME --read-only")
    creds = load_credentials(settings.state_dir)
    state = running_server(settings.state_dir)
    if creds is None or state is None:
        raise ConfigError("users need a shared server with authentication: sci-ingest server start --auth")
    path = add_user(with_credentials(state["uri"], creds), settings.state_dir, args.name, settings.db_name,
                    read_only=args.read_only)
    role = "read" if args.read_only else "readWrite"
    print(f"user {args.name} ({role} on {settings.db_name}) created; its password is in {path} "
          f"(readable by you only): hand it over, then log in with "
          f"mongodb://{args.name}:PASSWORD@{state['uri'].split('://', 1)[1].split('/')[0]}/?authSource=admin")
    return 0
