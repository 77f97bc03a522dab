"""Run history and the report tell the truth (issue 41, item 6).

Through the console script, as users run it, against the session's server:

* every run row has real start and end times (after the test began: never 1970-01-01, never a
  span of the whole Unix time) and the status of the code its command exited with, for a file that
  does not exist, a FIFO named ``x.m10`` (refused without being opened: the command ends within its
  subprocess timeout instead of blocking on the FIFO), unacknowledged writes (``w=0``, refused:
  exit 1) and an ``analyze`` interrupted by Ctrl-C (exit 130);
* the report of a run of the bundled materials samples, after a validate-only run: the default run
  is the last full run, the page says "synthetic samples", every plot has both axis labels (the
  figures themselves, walked, and the images' alt text), the ``hull_energy`` histogram of
  absolute differences is annotated with the median of what it plots and its unit, throughput is
  the load's own, and each suite's status is shown as the validation gave it.

Every wait polls the server or the process for the event; nothing asserts a duration.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from analytics.report.html import collect, figures
from ingest.config import SYNTHETIC_SAMPLES, Settings
from ingest.errors import RUN_STATUS, Exit
from ingest.server.connection import database

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
MATERIALS = REPO / "samples" / "materials" / "materials.jsonl.gz"
PASTA = REPO / "samples" / "pasta" / "fasta36_prot.m10"
#: Longest a command may take here; a load blocked on a FIFO would pass it and fail the test.
TIMEOUT_S = 300


def _cli(env: dict, *args, timeout: float = TIMEOUT_S, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=timeout, **popen)  # fmt: skip


def _env(mongo_uri: str, db: str, home: Path) -> dict:
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_DB": db, "SCI_INGEST_HOME": str(home)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _when(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _runs(env: dict) -> dict[str, dict]:
    proc = _cli(env, "timings", "--list", "--json")
    assert proc.returncode == 0, proc.stderr
    return {r["run_id"]: r for r in json.loads(proc.stdout)["runs"]}


def assert_rows_are_real(env: dict, run_id: str, began: dt.datetime) -> list[dict]:
    """Every run row of ``run_id``: started and ended between the test's start and now, seconds
    their difference; the rows as ``timings --json`` gives them."""
    proc = _cli(env, "timings", "--run", run_id, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["stages"]
    now = dt.datetime.now(dt.UTC)
    assert rows
    window = (began - dt.timedelta(seconds=1), now)  # the command's own wall clock: an order, not a duration
    for row in rows:
        started, ended = _when(row["started"]), _when(row["ended"])
        assert window[0] <= started <= ended <= window[1], row
        assert row["seconds"] == pytest.approx((ended - started).total_seconds(), abs=1e-3), row
    return rows


def assert_recorded(env: dict, run_id: str, code: int, began: dt.datetime) -> dict:
    """The run's row of ``timings --list``: real times, and the status and exit code it exited with."""
    run = _runs(env)[run_id]
    now = dt.datetime.now(dt.UTC)
    window = (began - dt.timedelta(seconds=1), now)  # an order, not a duration
    assert window[0] <= _when(run["started"]) <= _when(run["ended"]) <= window[1], run
    assert (run["status"], run["exit_code"]) == (RUN_STATUS[code], code), run
    return run


@pytest.fixture(scope="module")
def history_env(mongo_uri, mongo_client, tmp_path_factory):
    name = f"t_history_{uuid.uuid4().hex[:10]}"
    yield _env(mongo_uri, name, tmp_path_factory.mktemp("history-home"))
    mongo_client.drop_database(name)


def test_failed_and_refused_loads_record_real_times_and_the_exit_status(history_env, tmp_path):
    env, began = history_env, dt.datetime.now(dt.UTC)
    fifo_dir = tmp_path / "with-fifo"
    fifo_dir.mkdir()
    shutil.copy(PASTA, fifo_dir / PASTA.name)
    os.mkfifo(fifo_dir / "x.m10")  # nobody writes to it: opening it to read would block for ever
    lone = tmp_path / "lone"
    lone.mkdir()
    os.mkfifo(lone / "x.m10")
    cases = [  # (arguments, the exit code)
        ((tmp_path / "nonexistent.m10",), Exit.PARTIAL),
        ((fifo_dir, "--workers", "1"), Exit.PARTIAL),  # the FIFO refused, the .m10 beside it loaded
        ((fifo_dir, "--workers", "2", "--force"), Exit.PARTIAL),  # a Dask cluster started inside the load
        ((lone / "x.m10",), Exit.PARTIAL),  # named directly: refused too, never opened
        ((PASTA, "--write-concern", "w=0"), Exit.FATAL),  # unacknowledged writes: refused, nothing written
    ]
    runs = []
    for args, code in cases:
        proc = _cli(env, "load", "--json", *args)  # a load that blocked on the FIFO would time out here
        assert proc.returncode == code, (args, proc.returncode, proc.stderr[-2000:])
        report = json.loads(proc.stdout)
        assert report["status"] == RUN_STATUS[code] and report["exit_code"] == code, report
        runs.append((report["run_id"], code, proc.stderr))
    assert "x.m10: not a regular file: a FIFO" in runs[1][2] and "x.m10: not a regular file: a FIFO" in runs[3][2]
    for run_id, code, _ in runs:
        assert_recorded(env, run_id, code, began)
        rows = {r["stage"]: r for r in assert_rows_are_real(env, run_id, began)}
        assert rows["close"]["detail"] == {"run_status": RUN_STATUS[code], "exit_code": code}
    refused = {r["stage"]: r for r in assert_rows_are_real(env, runs[-1][0], began)}
    assert refused["load"]["status"] == "failed" and "w=0" in refused["load"]["error"], refused
    assert "parse" not in refused  # nothing was read
    # the load that started a cluster: its rates are over its own time, the cluster's seconds named apart
    clustered = {r["stage"]: r for r in assert_rows_are_real(env, runs[2][0], began)}
    assert "cluster" in clustered, list(clustered)
    load = clustered["load"]
    own = load["seconds"] - load["detail"]["start_up_s"]
    assert load["detail"]["start_up_s"] > 0 and load["records_per_s"] == pytest.approx(
        max(load["records_in"], load["records_out"]) / own, rel=0.01)
    assert "1970" not in _cli(env, "timings", "--list").stdout


