"""``sci-ingest bench``: the list, one run end to end (stored, files, table), the HTML report.

Every experiment's own run is tested in its file (test_bench_workers.py, test_bench_ycsb.py,
test_bench_analysis.py, test_bench_cache.py); here the framework, through the CLI as a
user runs it, against the session's real server.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.bench import ORDER, all_experiments
from analytics.bench.core import SIZES

REPO = Path(__file__).resolve().parent.parent


def _cli(*args, cwd=None, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "ingest.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=env, timeout=timeout)  # fmt: skip


def test_bench_list_names_the_ten_experiments_with_their_study_and_figure():
    proc = _cli("bench", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["experiments"]
    assert [r["name"] for r in rows] == list(ORDER)
    for r in rows:
        assert re.search(r"\b(SS|MH|MEM|SD|NV)-", r["figures"]), r  # the figure ids of studies.md
        assert r["study"][:3] in {"000", "001", "002", "003", "004"}, r
        assert r["quick"], r
    text = _cli("bench", "list")
    assert text.returncode == 0 and all(name in text.stdout for name in ORDER)


def test_every_experiment_declares_each_size_a_plot_and_the_study_figures():
    experiments = all_experiments()
    assert list(experiments) == list(ORDER)
    for exp in experiments.values():
        assert set(exp.sizes) == set(SIZES), exp.name
        assert exp.plot.x and exp.plot.y, exp.name
        assert exp.published, f"{exp.name}: no published figure to compare with"
        assert exp.differences, f"{exp.name}: the report must say what differs from the study"
        assert exp.run.__module__.startswith("analytics.bench.experiments."), exp.name


def test_an_unknown_experiment_exits_64_and_lists_the_known_ones():
    proc = _cli("bench", "no-such-thing")
    assert proc.returncode == 64
    assert "unknown experiment 'no-such-thing'" in proc.stderr and "workers" in proc.stderr


def test_a_run_is_stored_written_and_printed_beside_the_study(mongo_uri, mongo_client, tmp_path):
    db = f"bench_core_{os.getpid()}"
    out = tmp_path / "out"
    proc = _cli("bench", "shard-plan", "--size", "tiny", "--mongo-uri", mongo_uri, "--db", db, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "# beside the study" in proc.stdout and "SS-F5.6" in proc.stdout
    stored = list(mongo_client[db]["bench_runs"].find())
    assert len(stored) == 1
    run = stored[0]
    assert run["experiment"] == "shard-plan" and run["size"] == "tiny"
    assert run["params"]["shards"] == [2, 4]
    assert run["machine"]["cores"] == os.cpu_count() and run["machine"]["memory_bytes"] > 0
    assert run["server"]["kind"] in ("SecantusDB", "MongoDB") and run["software"]["pymongo"]
    hashed = {p["shards"]: p for p in run["points"] if p["scheme"] == "hashed"}
    ranged = {p["shards"]: p for p in run["points"] if p["scheme"] == "ranged"}
    assert set(hashed) == set(ranged) == {2, 4}
    for n in (2, 4):  # sequential keys: ranged sends all the newest inserts to one shard, hashed about 1/n
        assert ranged[n]["last_10pct_on_busiest"] == 1.0
        assert abs(hashed[n]["last_10pct_on_busiest"] - 1 / n) < 0.1
    assert not [n for n in mongo_client.list_database_names() if n.startswith(f"{db}_bench")]  # the experiment's data is dropped
    files = run["files"]
    assert json.loads(Path(files["json"]).read_text())["_id"] == run["_id"]
    with open(files["csv"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(run["points"]) and {"shards", "scheme", "last_10pct_on_busiest"} <= set(rows[0])
    assert Path(files["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # --json prints the same document
    again = _cli("bench", "shard-plan", "--size", "tiny", "--mongo-uri", mongo_uri, "--db", db, "--out", str(out),
                 "--json", "-q")  # fmt: skip
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["experiment"] == "shard-plan" and doc["comparison"][0]["figure"] == "SS-F5.6"
    assert mongo_client[db]["bench_runs"].count_documents({}) == 2

    # the report: one offline page, every experiment, the stored runs' plots inline
    page = tmp_path / "report.html"
    rep = _cli("bench", "report", "--mongo-uri", mongo_uri, "--db", db, "--out", str(out), "--html", str(page))
    assert rep.returncode == 0, rep.stderr
    text = page.read_text()
    for name in ORDER:
        assert f'id="{name}"' in text
    assert text.count("data:image/png;base64,") == 1  # the newest tiny shard-plan run
    assert "AWS m1.xlarge" in text and "What differs from the study" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//|<script|@import|url\(""", text), "the page must be offline"
    mongo_client.drop_database(db)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_the_report_renders_in_a_real_browser(mongo_uri, mongo_client, tmp_path):
    db = f"bench_browser_{os.getpid()}"
    out = tmp_path / "out"
    assert _cli("bench", "shard-plan", "--size", "tiny", "--mongo-uri", mongo_uri, "--db", db, "--out",
                str(out), "-q").returncode == 0  # fmt: skip
    page = tmp_path / "report.html"
    assert _cli("bench", "report", "--mongo-uri", mongo_uri, "--db", db, "--html", str(page), "-q").returncode == 0
    shot = tmp_path / "shot.png"
    browser = [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--user-data-dir=" + str(tmp_path / "profile")]  # fmt: skip
    dom = subprocess.run(browser + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "sci-ingest bench report" in dom.stdout and 'id="write-concern"' in dom.stdout
    assert dom.stdout.count("<img") == 1
    subprocess.run(browser + ["--screenshot=" + str(shot), "--window-size=1200,2000", page.as_uri()],
                   capture_output=True, timeout=120)  # fmt: skip
    assert shot.is_file() and shot.stat().st_size > 10_000  # rendered, not blank
    mongo_client.drop_database(db)


def test_bench_all_goes_on_past_a_failed_experiment_and_exits_1():
    unreachable = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300&directConnection=true"
    proc = _cli("bench", "all", "--mongo-uri", unreachable, "-q", timeout=300)
    assert proc.returncode == 1
    for name in ORDER:  # each named on stderr, one line, with the reason
        assert re.search(rf"^error: {re.escape(name)}: .*cannot reach MongoDB", proc.stderr, re.M), name
    assert "10 of 10 experiments failed" in proc.stderr
    one = _cli("bench", "workers", "--mongo-uri", unreachable, "-q", timeout=120)
    assert one.returncode == 1 and "cannot reach MongoDB" in one.stderr and "Traceback" not in one.stderr
