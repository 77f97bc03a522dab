"""Hosts on one machine: Linux network namespaces joined by veth pairs on one bridge.

Used by ``tests/test_hosts.py`` (``make test-hosts``, as root).  Every host is a network namespace
with its own loopback and one interface, ``eth0``, with its own address on 10.213.0.0/24; the other
end of each host's cable is plugged into a bridge that lives in a namespace of its own (the switch),
so nothing is added to the machine's own network and no packet leaves these namespaces.  The
process that builds them is a host too (``here``): it runs in a private namespace of its own
(``make test-hosts`` starts pytest under ``unshare --net``), and is cabled like the others.

Faults are done to the cables and hosts, as they happen:

* :meth:`Hosts.unplug` / :meth:`Hosts.plug`: the switch's end of a host's cable goes down (the
  host's interface loses its carrier; packets are lost, nothing is refused);
* :meth:`Hosts.shape`: delay and loss on a host's interface with ``tc netem``; a kernel without
  ``sch_netem`` gets a token bucket (``tbf``) that queues (delays) and drops what overflows, and
  :attr:`Hosts.shaping` says which one was used;
* :meth:`Hosts.kill`: SIGKILL to every process of a host (``ip netns pids``).

Every process is started through :meth:`Hosts.start` (``ip netns exec``) and every one is killed
when the context ends, also on failure; the namespaces are deleted then.  Namespaces of an
earlier run whose process is gone are deleted when the next one starts.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

SUBNET = "10.213.0"
PREFIX = "sih"  # every namespace of these runs: sih<pid>-<host>


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def tc(namespace: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", namespace, "tc", *args], capture_output=True, text=True)


def can_build() -> str | None:
    """Why hosts cannot be built here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"`{tool}` (iproute2) is not installed"
    links = [line.split(":")[1].strip().split("@")[0] for line in ip("-o", "link", "show").stdout.splitlines()]
    if [name for name in links if name != "lo"]:
        return (f"this process's network namespace has interfaces ({', '.join(n for n in links if n != 'lo')}): "
                "run it through `make test-hosts` (pytest under `unshare --net`), which keeps every cable "
                "off the machine's own network")
    return None


def namespaces() -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").stdout.splitlines() if line.strip()]


