"""The Airflow UI, checked in a real browser (``make test-ui``).

``sci-ingest airflow`` in a temporary home; a landing day (two ``-m 10`` samples and the
materials sample) triggered through Airflow's REST API; its run and the curated run its
Asset events start, both green.  Then Debian's chromium, headless, driven through Debian's
chromedriver by selenium (never a downloaded browser or driver: the paths are given, and
``SE_OFFLINE``): the login form of the simple auth manager, the DAG list with the project's
four DAGs, the page of each run with every task shown green (the one skip the landing DAG
makes by design aside), no error on any page, no severe browser console entry but the one
proven benign before the login.  Screenshots: ``test-output/ui/`` (``$SCI_INGEST_TEST_OUTPUT/ui``);
with ``SCI_INGEST_UPDATE_FIGURES=1`` the curated run's becomes ``docs/figures/airflow-green-run.png``.
About two minutes.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from airflow_harness import (  # noqa: F401  (local_airflow: the fixture)
    DAG_IDS,
    REPO,
    Api,
    _all_done,
    _runs,
    _tasks,
    _wait,
    admin_and_mongo,
    land_day,
    local_airflow,
    wait_healthy,
)

from ingest.airflow.support import ASSET_COLLECTIONS

# The curated run's analyze task starts Dask worker processes here, as for real data, though the
# samples are small work (docs/pipeline.md): spawned workers inside a task process are what once
# failed only under a real scheduler.  (test_airflow_scheduler.py's tasks do the small work in
# their own process.)
AIRFLOW_EXTRA_ENV = {"SCI_INGEST_SMALL_WORK": "0"}

pytestmark = [pytest.mark.ui, pytest.mark.slow]

OUT = Path(os.environ.get("SCI_INGEST_TEST_OUTPUT") or REPO / "test-output") / "ui"
FIGURE = REPO / "docs" / "figures" / "airflow-green-run.png"
SHOTS = ("00-login.png", "01-dags.png", "02-landing-run.png", "03-curated-run.png", "failure.png")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1600,1000")

PASTA = [REPO / "samples" / "pasta" / "fasta36_prot.m10", REPO / "samples" / "pasta" / "ssearch36_prot.m10"]
MATERIALS = REPO / "samples" / "materials" / "materials.jsonl.gz"
# The landing run's tasks, exactly: the -m 10 files write searches and hits, materials.jsonl.gz
# writes materials; tasks.jsonl.gz did not land, so `tasks_written` finds no tasks documents
# written and is skipped - by design (dags/sci_ingest_landing.py: no documents, no Asset event).
# That is the only state other than success allowed anywhere.
LANDING_TASKS = {"load_day": "success", "searches_written": "success", "hits_written": "success",
                 "materials_written": "success", "tasks_written": "skipped"}  # fmt: skip
CURATED_TASKS = {"analyze": "success", "validate": "success"}
UI_STATE = {"success": "Success", "skipped": "Skipped"}  # the text of Airflow's state badge

# Severe browser console entries allowed, each (pattern, when, why).  Before the login only:
BENIGN_BEFORE_LOGIN = [
    (re.compile(r"^http://127\.0\.0\.1:\d+/ui/config - Failed to load resource: the server responded with a "
                r"status of 401 \(Unauthorized\)$"),  # fmt: skip
     "the React app asks /ui/config without a token; the 401 is how it learns nobody is logged in "
     "and it sends the browser to the simple auth manager's /auth/login (not logged again after the login)"),
]
# Text that means the page shows an error: Airflow 3's error page ("Error", "An unexpected error
# occurred", "Page Not Found"), its 403 page ("Access Denied"), an API error shown in an alert
# ("404 Not Found ...", "401 Unauthorized ..."), a crashed component ("Something went wrong").
ERROR_TEXT = re.compile(r"\bError\b|Something went wrong|An unexpected error occurred|Page Not Found|\b404 Not Found|"
                        r"\bUnauthorized\b|\bForbidden\b|Access Denied|\bInternal Server Error\b")  # fmt: skip

# What a page shows, read in the page: alerts and toasts (an API error is shown in a Chakra alert,
# a failed action in a toast; not the Monaco editor's screen-reader live regions, ``.monaco-alert``, empty
# role="alert" boxes it keeps on any page that shows JSON in an editor, as the Asset events' extras now are),
# headings, the whole text; the run header's state badge, the state
# badge of each row of the Task Instances table, the badge of each task's cell in the grid; each
# badge's background colour as sRGB (a canvas converts Chakra's oklch colours).
PAGE_JS = """
const [runId, taskIds] = arguments;
const ctx = document.createElement('canvas').getContext('2d');
const rgb = (el) => { ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = getComputedStyle(el).backgroundColor;
                      ctx.fillRect(0, 0, 1, 1); return Array.from(ctx.getImageData(0, 0, 1, 1).data.slice(0, 4)); };
