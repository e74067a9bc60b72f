"""``compare --html`` in a real browser (headless Chromium, issue 28): the verdict block is
drawn at the top of the page, above the table and the figures, inside the first screen, and its
pixels in a screenshot hold text (not a blank or hidden box).

The page's geometry is read by a probe script appended to a copy of the report (the report
itself is never changed): once plotly has drawn, it writes the bounding boxes of the verdict,
the summary table and the first figure into the DOM, which ``--dump-dom`` returns.

Observed (2026-12-02, Chromium headless, 1280 x 900, DLRM on 4 fabrics with 4 ports): the page
opens with its title and a one-line summary; the verdict is a tinted block with a green left
border at (24, 116), 1200 x 128 px, three sentences (equal capex, fastest overall with the ideal
switch named as a bound, the binding class and link), 5.6 % of its pixels ink; the summary table
follows at y = 260 and the first figure (iteration time vs capex, the ideal switch as a dotted
line labelled "a bound, not a product") below it, all within the first screen."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from PIL import Image
from test_browser import _chromium
from typer.testing import CliRunner

from topoopt.app.cli.app import app

WIDTH, HEIGHT = 1280, 900

PROBE = """
<script>
window.addEventListener("load", () => setTimeout(() => {
  const box = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    return {top: r.top, left: r.left, width: r.width, height: r.height,
            display: s.display, visibility: s.visibility, opacity: s.opacity,
            text: el.innerText}; };
  const out = {verdict: box(document.getElementById("verdict")),
               table: box(document.querySelector("table.summary")),
               figure: box(document.querySelector(".plotly-graph-div")),
               dpr: window.devicePixelRatio};
  const pre = document.createElement("pre");
  pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500));
</script>
"""


@pytest.fixture(scope="module")
def compare_html(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare-html") / "compare.html"
    r = CliRunner().invoke(
        app,
        ["compare", "dlrm", "--fabrics", "ideal,fat-tree,topoopt,fat-tree-cost-equivalent",
         "--degree", "4", "--html", str(out)],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def geometry(compare_html, tmp_path_factory) -> dict:
    """The probe's bounding boxes of the verdict, the summary table and the first figure."""
    return _geometry(compare_html, tmp_path_factory.mktemp("probe"))


def _geometry(page, tmp_path) -> dict:
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    r = _chromium([f"--window-size={WIDTH},{HEIGHT}", "--dump-dom", probed.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', r.stdout, re.S)
    assert m, "the probe did not run"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_verdict_is_visible_at_the_top(geometry):
    g = geometry
    v, table, fig = g["verdict"], g["table"], g["figure"]
    assert v is not None and table is not None and fig is not None
    assert v["visibility"] == "visible" and v["display"] != "none" and float(v["opacity"]) > 0
    assert v["width"] > 0.5 * WIDTH and v["height"] >= 40  # three sentences, drawn
    # the first thing on the page: inside the first screen, above the table and every figure
    assert 0 <= v["top"] < 0.25 * HEIGHT
    assert v["top"] + v["height"] <= table["top"] <= fig["top"]
    assert v["text"].startswith("At equal capex")
    assert "a bound, not a product" in v["text"]


def test_verdict_pixels_hold_text(compare_html, geometry, tmp_path):
    g = geometry
    v, dpr = g["verdict"], g["dpr"]
    shot = tmp_path / "shot.png"
    r = _chromium(
        [f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", compare_html.as_uri()], tmp_path
    )
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = Image.open(shot).convert("L")
    assert img.size == (round(WIDTH * dpr), round(HEIGHT * dpr))
    box = tuple(round(x * dpr) for x in (
        v["left"], v["top"], v["left"] + v["width"], v["top"] + v["height"]))  # fmt: skip
    ink = np.asarray(img) < 128  # glyphs: dark on a light background
    region = ink[box[1] : box[3], box[0] : box[2]]
    dark = float(region.mean())
    # three lines of text cover a few per cent of their box; an empty box has none
    assert 0.01 < dark < 0.5, dark
    # the text alone (the block's left border, 10 px, left out): three lines of glyphs at
    # least 8 px high, with blank rows between them
    text_rows = region[:, round(10 * dpr) :].any(axis=1)
    rows_with_ink = int(text_rows.sum())
    assert 3 * 8 * dpr <= rows_with_ink < 0.8 * region.shape[0], rows_with_ink
    starts = np.flatnonzero(np.diff(text_rows.astype(int)) == 1)
    assert len(starts) >= 3, starts  # at least three separate lines of text
    # the block stands out: its background is tinted (not the page's white) ...
    rgb = np.asarray(Image.open(shot).convert("RGB"))[box[1] : box[3], box[0] : box[2]]
    background = np.median(rgb.reshape(-1, 3), axis=0)
    assert tuple(background) != (255, 255, 255) and background.min() > 200, background
    # ... above it only the page's title and one line; below it the table is drawn
    assert ink[: box[1]].any(axis=1).sum() < 0.6 * box[1]
    assert ink[box[3] :].any()
    print(
        f"verdict box {v['left']:.0f},{v['top']:.0f} {v['width']:.0f}x{v['height']:.0f} px of "
        f"{WIDTH}x{HEIGHT}; ink {dark:.1%} of its pixels, {rows_with_ink} rows with ink"
    )
