"""The embedded server's memory settings (docs/embedded-server.md, "Memory"): the WiredTiger cache
(``SCI_INGEST_SERVER_CACHE``) and glibc's allocator settings reach the SecantusDB process, however it
is started (a command's private server, the per-home server of a keeper, ``sci-ingest server start``),
and a bad cache setting is one line that starts nothing.  What the process was given is read from
/proc (its command line and environment); no memory size or timing is asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.errors import ConfigError
from ingest.server.embedded import (
    CACHE_ENV,
    DEFAULT_CACHE,
    SERVER_MALLOC_ENV,
    EmbeddedServer,
    holder,
    server_cache_size,
)

BIN = Path(sys.executable).parent / "sci-ingest"


def _env(home: Path, idle: str, **extra: str) -> dict:
    env = {**os.environ, "SCI_INGEST_HOME": str(home), "MONGODB_URI": "", "SCI_INGEST_SERVER_IDLE": idle, **extra}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    for name in SERVER_MALLOC_ENV:
        if name not in extra:
            env.pop(name, None)
    return env


def _cli(home: Path, *args, idle: str = "600", **extra: str):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, env=_env(home, idle, **extra), timeout=120)


def _process(pid: int) -> tuple[list[str], dict[str, str]]:
    """The command line and the environment process ``pid`` was started with."""
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode().partition("=") for item in environ if item)
    return [part.decode() for part in cmdline if part], {name: value for name, _, value in pairs}


def _cache_of(cmdline: list[str]) -> str:
    return cmdline[cmdline.index("--cache-size") + 1]


@pytest.mark.parametrize(("given", "taken"), [(None, DEFAULT_CACHE), ("", DEFAULT_CACHE), ("256M", "256M"),
                                              ("1g", "1G"), (" 2048MB ", "2048M"), ("128m", "128M")])
def test_the_cache_size_read(monkeypatch, given, taken):
    if given is None:
        monkeypatch.delenv(CACHE_ENV, raising=False)
    else:
        monkeypatch.setenv(CACHE_ENV, given)
    assert server_cache_size() == taken


@pytest.mark.parametrize("given", ["lots", "512", "1.5G", "-1G", "0M", "127M", "1T", "512K"])
def test_a_bad_cache_size_is_one_line_naming_the_variable(monkeypatch, given):
    monkeypatch.setenv(CACHE_ENV, given)
    with pytest.raises(ConfigError) as caught:
        server_cache_size()
    message = str(caught.value)
    assert "\n" not in message and CACHE_ENV in message and repr(given) in message, message


@pytest.mark.parametrize(("given", "taken"), [("16M", "16M"), ("4g", "4G")])
def test_a_cache_size_the_code_gives_needs_only_be_a_size(tmp_path, monkeypatch, given, taken):
    """``sci-ingest bench cache`` gives its private servers deliberately small caches: the floor is the setting's."""
    monkeypatch.setenv(CACHE_ENV, "lots")  # not read when the code gives a size
    assert EmbeddedServer(tmp_path / "db", cache_size=given).cache_size == taken
    with pytest.raises(ConfigError) as caught:
        EmbeddedServer(tmp_path / "db", cache_size="lots")
    assert CACHE_ENV not in str(caught.value) and "'lots'" in str(caught.value)


def test_a_private_server_gets_the_cache_size_and_the_allocator_settings(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, "160M")
    for name in SERVER_MALLOC_ENV:
        monkeypatch.delenv(name, raising=False)
    with EmbeddedServer(tmp_path / "db") as server:
        cmdline, environ = _process(server.process.pid)
    assert _cache_of(cmdline) == "160M"
    assert {name: environ.get(name) for name in SERVER_MALLOC_ENV} == SERVER_MALLOC_ENV


def test_the_environment_s_own_allocator_settings_win(tmp_path, monkeypatch):
    """A user who sets one of glibc's variables for the server keeps it; the others stay at sci-ingest's."""
    monkeypatch.delenv(CACHE_ENV, raising=False)
    mine = {name: str(int(value) + 1) if value.isdigit() else value for name, value in SERVER_MALLOC_ENV.items()}
    first = next(iter(mine))
    monkeypatch.setenv(first, mine[first])
    with EmbeddedServer(tmp_path / "db") as server:
        cmdline, environ = _process(server.process.pid)
    assert _cache_of(cmdline) == DEFAULT_CACHE
    assert environ[first] == mine[first]
    assert {name: environ.get(name) for name in SERVER_MALLOC_ENV if name != first} == {
        name: value for name, value in SERVER_MALLOC_ENV.items() if name != first}


@pytest.mark.parametrize("how", ["server start", "per-home"])
def test_the_shared_servers_get_the_settings(tmp_path, how):
    home = tmp_path / "home"
    try:
        if how == "server start":
            done = _cli(home, "server", "start", **{CACHE_ENV: "192M"})
            assert done.returncode == 0, done.stderr
        else:  # a command starts the home's server under a keeper, which starts it with its own environment
            done = _cli(home, "timings", **{CACHE_ENV: "192M"})
            assert "starting the embedded SecantusDB server" in done.stderr, done.stderr
        record = json.loads((home / "server.json").read_text())
        assert ("keeper" in record) == (how == "per-home")
        cmdline, environ = _process(record["pid"])
        assert _cache_of(cmdline) == "192M"
        assert {name: environ.get(name) for name in SERVER_MALLOC_ENV} == SERVER_MALLOC_ENV
    finally:
        _cli(home, "server", "stop")


@pytest.mark.parametrize("how", ["server start", "per-home", "private"])
def test_a_bad_cache_size_starts_no_server(tmp_path, how):
    home = tmp_path / "home"
    args, idle = (["server", "start"], "600") if how == "server start" else (["timings"], "600" if how == "per-home" else "0")
    done = _cli(home, *args, idle=idle, **{CACHE_ENV: "lots"})
    try:
        assert done.returncode == 64, (done.stdout, done.stderr)  # a bad setting, before any work (issue 42)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and CACHE_ENV in lines[0] and "'lots'" in lines[0], done.stderr
        assert holder(home / "db") is None and not (home / "server.json").exists()
    finally:
        _cli(home, "server", "stop")
