"""The ``sci-ingest`` command line.

Start-up stays light: heavy packages (Dask, pandas, Great Expectations,
Airflow) are imported only by the subcommands that need them, so
``sci-ingest parse`` costs no more than the parser.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading

from ingest.errors import SciIngestError
from ingest.fileio import printable, stderr_line

EPILOG_MAIN = """\
examples:
  sci-ingest run                         load the bundled samples, analyze, validate, print timings
  sci-ingest run --json                  the same, one JSON object on stdout
  sci-ingest load results/*.m10.gz materials.jsonl
  sci-ingest parse query1.m10 > query1.jsonl
  sci-ingest timings --last
  sci-ingest server start                keep an embedded server running (for Airflow)
  MONGODB_URI=mongodb://mongos:27017/ sci-ingest run     use a real MongoDB / sharded cluster

exit codes: 0 success, 2 some inputs failed but the rest went in, 1 fatal error, 130 interrupted
"""

#: The exit codes of the commands that load, analyze or validate (shown in their --help).
EXIT_CODES_RUN = """
exit codes:
  0    done
  1    fatal: the database, the configuration or a critical expectation failed (one line on stderr)
  2    some inputs failed (each named on stderr as path:line: reason); everything else was done
  130  interrupted (Ctrl-C); the same command resumes
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sci-ingest")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (importlib.metadata
    costs ~50 ms of start-up, a tenth of `sci-ingest parse` on a 40 MB file)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _settings(args):
    from ingest.config import Settings

    return Settings.from_env(mongo_uri=args.mongo_uri, db_name=args.db,
                             dask_scheduler=getattr(args, "scheduler", None),
                             progress=not args.quiet and not getattr(args, "json", False))


def _print_report(report, as_json: bool) -> int:
    from ingest.report import dumps, render_run

    if as_json:
        print(dumps(report.as_json()))
    else:
        print(render_run(report))
    if report.error:  # one line on stderr, whatever the format of stdout
        stderr_line(f"error: {report.error}")
    return report.exit_code


def _load_options(args, settings):
    """The load's options from the command line (None for commands that do not load)."""
    if not hasattr(args, "workers"):
        return None
    from ingest.config import default_workers
    from ingest.load import LoadOptions
    from ingest.config import parse_write_concern

    if args.workers is not None and args.workers < 1:
        from ingest.errors import ConfigError

        raise ConfigError(f"--workers must be at least 1, not {args.workers}")
    return LoadOptions(
        workers=args.workers or default_workers(), force=args.force, dry_run=args.dry_run,
        write_concern=parse_write_concern(args.write_concern) if args.write_concern else None,
        retry_s=args.retry_for, keep_indexes=args.keep_indexes, progress=settings.progress,
        include_hidden=getattr(args, "include_hidden", False))


def cmd_run(args, steps=("load", "analyze", "validate"), analyses=None) -> int:
    from ingest.pipeline import run

    settings = _settings(args)
    report = run(settings, getattr(args, "paths", None) or None, steps=steps, analyses=analyses,
                 load_options=_load_options(args, settings), incremental=getattr(args, "changed", False),
                 log=stderr_line)
    return _print_report(report, args.json)


def cmd_load(args) -> int:
    return cmd_run(args, steps=("load",))


def cmd_analyze(args) -> int:
    from analytics.registry import UnknownAnalysis, all_analyses, select_analyses

    if args.list:
        return _list_analyses(all_analyses(), args.json)
    try:
        select_analyses(args.names)  # before any server or cluster starts
    except UnknownAnalysis as exc:
        stderr_line(f"error: {exc}")
        return 2
    return cmd_run(args, steps=("analyze",), analyses=args.names or None)


def _list_analyses(analyses, as_json: bool) -> int:
    from ingest.report import dumps, table

    rows = [a.describe() for a in analyses]
    if as_json:
        print(dumps({"analyses": rows}))
    else:
        print(table(rows, [("name", "analysis"), ("source", "source"), ("output", "output collection"),
                           ("parquet", "parquet file"), ("description", "what it computes")], left=5))
    return 0


def cmd_validate(args) -> int:
    return cmd_run(args, steps=("validate",))


def cmd_timings(args) -> int:
    from ingest.store.catalog import TIMINGS
    from ingest.store.connection import database
    from ingest.store.mongo import db_errors
    from ingest.report import dumps, table, timing_table, worker_table
    from ingest.timing import level_filter

    with database(_settings(args)) as conn, db_errors("reading the timings"):
        coll = conn.db[TIMINGS]
        if args.list:
            runs = run_rows(coll)
            if args.json:
                print(dumps({"runs": runs}))
            else:
                print(table(runs, [("run_id", "run"), ("started", "started (UTC)"), ("stages", "stages"),
                                   ("records_out", "records out"), ("status", "status")], left=2)
                      if runs else "no runs recorded yet")
            return 0 if runs else 1
        run_id, why = _chosen_run(coll, args)
        if run_id is None:
            stderr_line(f"error: {why}")
            return 1
        level = "worker" if args.workers else "file" if args.files else "run"
        query = {"run_id": run_id, **level_filter(level)}
        if args.workers:
            query["stage"] = "load"
        rows = list(coll.find(query, {"_id": 0}).sort("started", 1))
        if args.workers and not rows:  # a run recorded before worker rows: summed from its file rows
            rows = worker_rows(list(coll.find({"run_id": run_id, "stage": "load", **level_filter("file")},
                                              {"_id": 0})))
    if args.workers:
        rows = [{**r, "files": r.get("files", (r.get("detail") or {}).get("files"))} for r in rows]
    if args.json:
        print(dumps({"run_id": run_id, "workers" if args.workers else "stages": rows}))
    else:
        print(f"run {run_id} ({why}; `sci-ingest timings --list` lists the others)")
        print(worker_table(rows) if args.workers else timing_table(rows, with_file=args.files))
    return 0


def _chosen_run(coll, args) -> tuple[str | None, str]:
    """(the run to show, why that one) or (None, the error)."""
    if args.run:
        if coll.find_one({"run_id": args.run}, {"_id": 1}) is None:
            return None, f"no run {args.run!r} is recorded; `sci-ingest timings --list` lists the runs"
        return args.run, "asked for"
    if args.last:
        last = coll.find_one({}, {"run_id": 1}, sort=[("started", -1)])
        return (last["run_id"], "the most recent run") if last else (None, "no runs recorded yet")
    worked = coll.find_one({"file": {"$exists": False}, "worker": {"$exists": False}, "stage": {"$ne": "cluster"},
                            "$or": [{"records_in": {"$gt": 0}}, {"records_out": {"$gt": 0}}]},
                           {"run_id": 1}, sort=[("started", -1)])
    if worked:
        return worked["run_id"], "the most recent run that did work"
    last = coll.find_one({}, {"run_id": 1}, sort=[("started", -1)])
    return (last["run_id"], "the most recent run; none did any work") if last else (None, "no runs recorded yet")


def run_rows(coll, limit: int = 50) -> list[dict]:
    """One row per recorded run, newest first: when it started, its stages, what it wrote, its status."""
    from ingest.report import iso_utc

    pipeline = [
        {"$match": {"file": {"$exists": False}, "worker": {"$exists": False}}},
        {"$group": {"_id": "$run_id", "started": {"$min": "$started"}, "stages": {"$push": "$stage"},
                    "records_out": {"$sum": {"$ifNull": ["$records_out", 0]}},
                    "statuses": {"$addToSet": "$status"}}},
        {"$sort": {"started": -1}},
        {"$limit": limit},
    ]
    rows = []
    for r in coll.aggregate(pipeline):
        statuses = [s for s in r["statuses"] if s]
        started = r["started"]
        rows.append({"run_id": r["_id"], "started": iso_utc(started) if started else None,
                     "stages": len(r["stages"]), "records_out": r["records_out"],
                     "status": "ok" if set(statuses) <= {"ok"} else ",".join(sorted(set(statuses) - {"ok"}))})
    return rows


def worker_rows(file_rows: list[dict]) -> list[dict]:
    """The load's per-file rows summed per worker: files, documents, bytes, seconds, rates."""
    by_worker: dict[str, dict] = {}
    for row in file_rows:
        w = by_worker.setdefault(row.get("worker") or "-", {"worker": row.get("worker") or "-", "files": 0,
                                                            "records_in": 0, "records_out": 0, "bytes": 0,
                                                            "seconds": 0.0})
        w["files"] += 1
        for key in ("records_in", "records_out", "bytes", "seconds"):
            w[key] += row.get(key) or 0
    for w in by_worker.values():
        w["records_per_s"] = round(w["records_out"] / w["seconds"], 1) if w["seconds"] else None
        w["mb_per_s"] = round(w["bytes"] / 1e6 / w["seconds"], 2) if w["seconds"] else None
        w["seconds"] = round(w["seconds"], 3)
    return sorted(by_worker.values(), key=lambda w: w["worker"])


def cmd_server(args) -> int:
    from ingest.server.access import credentials_path, load_credentials, with_credentials
    from ingest.config import Settings
    from ingest.server.embedded import holder, server_state, start_background, stop_background

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
        from ingest.store.mongo import connect, describe

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
    from ingest.server.access import add_user, load_credentials, with_credentials
    from ingest.errors import ConfigError
    from ingest.server.embedded import running_server

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


def _ejson_nonfinite(obj):
    """``obj`` with every non-finite float as MongoDB Extended JSON (``{"$numberDouble":
    "Infinity"}``, ``"-Infinity"``, ``"NaN"``: JSON has no such numbers); ``obj`` itself when
    it holds none."""
    if isinstance(obj, float):
        if obj != obj:
            return {"$numberDouble": "NaN"}
        if obj in (math.inf, -math.inf):
            return {"$numberDouble": "Infinity" if obj > 0 else "-Infinity"}
        return obj
    if isinstance(obj, dict):
        out = {k: _ejson_nonfinite(v) for k, v in obj.items()}
        return obj if all(out[k] is v for k, v in obj.items()) else out
    if isinstance(obj, list):
        items = [_ejson_nonfinite(v) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else items
    return obj


def cmd_parse(args) -> int:
    from ingest import parsers
    from ingest.errors import ParseError
    from ingest.fileio import open_binary

    import orjson  # ~10x faster than json.dumps here: the encoding was a third of the command's time

    parse = parsers.get("pasta").load()
    failed = 0
    out = sys.stdout.buffer

    def dumps(obj) -> bytes:  # one JSON line
        try:
            data = orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # e.g. an integer beyond 64 bits: the standard encoder takes anything JSON can hold
            obj = _ejson_nonfinite(obj)
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode() + b"\n"
        if b"null" in data:  # orjson writes inf and nan as null (a wrong value): walk the rare line with a null
            fixed = _ejson_nonfinite(obj)
            if fixed is not obj:
                data = orjson.dumps(fixed, option=orjson.OPT_APPEND_NEWLINE)
        return data

    def warn(message: str) -> None:
        stderr_line(f"warning: {message}")

    names, refused, skipped = _parse_inputs(args.files, args.include_hidden)
    for named in refused:
        failed += 1
        stderr_line(f"error: {named.shown}: {named.reason}")
    for named in skipped:  # hidden: named, not parsed (not a failure)
        stderr_line(f"skipped: {named.shown}: {named.reason}")
    for name in names:
        try:
            with open_binary(name) as handle:
                for query in parse(handle, name, sequences=not args.no_sequences, warn=warn):
                    out.write(dumps(query))  # already a dict: Query.to_dict()
        except BrokenPipeError:
            raise  # the reader went away (`| head`): stop quietly, see main()
        except ParseError as exc:
            failed += 1
            hint = "" if exc.line != 1 else f" (`parse` reads -m 10 output only; `sci-ingest load` reads {FORMATS})"
            stderr_line(f"error: {exc}{hint}")
        except OSError as exc:
            failed += 1
            stderr_line(f"error: {printable(name)}: {exc.strerror or exc}")
    out.flush()
    return 2 if failed else 0


#: What `load` reads, for messages.
FORMATS = "FASTA-suite -m 10 (.m10) and Materials-Project JSON (.json, .jsonl; .gz too)"


def _parse_inputs(paths: list[str], include_hidden: bool = False):
    """The -m 10 files to parse: files as given, and the .m10[.gz] (...) files under directories;
    (names, refused, skipped), see :func:`ingest.load.inputs.find_inputs`."""
    from ingest import parsers
    from ingest.load.inputs import find_inputs

    plain = parsers.get("pasta").suffixes
    files, refused, skipped = find_inputs(paths, plain + tuple(sfx + ".gz" for sfx in plain),
                                          include_hidden=include_hidden)
    return [str(f) for f in files], refused, skipped


#: --include-hidden: its help (load, run, parse).
HIDDEN_HELP = ("also read hidden files and walk hidden directories (names starting with '.') found in a "
               "directory; without it each hidden data file, and each hidden directory holding data files, "
               "is named on stderr as skipped")


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="reload files even if the ledger has them")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes loading files (default: the machine's cores; 1: in this process)")
    p.add_argument("--scheduler", help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS or a LocalCluster)")
    p.add_argument("--write-concern", metavar="SPEC",
                   help="w=1|majority|N, j=true|false, wtimeout=MS, comma-separated (default: the URI's, "
                        "else the server's); w=0 is refused")
    p.add_argument("--retry-for", type=float, default=60.0, metavar="SECONDS",
                   help="retry each operation through network errors, restarts and elections for this "
                        "long (default 60; 0: no retries)")
    p.add_argument("--keep-indexes", action="store_true",
                   help="keep the query indexes up during a bulk load instead of building them after it")
    p.add_argument("--dry-run", action="store_true", help="read, parse and build every document, write nothing")
    p.add_argument("--include-hidden", action="store_true", help=HIDDEN_HELP)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--mongo-uri", help="MongoDB URI (default: $MONGODB_URI, else the embedded SecantusDB)")
    common.add_argument("--db", help="database name (default: $SCI_INGEST_DB or sci_ingest)")
    common.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    parser = argparse.ArgumentParser(
        prog="sci-ingest",
        description="Ingest FASTA-suite -m 10 searches and Materials-Project records into MongoDB, "
                    "analyze them with Dask, validate them with Great Expectations, and time every stage.",
        epilog=EPILOG_MAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name, func, help_, epilog, parents=(common,), exit_codes=EXIT_CODES_RUN):
        p = sub.add_parser(name, help=help_, description=help_, epilog=epilog + exit_codes, parents=list(parents),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        return p

    p = add("run", cmd_run, "the main job: load, analyze, validate, report timings",
            "examples:\n  sci-ingest run\n  sci-ingest run data/searches/ data/materials.jsonl.gz --json\n"
            "  sci-ingest run --workers 8 --write-concern w=majority,j=true /data/ssearch/\n")
    p.add_argument("paths", nargs="*", help="files or directories (default: the bundled samples)")
    add_load_options(p)

    p = add("load", cmd_load, "load files into MongoDB (formats detected per file), in parallel",
            "examples:\n  sci-ingest load results/           every .m10[.gz] / .json[l][.gz] below\n"
            "  sci-ingest load a.m10 b.m10.gz materials.jsonl --force\n"
            "  sci-ingest load --workers 16 --scheduler tcp://sched:8786 /data/ssearch/   a backfill on a cluster\n"
            "  sci-ingest load --dry-run --workers 2 results/    everything but the writes\n"
            "\nInterrupted (Ctrl-C, a crash, a server restart)? Run the same command again: finished files\n"
            "are skipped, half-written ones are rolled back and loaded again, nothing is doubled.\n"
            "\nHidden files and directories (names starting with '.') found in a directory are not loaded:\n"
            "each one holding data is named on stderr as `skipped: PATH: reason`; --include-hidden loads them.\n")
    p.add_argument("paths", nargs="+", help="files or directories")
    add_load_options(p)

    p = add("analyze", cmd_analyze, "run the analyses on what is loaded (Dask, reading MongoDB in partitions)",
            "examples:\n  sci-ingest analyze                     every analysis\n"
            "  sci-ingest analyze best_hits\n  sci-ingest analyze --list\n"
            "  sci-ingest analyze --changed         only what the files loaded since the last analysis changed\n"
            "  DASK_SCHEDULER_ADDRESS=tcp://sched:8786 sci-ingest analyze --json\n"
            "\nan unknown analysis name exits 2 and lists the known ones\n")
    p.add_argument("names", nargs="*", metavar="NAME", help="analyses to run (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the analyses with their source and output, run nothing")
    p.add_argument("--changed", action="store_true",
                   help="only the groups of the files loaded since each analysis last ran, where the analysis "
                        "allows it (else its whole source); each says which")
    p.add_argument("--scheduler", help="Dask scheduler address (default: $DASK_SCHEDULER_ADDRESS or a LocalCluster)")

    add("validate", cmd_validate, "run the Great Expectations suites in schemas/expectations",
        "examples:\n  sci-ingest validate\n  sci-ingest validate --json\n")

    p = add("timings", cmd_timings, "show the stage timings of a run (default: the last run that did work)",
            "examples:\n  sci-ingest timings\n  sci-ingest timings --list\n"
            "  sci-ingest timings --run run-20261121T200000Z-1a2b3c --files\n",
            exit_codes="\nexit codes:\n  0  shown\n  1  no run recorded, an unknown run id, or the database failed\n")
    p.add_argument("--run", help="run id (default: the most recent run that loaded, analyzed or validated)")
    p.add_argument("--last", action="store_true", help="the most recent run, even one that did nothing")
    p.add_argument("--list", action="store_true", help="list the recorded runs, newest first")
    p.add_argument("--files", action="store_true", help="one row per file and stage")
    p.add_argument("--workers", action="store_true", help="the load's files, documents and time per worker")

    p = add("server", cmd_server, "start, stop or report the embedded SecantusDB server",
            "examples:\n  sci-ingest server start\n  sci-ingest server start --auth\n"
            "  sci-ingest server add-user alice --read-only\n  sci-ingest server status\n  sci-ingest server stop\n"
            "\na command without a URI starts the home's server if none runs and leaves it running for the\n"
            "next commands until $SCI_INGEST_SERVER_IDLE seconds (default 600) pass without a client\n"
            "(0: a private server per command); `server start` keeps it running until `server stop`,\n"
            "which stops either\n",
            parents=(), exit_codes="\nexit codes:\n  0  done (status: the shared server runs and answers)\n"
            "  1  error (status: a server process holds the data but does not answer, or is another\n"
            "     command's private server)\n  3  status: no server runs\n")
    p.add_argument("action", choices=["start", "stop", "status", "add-user"])
    p.add_argument("name", nargs="?", help="add-user: the new user's name")
    p.add_argument("--port", type=int, help="port for start (default: a free one)")
    p.add_argument("--auth", action="store_true",
                   help="start: require SCRAM authentication from now on (creates an administrator whose "
                        "password is kept in <home>/credentials.json, 0600)")
    p.add_argument("--read-only", action="store_true", help="add-user: the user may read, not write")
    p.add_argument("--db", help="add-user: the database the user gets (default: $SCI_INGEST_DB or sci_ingest)")

    p = add("parse", cmd_parse, "parse FASTA-suite -m 10 files to JSON Lines on stdout (no database)",
            "examples:\n  sci-ingest parse run1.m10 run2.m10.gz > queries.jsonl\n"
            "  sci-ingest parse --no-sequences big.m10 | head -1\n  sci-ingest parse results/ > all.jsonl\n",
            parents=(), exit_codes="\nexit codes:\n  0  every file parsed\n"
            "  2  some files failed (each named on stderr as path:line: reason); the others were parsed\n"
            "  1  fatal error\n")
    p.add_argument("files", nargs="+", help="-m 10 files (.gz too) or directories holding them")
    p.add_argument("--no-sequences", action="store_true", help="leave out aligned sequences (faster)")
    p.add_argument("--include-hidden", action="store_true", help=HIDDEN_HELP)

    p = add("airflow", cmd_airflow, "run Airflow 3 locally on the project's DAGs (UI on 127.0.0.1), until Ctrl-C",
            "examples:\n  sci-ingest airflow                 UI at http://127.0.0.1:8080/ (user admin)\n"
            "  sci-ingest airflow --port 8795 --mongo-uri mongodb://db:27017/\n"
            "\nAIRFLOW_HOME is <home>/airflow; without a URI the embedded server is started once and given to\n"
            "the tasks as the mongo_default connection.\n")
    p.add_argument("--port", type=int, default=8080, help="the UI's and API's port on 127.0.0.1 (default 8080)")

    from analytics.bench.cli import register as register_bench
    from ingest.cli.query import register as register_query
    from analytics.report.cli import register as register_report
    from ingest.cli.shard import register

    register(add, common)
    register_bench(add, common)
    register_query(add, common)
    register_report(add, common)
    return parser


def cmd_airflow(args) -> int:
    from ingest.airflow.local import run_local

    return run_local(_settings(args), port=args.port, log=lambda m: print(m, file=sys.stderr, flush=True))


def _stop_like_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM (Airflow, timeout, systemd): roll back, stop the server, say how to resume


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    try:
        return args.func(args)
    except SciIngestError as exc:
        stderr_line(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def run() -> None:
    """The ``sci-ingest`` console script: :func:`main`, then leave without the interpreter's teardown.

    By then the command has closed all it opened (its private server stopped, its Dask
    cluster closed, its outputs written and closed); the teardown would only add
    pymongo's exit hook, which waits up to half a second for each client's monitor
    threads to finish a sleep.  Output is flushed first.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
