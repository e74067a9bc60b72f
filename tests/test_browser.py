"""The demo report renders in a real browser (headless Chromium): every figure container is
drawn, the console shows no JavaScript error, and a screenshot is not blank."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from topoopt.app.studies.demo import DEMO_DEGREES, DEMO_FABRICS, DEMO_PLANS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=20000",
]


class _Divs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.divs: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and "id" in a:
            self.divs[a["id"]] = a.get("class") or ""


def _divs(text: str) -> dict[str, str]:
    p = _Divs()
    p.feed(text)
    return p.divs


@pytest.fixture(scope="module")
def report(demo_run) -> Path:
    assert demo_run.proc.returncode == 0, demo_run.proc.stderr[-3000:]
    return demo_run.report


def _chromium(args, tmp_path):
    assert Path(CHROMIUM).exists(), (
        "Chromium is missing: run `make setup` (installs Debian chromium)"
    )
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_figure_is_rendered_without_console_errors(report, tmp_path):
    source = report.read_text()
    figures = [k for k, cls in _divs(source).items() if "plotly-graph-div" in cls]
    assert len(figures) >= 2
    r = _chromium(["--enable-logging=stderr", "--v=0", "--dump-dom", report.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rendered = _divs(r.stdout)
    for fid in figures:
        # plotly.js marks a drawn figure with the class js-plotly-plot
        assert "js-plotly-plot" in rendered.get(fid, ""), f"figure {fid} was not rendered"
    assert r.stdout.count("main-svg") >= 2 * len(figures)
    # the summary table is drawn first, above every figure, with a row per plan/ports/fabric
    dom = r.stdout
    top = dom.index('<table class="summary">')
    assert top < min(dom.index(f'id="{fid}"') for fid in figures)
    # the verdict (generated sentences) opens the page, above the table
    verdict = dom.index('id="verdict"')
    assert verdict < top
    said = re.sub(r"<[^>]+>", " ", dom[verdict : dom.index("</div>", verdict)])
    assert said.count("At equal capex") == len(DEMO_PLANS) * len(DEMO_DEGREES)
    # one table per plan (each in its own time unit), a row per ports/fabric, best rows marked
    tables = re.findall(r'<table class="summary">(.*?)</table>', dom, re.S)
    assert len(tables) == len(DEMO_PLANS)
    rows = sum(len(re.findall(r"<tr[ >]", t)) for t in tables)  # best rows: <tr class="best">
    assert rows == len(DEMO_PLANS) * (1 + len(DEMO_DEGREES) * len(DEMO_FABRICS))
    assert all('<tr class="best">' in t for t in tables)
    console = [ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln]
    errors = [ln for ln in console if re.search(r"error|uncaught|exception", ln, re.I)]
    assert not errors, "\n".join(errors)


def test_console_capture_sees_errors(tmp_path):
    # the check above can fail: a page with a JavaScript error is caught by the same capture
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    r = _chromium(["--enable-logging=stderr", "--v=0", "--dump-dom", bad.as_uri()], tmp_path)
    assert any("Uncaught" in ln for ln in r.stderr.splitlines() if ":CONSOLE" in ln)


def test_screenshot_is_not_blank(report, tmp_path):
    shot = tmp_path / "shot.png"
    r = _chromium(["--window-size=1280,2000", f"--screenshot={shot}", report.as_uri()], tmp_path)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # a blank page has one or two colours
    white = sum(c for c, rgb in colours if rgb == (255, 255, 255))
    assert white < 0.95 * img.width * img.height