def sweep_stale() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone (and kill what runs in them)."""
    gone = []
    for name in namespaces():
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX):].partition("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            _kill_all(name)
            ip("netns", "del", name, check=False)
            gone.append(name)
    return gone


def pids(namespace: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _kill_all(namespace: str) -> None:
    for _ in range(20):
        found = pids(namespace)
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


class Hosts:
    """``with Hosts(["db", "scheduler", "w1", "w2"], here="client", folder=...) as hosts:`` the hosts,
    cabled to one switch; ``hosts.addr[name]`` is a host's address."""

    def __init__(self, names: list[str], *, here: str, folder: Path):
        self.tag = f"{PREFIX}{os.getpid()}"
        self.names = list(names)
        self.here = here
        self.folder = Path(folder)
        self.switch = f"{self.tag}-sw"
        self.ns = {name: f"{self.tag}-{name}" for name in self.names}
        everyone = [here, *self.names]
        self.addr = {name: f"{SUBNET}.{i + 1}" for i, name in enumerate(everyone)}
        self.port = {name: f"{self.tag[-6:]}p{i}" for i, name in enumerate(everyone)}  # the switch's ends
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.shaping: str | None = None
        self.seen: set[int] = set()  # every process found in a host's namespace when it was closed

    # ------------------------------------------------------------------ building and tearing down
    def __enter__(self) -> Hosts:
        sweep_stale()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _build(self) -> None:
        ip("netns", "add", self.switch)
        ip("-n", self.switch, "link", "set", "lo", "up")
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        ip("link", "set", "lo", "up")  # this host's own loopback
        for name in [self.here, *self.names]:
            if name != self.here:
                ip("netns", "add", self.ns[name])
                ip("-n", self.ns[name], "link", "set", "lo", "up")
            end = f"{self.tag[-6:]}h{self.names.index(name) + 1 if name in self.names else 0}"
            ip("link", "add", end, "type", "veth", "peer", "name", self.port[name])
            ip("link", "set", self.port[name], "netns", self.switch)
            ip("-n", self.switch, "link", "set", self.port[name], "master", "br0")
            ip("-n", self.switch, "link", "set", self.port[name], "up")
            where = [] if name == self.here else ["-n", self.ns[name]]
            if name != self.here:
                ip("link", "set", end, "netns", self.ns[name])
            ip(*where, "link", "set", end, "name", "eth0")
            ip(*where, "addr", "add", f"{self.addr[name]}/24", "dev", "eth0")
            ip(*where, "link", "set", "eth0", "up")

    def close(self) -> None:
        """Kill every process of every host, then delete the namespaces (and this host's cable)."""
        for _name, proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for name in self.names:
            if self.ns[name] in namespaces():
                self.seen.update(pids(self.ns[name]))
                _kill_all(self.ns[name])
        self.seen.update(proc.pid for _name, proc in self.procs)
        for _name, proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        for name in self.names:
            ip("netns", "del", self.ns[name], check=False)
        ip("netns", "del", self.switch, check=False)
        ip("link", "del", "eth0", check=False)  # this host's end (its peer went with the switch)

    def survivors(self) -> list[int]:
        """The processes seen in the hosts (and started here) that still run (none once closed)."""
        alive = []
        for pid in sorted(self.seen):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if state != "Z":  # a zombie has ended; only its parent's wait is missing
                alive.append(pid)
        return alive

    def left_running(self) -> dict[str, list[int]]:
        """The processes still in the hosts' namespaces (none once closed)."""
        alive = set(namespaces())
        return {name: pids(self.ns[name]) for name in self.names if self.ns[name] in alive and pids(self.ns[name])}

    # ------------------------------------------------------------------ processes
    def start(self, host: str, argv: list[str], *, env: dict | None = None, log: str | None = None) -> subprocess.Popen:
        """Start ``argv`` on ``host`` (its own session; output to ``folder/<log or host>.log``)."""
        out = open(self.folder / f"{log or host}.log", "ab")  # noqa: SIM115 - the child holds it
        command = argv if host == self.here else ["ip", "netns", "exec", self.ns[host], *argv]
        try:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        finally:
            out.close()
        self.procs.append((host, proc))
        return proc

    def run(self, host: str, argv: list[str], *, env: dict | None = None, timeout: float = 600,
            ) -> subprocess.CompletedProcess:
        command = argv if host == self.here else ["ip", "netns", "exec", self.ns[host], *argv]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)

    def wait_for_port(self, host: str, port: int, timeout: float = 60) -> None:
        """Until ``host``'s address accepts TCP connections on ``port`` (tried from here)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((self.addr[host], port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{host} ({self.addr[host]}:{port}) did not listen in {timeout:.0f} s") from None
                time.sleep(0.1)

    # ------------------------------------------------------------------ faults
    def unplug(self, host: str) -> None:
        ip("-n", self.switch, "link", "set", self.port[host], "down")

    def plug(self, host: str) -> None:
        ip("-n", self.switch, "link", "set", self.port[host], "up")

    def kill(self, host: str) -> list[int]:
        """SIGKILL every process of ``host`` (a host that vanishes); the pids killed."""
        found = pids(self.ns[host])
        _kill_all(self.ns[host])
        return found

    def shape(self, host: str, delay_ms: int = 40, loss_pct: float = 2.0) -> str:
        """Delay and lose packets leaving ``host`` (netem; else a token bucket); what was used."""
        ns = self.ns[host]
        netem = tc(ns, "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", f"{delay_ms}ms",
                   f"{delay_ms // 4}ms", "loss", f"{loss_pct}%")
        if netem.returncode == 0:
            self.shaping = f"netem delay {delay_ms} ms, loss {loss_pct} %"
            return self.shaping
        # no sch_netem in this kernel: a slow link whose queue holds at most `delay_ms` of data,
        # dropping what overflows (real queueing delay and real loss, not a random one)
        tbf = tc(ns, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "4mbit", "burst", "16kb",
                 "latency", f"{delay_ms}ms")
        if tbf.returncode != 0:
            raise RuntimeError(f"cannot shape {host}'s link: netem: {netem.stderr.strip()}; tbf: {tbf.stderr.strip()}")
        self.shaping = (f"tbf 4 Mbit/s, queue {delay_ms} ms, overflow dropped "
                        f"(no netem here: {netem.stderr.strip()})")
        return self.shaping

    def unshape(self, host: str) -> None:
        tc(self.ns[host], "qdisc", "del", "dev", "eth0", "root")