const badge = (el) => el ? {text: el.textContent.trim(), rgb: rgb(el)} : null;
const page = {
  url: location.href,
  alerts: Array.from(document.querySelectorAll('[role="alert"]:not(.monaco-alert), .chakra-alert__root'))
    .map(e => e.innerText.trim()),
  toasts: Array.from(document.querySelectorAll('[data-scope="toast"][data-part="root"]'))
            .map(e => (e.getAttribute('data-type') || '') + ': ' + e.innerText.trim()),
  headings: Array.from(document.querySelectorAll('h1, h2, h3')).map(e => e.innerText.trim()).filter(t => t),
  text: document.body.innerText,
  dags: Array.from(document.querySelectorAll('[data-testid="dag-card"]')).map(card => ({
    id: (card.querySelector('[data-testid="dag-id"]') || {}).textContent,
    latest: badge(card.querySelector('[data-testid="latest-run"] [data-testid="state-badge"]')),
  })),
  header: badge(document.querySelector('[data-testid="header-card"] [data-testid="state-badge"]')),
  table: {}, rows: 0, grid: {},
};
for (const tr of document.querySelectorAll('tr')) {
  const name = tr.querySelector('[data-testid="table-cell-task_display_name"]');
  if (!name) continue;
  page.rows += 1;
  const state = tr.querySelector('[data-testid="table-cell-state"] [data-testid="state-badge"]');
  page.table[name.textContent.trim()] = badge(state);
}
for (const a of document.querySelectorAll('a[data-testid^="grid-"]')) {
  for (const t of (taskIds || [])) {
    if (a.getAttribute('data-testid') === 'grid-' + runId + '-' + t)
      page.grid[t] = badge(a.querySelector('[data-testid="task-state-badge"]'));
  }
}
return page;
"""


def _green(rgba) -> bool:
    r, g, b, a = rgba
    return a > 200 and g >= 90 and g > r + 50 and g > b + 50


def _page_errors(page: dict) -> list[str]:
    found = [f"alert: {t!r}" for t in page["alerts"]]
    found += [f"toast: {t!r}" for t in page["toasts"]]
    found += [f"heading: {h!r}" for h in page["headings"] if ERROR_TEXT.search(h) or h.strip() in ("404", "403")]
    found += [f"text: {m.group(0)!r}" for m in ERROR_TEXT.finditer(page["text"])]
    return found


def _chromium(tmp_path: Path, monkeypatch, caplog):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and chromedriver, (
        f"chromium ({chromium}) and chromedriver ({chromedriver}) are needed: "
        "`make test-ui` installs them (apt-get install -y chromium chromium-driver)")
    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager, were it ever run, would not download
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    caplog.set_level(logging.DEBUG, logger="selenium")
    service = Service(executable_path=chromedriver, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    # the driver and the browser given, not found or fetched by Selenium Manager
    messages = [(r.name, r.getMessage()) for r in caplog.records if r.name.startswith("selenium")]
    assert any("Skipping Selenium Manager" in m and chromedriver in m for _, m in messages), messages
    assert not [m for n, m in messages if n.endswith("selenium_manager")], messages
    return driver


def _severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _wait_page(driver, what: str, ready, run_id: str | None = None, tasks=(), timeout: float = 60) -> dict:
    """The page's summary once ``ready(page)``; the last summary in the error otherwise."""
    last = {}

    def check():
        nonlocal last
        last = driver.execute_script(PAGE_JS, run_id, list(tasks))
        return last if (ready(last) or _page_errors(last)) else None

    shown = ("url", "alerts", "header", "table", "grid", "dags")
    page = _wait(what, check, timeout, every=0.5, describe=lambda: {k: last.get(k) for k in shown})
    assert not _page_errors(page), f"{what}: the page shows an error: {_page_errors(page)} ({page['url']})"
    return page