def test_an_interrupted_analyze_is_recorded_interrupted(history_env, mongo_client):
    env = history_env
    load = _cli(env, "load", "-q", "--workers", "1", MATERIALS)
    assert load.returncode == 0, load.stderr[-2000:]
    began = dt.datetime.now(dt.UTC)
    # SIGINT as a terminal has it (a suite started in the background of a shell runs with SIGINT ignored)
    proc = subprocess.Popen([str(BIN), "analyze", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=REPO, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    timings = mongo_client[env["SCI_INGEST_DB"]].stage_timings
    try:
        end = time.monotonic() + TIMEOUT_S
        # the first analysis ended: the others (formula_consistency, hull_energy, ...) are still to run
        while timings.find_one({"stage": "analyze.best_hits", "started": {"$gte": began.replace(tzinfo=None)}}) is None:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "analyze.best_hits never ended"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == Exit.INTERRUPTED, (out[-2000:], err[-2000:])
    run_id = timings.find_one({"stage": "analyze.best_hits", "started": {"$gte": began.replace(tzinfo=None)}})["run_id"]
    assert_recorded(env, run_id, Exit.INTERRUPTED, began)
    rows = assert_rows_are_real(env, run_id, began)
    # Ctrl-C lands inside a stage (its row says interrupted) or, on a busy machine, between two (none was in
    # flight): the report names the same stage as the rows, or none, either way
    stopped = json.loads(out)["stopped"]
    assert stopped["by"] == "Ctrl-C", stopped
    interrupted = [(r["stage"], r["status"]) for r in rows if r["status"] != "ok"]
    assert interrupted == ([(stopped["stage"], "interrupted")] if stopped["stage"] else []), (stopped, rows)
    assert stopped["stage"] or stopped["undone"] == "nothing was in flight", stopped


# ------------------------------------------------------------------ the report
@pytest.fixture(scope="module")
def reported(mongo_uri, mongo_client, tmp_path_factory):
    """A run of the bundled materials samples and an -m 10 file, then a validate-only run; the report."""
    name = f"t_truth_{uuid.uuid4().hex[:10]}"
    home = tmp_path_factory.mktemp("truth-home")
    env = _env(mongo_uri, name, home)
    run = _cli(env, "run", "--json", "-q", "--workers", "1", MATERIALS, PASTA)
    assert run.returncode == 0, run.stderr[-3000:]
    full = json.loads(run.stdout)
    validate = _cli(env, "validate", "--json")
    assert validate.returncode == 0, validate.stderr[-3000:]
    out = tmp_path_factory.mktemp("truth-report")
    report = _cli(env, "report", "--out", out)
    assert report.returncode == 0, report.stderr
    yield {"env": env, "home": home, "db": name, "run": full, "text": run.stderr,
           "validate": json.loads(validate.stdout), "html": (out / "index.html").read_text(encoding="utf-8")}
    mongo_client.drop_database(name)


def test_the_synthetic_samples_are_known_by_their_hashes():
    found = {hashlib.sha256(p.read_bytes()).hexdigest(): f"samples/materials/{p.name}"
             for p in sorted((REPO / "samples" / "materials").glob("*.jsonl.gz"))}
    assert found == SYNTHETIC_SAMPLES


def test_a_run_of_the_samples_says_synthetic_samples(reported):
    notes = [n for n in reported["run"]["notes"] if n.startswith("synthetic samples:")]
    assert len(notes) == 1 and "samples/materials/materials.jsonl.gz" in notes[0], reported["run"]["notes"]
    assert "not real Materials Project records" in notes[0]


def test_the_default_run_is_the_last_full_run(reported):
    page = reported["html"]
    assert reported["validate"]["run_id"] != reported["run"]["run_id"]
    shown = re.search(r'<code id="run-id">([^<]*)</code> \(([^)]*)\)', page)
    assert shown.groups() == (reported["run"]["run_id"], "the last full run: it loaded or analysed"), shown.groups()
    assert re.search(r'id="run-status">ok<', page)


def test_the_page_says_synthetic_samples(reported):
    note = re.search(r'<p class="note synthetic" id="synthetic-samples">(.*?)</p>', reported["html"], re.S)
    assert note, "no synthetic-samples note"
    text = html.unescape(re.sub(r"<[^>]+>", "", note.group(1)))
    assert text.startswith("Synthetic samples.") and "3,000 of the 3,000 materials documents" in text, text
    assert "not real Materials Project records" in text
    hull = re.search(r'<section class="analysis" id="analysis-hull_energy".*?</section>', reported["html"], re.S)
    assert "holds the bundled synthetic samples" in hull.group(0)


def _alts(page: str) -> dict[str, str]:
    return {html.unescape(a).split(":", 1)[0]: html.unescape(a)
            for a in re.findall(r'<img class="plot" alt="([^"]*)"', page)}


def test_every_plot_on_the_page_names_both_axes(reported):
    alts = _alts(reported["html"])
    assert {"throughput across runs", "hull_energy plot", "best_hits plot"} <= set(alts), list(alts)
    for name, alt in alts.items():
        for panel in alt.split(": ", 1)[1].split(" | "):
            if panel.startswith("y: share of"):  # a colour bar: one axis, labelled
                continue
            assert re.search(r"(^|; )y: \S", panel), (name, panel)
            assert re.search(r"(^|; )x: \S", panel) or "y: mean band gap" in panel, (name, panel)  # a twin axis


def test_every_figure_the_report_draws_has_both_axis_labels(reported, monkeypatch):
    """The figures themselves, as the report draws them from the run's data: every panel's x and y
    labels are non-empty (a twin panel shares its x axis' label, a colour bar labels its one axis)."""
    monkeypatch.setenv("SCI_INGEST_HOME", str(reported["home"]))
    settings = Settings.from_env(mongo_uri=reported["env"]["MONGODB_URI"], db_name=reported["db"])
    with database(settings) as conn:
        data = collect(conn, settings)
    drawn = list(figures(data))
    assert {"throughput", "hull_energy", "best_hits", "oxide_formation_energy"} <= {n for n, _ in drawn}
    for name, fig in drawn:
        assert fig is not None and not isinstance(fig, Exception), (name, fig)
        for ax in fig.axes:
            if getattr(ax, "_colorbar", None) is not None:
                bar = ax._colorbar
                label = ax.get_ylabel() if bar.orientation == "vertical" else ax.get_xlabel()
                assert label.strip(), (name, "colour bar")
                continue
            twins = [o for o in ax.get_shared_x_axes().get_siblings(ax) if o is not ax]
            assert ax.get_ylabel().strip(), (name, ax.get_title())
            assert ax.get_xlabel().strip() or any(t.get_xlabel().strip() for t in twins), (name, ax.get_title())


def test_the_hull_energy_histogram_is_annotated_with_what_it_plots(reported, mongo_client):
    alt = _alts(reported["html"])["hull_energy plot"]
    histogram = alt.split(": ", 1)[1].split(" | ")[0]
    assert "x: |recomputed - stored| energy above hull (eV/atom)" in histogram
    median = re.search(r"median \|difference\| ([0-9.e-]+) eV/atom", histogram)
    assert median, histogram
    assert "median +" not in alt and "median -" not in alt
    published = mongo_client[reported["db"]].hull_energy.find({}, {"abs_difference": 1, "_id": 0})
    absolute = np.array([d["abs_difference"] for d in published if d.get("abs_difference") is not None])
    assert len(absolute) == 3000  # every bundled material compared
    assert float(median.group(1)) == pytest.approx(float(np.median(absolute)), rel=1e-2)


def test_throughput_is_the_loads_own(reported):
    page = reported["html"]
    assert "Throughput (last" in page
    note = html.unescape(re.search(r'<p class="meta" id="throughput-note">(.*?)</p>', page).group(1))
    assert "own time" in note and "cluster started for it" in note and "start-up" in note
    alt = _alts(page)["throughput across runs"]
    assert "cluster start, start-up and connect excluded" in alt


def test_each_suite_shows_its_status_as_given(reported, mongo_client):
    """The validation table's status column is each suite's stored status, word for word (a suite
    that checked nothing is not shown as passed)."""
    page = reported["html"]
    table = re.search(r'<table id="validation-table">.*?</table>', page, re.S)
    assert table, "the default run validated: its table is on the page"
    shown = dict(re.findall(r'<tr[^>]*><td class="l">([^<]*)</td><td class="l">[^<]*</td><td class="l">([^<]*)</td>',
                            table.group(0)))
    stored = {d["suite"]: d["status"] for d in mongo_client[reported["db"]].validation_runs.find(
        {"run_id": reported["run"]["run_id"]}, {"suite": 1, "status": 1})}
    assert stored and {html.unescape(k): html.unescape(v) for k, v in shown.items()} == stored
    summary = html.unescape(re.search(r'<p id="validation-summary">(.*?)</p>', page).group(1))
    assert summary.startswith(f"{len(stored)} suite(s): ")
