"""``sci-ingest server start|stop|status|add-user``: the embedded SecantusDB server of a home, and
its users.  Each verb prints one JSON object with ``--json``."""

from __future__ import annotations

from ingest.config import NO_EMBEDDED_ENV, Settings
from ingest.errors import ConfigError, Exit
from ingest.report import dumps
from ingest.server.access import add_user, credentials_path, load_credentials, with_credentials
from ingest.server.embedded import holder, running_server, server_state, start_background, stop_background

__all__ = ["cmd_server"]


def cmd_server(args) -> int:
    settings = Settings.from_env(db_name=getattr(args, "db", None))
    verb = {"start": _start, "stop": _stop, "status": _status, "add-user": _add_user}[args.action]
    return verb(args, settings)


def _start(args, settings) -> int:
    if not settings.embedded:
        raise ConfigError(f"the embedded server is off here ({NO_EMBEDDED_ENV}=1): unset it to start one")
    state = start_background(settings.state_dir, port=args.port, auth=args.auth)
    credentials = credentials_path(settings.state_dir) if state.get("auth") else None
    if args.json:
        print(dumps({"status": "already running" if state["already_running"] else "started",
                     "pid": state["pid"], "uri": state["uri"], "data_dir": state["data_dir"],
                     "auth": bool(state.get("auth")), "credentials": str(credentials) if credentials else None,
                     "was_idle_s": state.get("was_idle_s")}))
        return Exit.OK
    verb = "already running" if state["already_running"] else "started"
    print(f"SecantusDB {verb}: pid {state['pid']}, {state['uri']}, data in {state['data_dir']}")
    if state.get("was_idle_s"):
        print(f"it was the per-home server of a command (stopping after {state['was_idle_s']:g} s idle); "
              "it now runs until `sci-ingest server stop`")
    if credentials:
        print(f"authentication on: commands of this home log in as the user in {credentials} (readable by you "
              f"only); `sci-ingest server add-user NAME --read-only` adds an analyst")
    else:
        print(f"use it from other shells with: export MONGODB_URI='{state['uri']}'")
    return Exit.OK


def _stop(args, settings) -> int:
    outcome = stop_background(settings.state_dir)
    if args.json:
        print(dumps({"status": outcome}))
    else:
        print({"stopped": "stopped",
               "dead": "the recorded server was no longer running (it died); its record is removed",
               "absent": "no server was running"}[outcome])
    return Exit.OK


def _status(args, settings) -> int:
    """0 running (and what kind), 1 unresponsive, broken or another command's private server, 3 none."""
    status, state = server_state(settings.state_dir)
    if state is None or status == "dead":  # absent, or a record of a server that died
        busy = holder(settings.db_dir)
        if busy is not None:  # e.g. the private server of a command running now
            text = (f"not running as the shared server, but SecantusDB pid {busy['pid']} (port {busy['port']}) "
                    f"has its data directory open: the private server of another command")
            return _say(args, text, Exit.FATAL, status="private", pid=busy["pid"], port=busy["port"])
        text = "not running" + (" (the recorded server died; `sci-ingest server stop` removes its record)"
                                if status == "dead" else "")
        return _say(args, text, Exit.NOT_RUNNING, status="not running", died=status == "dead")
    if status == "unresponsive":
        text = (f"unresponsive: pid {state['pid']} runs but does not answer at {state['uri']} "
                f"(stopped with SIGSTOP? `kill -CONT {state['pid']}` resumes it)")
        return _say(args, text, Exit.FATAL, status="unresponsive", pid=state["pid"], uri=state["uri"])
    if status == "broken":  # its next command restarts it (ingest.server.embedded.running_server)
        text = (f"broken: pid {state['pid']} answers at {state['uri']} but {state['fault']!r} to every read of "
                "its storage (WiredTiger stopped, as when its disk was full); the next command restarts it")
        return _say(args, text, Exit.FATAL, status="broken", pid=state["pid"], uri=state["uri"], fault=state["fault"])
    from ingest.store.differences import probe  # noqa: PLC0415 - lazy: pymongo (0.3 s), only for a running server
    from ingest.store.mongo import connect  # noqa: PLC0415 - lazy: pymongo (0.3 s), only for a running server
    from ingest.store.servers import describe  # noqa: PLC0415 - lazy: pymongo (0.3 s), only for a running server

    client = connect(with_credentials(state["uri"], load_credentials(settings.state_dir)))
    try:
        info = describe(client)
        found = probe(client[settings.db_name], home=settings.state_dir)
    finally:
        client.close()
    text = "\n".join([f"running: pid {state['pid']}, {state['uri']}, {info.label()}", _server_kind(state),
                      *_differences(found)])
    keeper = (state.get("keeper") or {}).get("pid")
    return _say(args, text, Exit.OK, status="running", pid=state["pid"], uri=state["uri"], server=info.label(),
                kind="per-home" if state.get("idle_s") else "long-lived", idle_s=state.get("idle_s"), keeper=keeper,
                differences=found.as_dict())


def _differences(found) -> list[str]:
    """Where the server answers differently from MongoDB: one line each, with the form that works on both."""
    if not found.probed:
        return [f"differences from MongoDB: not probed ({found.error})"]
    when = f"probed {found.at}" + (f" in {found.seconds:.3f} s" if found.seconds is not None else "")
    if not found.found:
        return [f"differences from MongoDB: none found ({len(found.checked)} forms asked, {when})"]
    return [f"differences from MongoDB: {len(found.found)} of the {len(found.checked)} forms asked ({when}; "
            "docs/embedded-server.md, 'Wrong answers, avoided'), each with the form that works on both:",
            *(f"  - {f.line()}" for f in found.found)]


def _say(args, text: str, code: Exit, **fields) -> int:
    print(dumps(fields) if args.json else text)
    return code


def _server_kind(state: dict) -> str:
    """What kind of server the record names: per-home (its idle timeout), or kept until `server stop`."""
    keeper = (state.get("keeper") or {}).get("pid")
    if state.get("idle_s"):
        return (f"per-home server (kept by pid {keeper}): stops after {state['idle_s']:g} s without a client "
                "(SCI_INGEST_SERVER_IDLE), or at `sci-ingest server stop`")
    owner = f"kept by pid {keeper}, " if keeper else ""
    return f"long-lived server ({owner}started or adopted by `sci-ingest server start`): runs until `sci-ingest server stop`"


def _add_user(args, settings) -> int:
    creds = load_credentials(settings.state_dir)
    state = running_server(settings.state_dir)
    if creds is None or state is None:
        raise ConfigError("users need a shared server with authentication: sci-ingest server start --auth")
    path = add_user(with_credentials(state["uri"], creds), settings.state_dir, args.name, settings.db_name,
                    read_only=args.read_only)
    role = "read" if args.read_only else "readWrite"
    host = state["uri"].split("://", 1)[1].split("/")[0]
    if args.json:
        print(dumps({"user": args.name, "role": role, "database": settings.db_name, "password_file": str(path),
                     "uri": f"mongodb://{args.name}:PASSWORD@{host}/?authSource=admin"}))
        return Exit.OK
    print(f"user {args.name} ({role} on {settings.db_name}) created; its password is in {path} "
          f"(readable by you only): hand it over, then log in with "
          f"mongodb://{args.name}:PASSWORD@{host}/?authSource=admin")
    return Exit.OK