def _shot(driver, name: str) -> Path:
    path = OUT / name
    assert driver.save_screenshot(str(path)), path
    assert path.stat().st_size > 20_000, f"{path}: {path.stat().st_size} bytes, a blank page?"
    print(f"screenshot: {path}")
    return path


def _check_run_page(driver, base: str, dag_id: str, run_id: str, expected: dict, shot: str) -> Path:
    driver.get(f"{base}/dags/{dag_id}/runs/{quote(run_id, safe='')}")
    page = _wait_page(driver, f"the page of {dag_id} run {run_id}",
                      lambda p: p["header"] and p["header"]["text"] and set(p["table"]) == set(expected)
                      and all(p["table"].values()) and set(p["grid"]) == set(expected) and all(p["grid"].values()),
                      run_id, expected)  # fmt: skip
    assert run_id in page["text"]
    assert page["header"]["text"] == "Success" and _green(page["header"]["rgb"]), page["header"]
    assert page["rows"] == len(expected), page["table"]  # no other task instance listed
    success_rgb = page["header"]["rgb"]
    for task_id, state in expected.items():
        row, cell = page["table"][task_id], page["grid"][task_id]
        assert row["text"] == UI_STATE[state], (task_id, row)
        # the grid's cell has the colour of its state's badge: green for success
        assert cell["rgb"] == row["rgb"], (task_id, cell, row)
        if state == "success":
            assert _green(row["rgb"]) and row["rgb"] == success_rgb, (task_id, row, success_rgb)
        else:
            assert not _green(row["rgb"]), (task_id, row)
    return _shot(driver, shot)


