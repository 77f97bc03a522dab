"""``sci-ingest report``: a run on one self-contained HTML page, checked in a real browser.

Two real runs into a database of the session's server, through the console script as a user
runs it: a load of one ``-m 10`` file, then ``sci-ingest run`` on hostile inputs (a search file
named ``<script>alert(1)</script>.m10``, a material whose id is ``<img src=x onerror=...>``
and whose negative band gap fails a critical expectation, so the run fails its validation)
and a slice of the bundled materials.  Then ``sci-ingest report --out DIR``, and the page is
opened in Debian's chromium, headless, through Debian's chromedriver by selenium (never a
downloaded browser or driver: both paths given, ``SE_OFFLINE``): no severe console entry,
every image loaded, the sections there, nothing external, the hostile names shown as text.
Screenshot: ``test-output/report/report.png`` (``$SCI_INGEST_TEST_OUTPUT/report``); with
``SCI_INGEST_UPDATE_FIGURES=1`` a run of the bundled samples (what ``make run`` loads) is
reported too and its page becomes ``docs/figures/report.png``, the figure of docs/report.md.
About 20 seconds (a minute more with the figure).
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import uuid
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent / "sci-ingest"
OUT = Path(os.environ.get("SCI_INGEST_TEST_OUTPUT") or REPO / "test-output") / "report"
FIGURE = REPO / "docs" / "figures" / "report.png"
PASTA = REPO / "samples" / "pasta"
HOSTILE_M10 = "<script>alert(1)</script>.m10"  # a folder "<script>alert(1)<" holding "script>.m10"
HOSTILE_ID = "<img src=x onerror=alert(1)>"
HOSTILE_MATERIAL = {"material_id": HOSTILE_ID, "formula_pretty": "<script>alert('Fe2O3')</script>",
                    "elements": ["Fe", "O"], "nelements": 2, "chemsys": "Fe-O", "formation_energy_per_atom": -1.5,
                    "band_gap": -1.0, "energy_above_hull": 0.0, "nsites": 5, "volume": 50.0, "density": 5.0,
                    "symmetry": {"crystal_system": "cubic", "number": 225}}  # fmt: skip
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason=f"Debian's chromium ({CHROMIUM}) and chromedriver ({CHROMEDRIVER}) are needed: "
           "apt-get install -y chromium chromium-driver")  # fmt: skip


def _cli(env, *args, timeout=300):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=timeout)  # fmt: skip


def _env(mongo_uri: str, db: str, home: Path) -> dict:
    env = {**os.environ, "MONGODB_URI": mongo_uri, "SCI_INGEST_DB": db, "SCI_INGEST_HOME": str(home)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _runs(db) -> list[str]:
    """The database's run ids, oldest first."""
    first = {}
    for row in db.stage_timings.find({}, {"run_id": 1, "started": 1}):
        first[row["run_id"]] = min(first.get(row["run_id"], row["started"]), row["started"])
    return sorted(first, key=first.get)


def _stages(db, run_id: str) -> list[str]:
    rows = db.stage_timings.find({"run_id": run_id, "scope": "run"}).sort("started", 1)
    return [r["stage"] for r in rows]


@pytest.fixture(scope="module")
def reported(mongo_uri, mongo_client, tmp_path_factory):
    """Two runs (a load, then a run on hostile inputs that fails its validation) and the report."""
    data = tmp_path_factory.mktemp("report-data")
    (data / "<script>alert(1)<").mkdir()
    shutil.copy(PASTA / "ssearch36_prot.m10", data / HOSTILE_M10)
    with gzip.open(REPO / "samples" / "materials" / "materials.jsonl.gz", "rt", encoding="utf-8") as fh:
        (data / "materials.jsonl").write_text("".join(line for _, line in zip(range(300), fh)), encoding="utf-8")
    evil = data / 'evil"&<material>.jsonl'
    evil.write_text(json.dumps(HOSTILE_MATERIAL) + "\n", encoding="utf-8")
    name = f"t_report_{uuid.uuid4().hex[:10]}"
    home = tmp_path_factory.mktemp("report-home")
    env = _env(mongo_uri, name, home)
    load = _cli(env, "load", "-q", "--workers", "1", PASTA / "fasta36_prot.m10")
    assert load.returncode == 0, load.stderr
    run = _cli(env, "run", "-q", "--workers", "1", data / HOSTILE_M10, data / "materials.jsonl", evil,
               PASTA / "fasta36_prot.m10")  # fmt: skip
    assert run.returncode == 1 and "critical expectation" in run.stderr, (run.returncode, run.stderr[-2000:])
    out = tmp_path_factory.mktemp("report-out") / "report"
    report = _cli(env, "report", "--out", out)
    assert report.returncode == 0, report.stderr
    page = out / "index.html"
    assert report.stdout.strip() == str(page)
    db = mongo_client[name]
    yield SimpleNamespace(env=env, db=db, page=page, html=page.read_text(encoding="utf-8"), runs=_runs(db),
                          home=home)
    mongo_client.drop_database(name)