def test_the_ui_shows_the_landing_run_and_its_asset_triggered_run_green(local_airflow, tmp_path, monkeypatch, caplog):  # noqa: F811 - the fixture imported above
    started = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    for name in SHOTS:  # no screenshot of an earlier run passes for this one's
        (OUT / name).unlink(missing_ok=True)
    assert set(LANDING_TASKS) == {"load_day"} | {f"{c}_written" for c in ASSET_COLLECTIONS}

    proc, port, home, log_path = local_airflow
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, 180)
    password, _ = admin_and_mongo(log_path)
    api = Api(base, password)
    dags = _wait("the DAGs to be parsed", lambda: len(api.call("GET", "/api/v2/dags")["dags"]) == len(DAG_IDS), 120)
    assert dags and {d["dag_id"] for d in api.call("GET", "/api/v2/dags")["dags"]} == DAG_IDS
    assert api.call("GET", "/api/v2/importErrors")["total_entries"] == 0

    # a landing day a week ago: never the day of the latest daily run that unpausing queues
    day = (dt.datetime.now(dt.UTC) - dt.timedelta(days=7)).date()
    land_day(home, day.isoformat(), [*PASTA, MATERIALS])
    for dag_id in ("sci_ingest_landing", "sci_ingest_curated"):
        api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    run = api.call("POST", "/api/v2/dags/sci_ingest_landing/dagRuns",
                   {"logical_date": f"{day.isoformat()}T00:00:00Z", "conf": {}})  # fmt: skip
    landing_id = run["dag_run_id"]
    assert run["run_type"] == "manual" and run["triggered_by"] == "rest_api", run

    def landing_finished():
        state = api.call("GET", f"/api/v2/dags/sci_ingest_landing/dagRuns/{quote(landing_id, safe='')}")["state"]
        return state if state in ("success", "failed") else None

    assert _wait("the landing run", landing_finished, 180, every=2,
                 describe=lambda: _tasks(api, "sci_ingest_landing", landing_id)) == "success", \
        _tasks(api, "sci_ingest_landing", landing_id)  # fmt: skip
    assert _tasks(api, "sci_ingest_landing", landing_id) == LANDING_TASKS

    # the curated runs its Asset events started (one, unless the scheduler saw the first event
    # alone): done and green, together consuming every event the landing run emitted
    written = {t for t, s in LANDING_TASKS.items() if t.endswith("_written") and s == "success"}

    def curated_done():
        runs = _all_done(api, "sci_ingest_curated", 1)
        if not runs:
            return None
        consumed = {(e["source_run_id"], e["source_task_id"]) for r in runs for e in
                    api.call("GET", f"/api/v2/dags/sci_ingest_curated/dagRuns/{quote(r['dag_run_id'], safe='')}"
                             "/upstreamAssetEvents")["asset_events"]}  # fmt: skip
        return runs if consumed == {(landing_id, t) for t in written} else None

    curated = _wait("the Asset-triggered curated run", curated_done, 180, every=2,
                    describe=lambda: [(r["dag_run_id"], r["state"]) for r in _runs(api, "sci_ingest_curated")])
    assert {r["run_type"] for r in curated} == {"asset_triggered"}, curated
    for r in curated:
        assert _tasks(api, "sci_ingest_curated", r["dag_run_id"]) == CURATED_TASKS, r
    # the daily run unpausing queued (nothing landed for its day) ends green too
    _wait("every landing run", lambda: _all_done(api, "sci_ingest_landing", 1), 120, every=2)
    print(f"runs green after {time.monotonic() - started:.0f} s: sci_ingest_landing {landing_id}, "
          f"sci_ingest_curated {[r['dag_run_id'] for r in curated]}")

    driver = _chromium(tmp_path, monkeypatch, caplog)
    try:
        # the login form of the simple auth manager: the UI sends a visitor there
        driver.get(base + "/")
        has_form = "return !!document.querySelector('form input[name=password]')"
        _wait("the login form", lambda: "/auth/login" in driver.current_url and driver.execute_script(has_form), 60,
              every=0.5)  # fmt: skip
        assert "Sign into Airflow" in driver.find_element("tag name", "body").text
        _shot(driver, "00-login.png")
        severe = _severe(driver)
        unexplained = [m for m in severe if not any(p.search(m) for p, _ in BENIGN_BEFORE_LOGIN)]
        assert not unexplained, f"severe browser console entries before the login: {unexplained}"
        driver.find_element("css selector", "form input[name=username]").send_keys("admin")
        driver.find_element("css selector", "form input[name=password]").send_keys(password)
        submit = driver.find_element("css selector", "form button[type=submit]")
        _wait("the sign-in button to be enabled", submit.is_enabled, 10, every=0.2)
        submit.click()
        _wait("the UI after the login", lambda: "/auth/login" not in driver.current_url and driver.execute_script(
            "return !!document.querySelector('[data-testid=\"nav-dags-link\"]')"), 60, every=0.5)  # fmt: skip

        # the DAG list, reached through the navigation bar: the project's four DAGs, the
        # landing and curated ones with their latest run green
        driver.find_element("css selector", '[data-testid="nav-dags-link"]').click()
        ran = ("sci_ingest_landing", "sci_ingest_curated")
        page = _wait_page(driver, "the DAG list", lambda p: {d["id"] for d in p["dags"]} == DAG_IDS
                          and all(d["latest"] for d in p["dags"] if d["id"] in ran))  # fmt: skip
        assert page["url"].rstrip("/").endswith("/dags") and f"{len(DAG_IDS)} Dags" in page["text"], page["url"]
        for d in page["dags"]:
            if d["id"] in ran:
                assert _green(d["latest"]["rgb"]), d
        _shot(driver, "01-dags.png")

        _check_run_page(driver, base, "sci_ingest_landing", landing_id, LANDING_TASKS, "02-landing-run.png")
        shots = [_check_run_page(driver, base, "sci_ingest_curated", r["dag_run_id"], CURATED_TASKS,
                                 "03-curated-run.png" if i == 0 else f"03-curated-run-{i + 1}.png")
                 for i, r in enumerate(curated)]  # fmt: skip
        green = shots[0]  # the figure of docs/airflow.md: every task of the run green
        # after the login nothing at all goes to the console as severe
        severe = _severe(driver)
        assert not severe, f"severe browser console entries after the login: {severe}"
    except BaseException:
        try:
            _shot(driver, "failure.png")
        except Exception:  # noqa: BLE001 - the original failure matters, not this one
            pass
        raise
    finally:
        driver.quit()

    if os.environ.get("SCI_INGEST_UPDATE_FIGURES") == "1":
        shutil.copyfile(green, FIGURE)
        print(f"figure: {FIGURE} (from {green})")
    print(f"make test-ui: {time.monotonic() - started:.0f} s from the start of Airflow")