# ------------------------------------------------------------------ the browser
def _chromium(tmp_path: Path, monkeypatch, caplog, width: int = 1200):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager, were it ever run, would not download
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={width},1000", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    caplog.set_level(logging.DEBUG, logger="selenium")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "driver.log")),
                              options=options)  # fmt: skip
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("selenium")]
    assert any("Skipping Selenium Manager" in m and CHROMEDRIVER in m for m in messages), messages
    return driver


def _full_page_shot(driver, path: Path, width: int = 1200) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(int(height) + 40, 8000))
    path.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(path))


# Everything the page says about its images, plots, links and sections, in one round trip.
_SUMMARY_JS = """
const attr = [...document.querySelectorAll('[src],[href],[srcset],[action],[poster],[data]')]
  .flatMap(e => ['src', 'href', 'srcset', 'action', 'poster', 'data'].map(a => e.getAttribute(a)).filter(v => v));
return {
  images: [...document.images].map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth,
                                          src: i.getAttribute('src').slice(0, 22)})),
  svgs: [...document.querySelectorAll('svg')].map(s => {
    const b = s.getBoundingClientRect(); return [b.width, b.height]; }),
  urls: attr,
  scripts: document.scripts.length,
  stageRows: [...document.querySelectorAll('#stage-table tbody tr')].map(r => r.cells[0].textContent),
  analyses: Object.fromEntries([...document.querySelectorAll('section.analysis')].map(s =>
     [s.dataset.analysis, {plots: [...s.querySelectorAll('img.plot')].map(i => i.complete && i.naturalWidth > 0),
                           missing: [...s.querySelectorAll('.missing')].map(p => p.textContent)}])),
  status: document.getElementById('run-status').textContent,
  runId: document.getElementById('run-id').textContent,
  header: document.querySelector('header').textContent,
  files: [...document.querySelectorAll('#file-table tbody tr')].map(r => r.cells[0].textContent),
  validation: [...document.querySelectorAll('#validation-table tbody tr')]
    .map(r => [r.cells[0].textContent, r.cells[2].textContent]),
  failures: [...document.querySelectorAll('ul.failures li')].map(li => li.textContent),
  sections: [...document.querySelectorAll('h2[id]')].map(h => h.id),
};
"""


@needs_browser
def test_the_page_renders_in_headless_chromium(reported, tmp_path, monkeypatch, caplog):
    from analytics.registry import all_analyses

    driver = _chromium(tmp_path, monkeypatch, caplog)
    try:
        driver.get(reported.page.as_uri())
        page = driver.execute_script(_SUMMARY_JS)
        severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        _full_page_shot(driver, OUT / "report.png")
        alerts = driver.execute_script("return typeof window.alert")  # the page ran nothing that could call it
    finally:
        driver.quit()
    assert severe == [], severe
    assert alerts == "function" and page["scripts"] == 0
    # every image loaded (PNG data: URIs), every inline SVG has a size, nothing refers to the network
    assert page["images"] and all(i["complete"] and i["width"] > 0 for i in page["images"]), page["images"]
    assert all(i["src"].startswith("data:image/png;base64") for i in page["images"]), page["images"]
    assert all(w > 0 and h > 0 for w, h in page["svgs"]), page["svgs"]
    assert not [u for u in page["urls"] if re.match(r"\s*(https?:)?//", u, re.I)], page["urls"]
    assert {"stages", "throughput", "collections", "validation"} <= set(page["sections"])
    # the header: the default run (the last full run: it loaded), its status and its date from the rows
    first, second = reported.runs
    assert page["runId"] == second and "failed" in page["status"] and "critical validation" in page["status"]
    started = min(r["started"] for r in reported.db.stage_timings.find({"run_id": second}))
    assert started.replace(tzinfo=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") in page["header"]
    # one stage-table row per stage of the run, in order
    assert page["stageRows"] == _stages(reported.db, second)
    # the validation: the failed suite and its critical expectation with the offending value
    assert ["materials", "failed"] in page["validation"], page["validation"]
    critical = [f for f in page["failures"] if f.startswith("CRITICAL")]
    assert len(critical) == 1 and "expect_column_values_to_be_between" in critical[0] and "band_gap" in critical[0]
    assert "-1.0" in critical[0] and HOSTILE_ID in critical[0], critical
    # one section per analysis; a plot that loaded where it has a plot and an output, else a sentence
    analyses = all_analyses()
    assert set(page["analyses"]) == {a.name for a in analyses}
    plotted = 0
    for a in analyses:
        section = page["analyses"][a.name]
        if a.plot is not None and reported.db[a.output].estimated_document_count():
            assert section["plots"] == [True], (a.name, section)
            plotted += 1
        else:
            assert not section["plots"] and section["missing"], (a.name, section)
    assert plotted >= 2  # best_hits and oxide_formation_energy at least
    assert len(page["images"]) == plotted + 1  # and the throughput plot
    # the hostile file name is shown as text, not run as markup
    assert any(f.endswith(HOSTILE_M10) for f in page["files"]), page["files"]


def test_every_string_from_the_database_is_escaped(reported):
    text = reported.html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.m10" in text  # the file name, in the files table
    assert html_escaped(HOSTILE_ID) in text  # the material id, among the offending values
    assert "<script" not in text.lower() and "<img src=x" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//|<link|@import|url\(""", text, re.I)
    tags = _tags(text)
    images = [a for t, a in tags if t == "img"]
    assert images and all(set(a) == {"class", "alt", "src"} for a in images), images  # no onerror= from the data
    assert all(a["src"].startswith("data:image/png;base64,") for a in images)
    for a in images:  # each a real PNG
        assert base64.b64decode(a["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    # a parser sees exactly the elements the page writes: no element came from the data
    assert {t for t, _ in tags} <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3",
                                    "span", "p", "code", "nav", "a", "table", "thead", "tbody", "tr", "th", "td",
                                    "details", "summary", "img", "ul", "li", "section", "b"}  # fmt: skip


def test_each_analysis_section_declares_its_output_columns(reported):
    """Every analysis section lists its output's columns as declared: type, unit (— : none), meaning."""
    import html

    from analytics.registry import all_analyses

    text = reported.html
    for analysis in all_analyses():
        section = re.search(rf'<section class="analysis" id="analysis-{analysis.name}".*?</section>', text, re.S)
        assert section, analysis.name
        table = re.search(rf'<table id="outputs-{analysis.name}">(.*?)</table>', section.group(0), re.S)
        assert table, analysis.name
        rows = [[html.unescape(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
                for row in re.findall(r"<tr>(.*?)</tr>", table.group(1)) if "<td" in row]
        assert rows == [[c.name, c.kind, c.unit or "—", c.meaning] for c in analysis.outputs], analysis.name
    hull = re.search(r'<table id="outputs-hull_energy">.*?</table>', text, re.S).group(0)
    assert re.search(r"<td[^>]*>recomputed</td><td[^>]*>float64</td><td[^>]*>eV/atom</td>", hull)


def html_escaped(value: str) -> str:
    import html

    return html.escape(value, quote=True)


def _tags(text: str) -> list[tuple[str, dict]]:
    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Tags().feed(text)
    return found


def test_an_older_run_by_id_and_the_errors(reported, tmp_path):
    first, _ = reported.runs
    out = tmp_path / "older"
    proc = _cli(reported.env, "report", "--run", first, "--out", out, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"run_id": first, "path": str(out / "index.html")}
    text = (out / "index.html").read_text(encoding="utf-8")
    rows = re.search(r'<table id="stage-table">.*?</table>', text, re.S).group(0)
    assert re.findall(r'<tr[^>]*><td class="l">([^<]*)</td>', rows) == _stages(reported.db, first)
    assert "This run did not validate" in text and text.count("This run did not run this analysis") >= 2
    assert "Throughput (last 1 run(s))" in text  # only runs up to this one
    # an unknown run: exit 64; a bad --runs: exit 64 (usage errors); a database without runs: exit 1; one line each
    for args, code, words in ((["--run", "run-nope"], 64, "no run 'run-nope'"), (["--runs", "0"], 64, "--runs"),):
        proc = _cli(reported.env, "report", *args, "--out", tmp_path / "x")
        assert proc.returncode == code and len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert proc.stderr.startswith("error: ") and words in proc.stderr, proc.stderr
    empty = {**reported.env, "SCI_INGEST_DB": f"t_empty_{uuid.uuid4().hex[:8]}"}
    proc = _cli(empty, "report", "--out", tmp_path / "y")
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == ["error: no runs recorded yet: "
                                                                         "`sci-ingest run` makes one"], proc.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@needs_browser
@pytest.mark.skipif(os.environ.get("SCI_INGEST_UPDATE_FIGURES") != "1",
                    reason="regenerates docs/figures/report.png only with SCI_INGEST_UPDATE_FIGURES=1")
def test_readme_figure(mongo_uri, mongo_client, tmp_path, monkeypatch, caplog):
    """The screenshot of docs/report.md: the page of a run of the bundled samples (what `make run` loads)."""
    name = "sci_ingest_readme_figure"  # shown on the page
    env = _env(mongo_uri, name, tmp_path / "home")
    mongo_client.drop_database(name)
    try:
        run = _cli(env, "run", "-q", timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        report = _cli(env, "report", "--out", tmp_path / "report")
        assert report.returncode == 0, report.stderr
        driver = _chromium(tmp_path, monkeypatch, caplog, width=1100)
        try:
            driver.get((tmp_path / "report" / "index.html").as_uri())
            assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
            _full_page_shot(driver, tmp_path / "shot.png", width=1100)
        finally:
            driver.quit()
        shutil.copyfile(tmp_path / "shot.png", FIGURE)
        assert FIGURE.stat().st_size > 50_000
    finally:
        mongo_client.drop_database(name)
