"""Progress when stderr is not a terminal (nohup, CI): plain lines as the work goes, each once."""

from __future__ import annotations

import io

from typer.testing import CliRunner

from topoopt.app.cli import common
from topoopt.app.cli.app import app
from topoopt.app.cli.common import PlainProgress


def test_one_line_per_interval_and_the_rest_at_the_end():
    out, now = io.StringIO(), [0.0]
    p = PlainProgress(out, every_s=5.0, clock=lambda: now[0])
    for t in (1.0, 4.9, 5.0, 6.0, 9.9, 10.0, 10.5):  # a line at each time
        now[0] = t
        p.write(f"at {t}\n")
    # sent: the first line at >= 5 s after the start (5.0), then the first >= 5 s after that
    assert out.getvalue() == "at 5.0\nat 10.0\n"
    assert p.rest() == "at 1.0\nat 4.9\nat 6.0\nat 9.9\nat 10.5\n"
    assert sorted((out.getvalue() + p.rest()).splitlines()) == sorted(p.getvalue().splitlines())


def test_cli_progress_goes_out_while_it_runs(tmp_path, monkeypatch):
    """With stderr a pipe and a 0 s interval every progress line is written as it happens (the
    sink sees it before the command ends) and none is written twice."""
    seen_during = []
    real_write = PlainProgress.write

    def spy(self, s):
        n = real_write(self, s)
        seen_during.append(len(self._sent))  # lines already written to the real stderr
        return n

    monkeypatch.setattr(common, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(PlainProgress, "write", spy)
    plan = tmp_path / "p.yaml"
    plan.write_text(
        "model: llama2-7b\n"
        "parallelism: {tp: 1, pp: 1, dp: 8, micro_batch_size: 1, global_batch_size: 16}\n"
        "cluster: {servers: 8, gpus_per_server: 1}\n"
    )
    res = CliRunner().invoke(app, ["compare", str(plan), "--fabrics", "ideal,fat-tree", "--json"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("[")]
    want = [
        "[1/2] ideal: building",
        "[1/2] ideal: simulating",
        "[1/2] ideal: done, iteration ",  # then the time, capex, build and simulate seconds
        "[2/2] fat-tree: building",
        "[2/2] fat-tree: simulating",
        "[2/2] fat-tree: done, iteration ",
    ]
    assert len(lines) == len(want)
    assert [ln[: len(w)] for ln, w in zip(lines, want, strict=True)] == want
    assert " USD (build " in lines[5] and lines[5].endswith(" s)")
    # each line went out as it was written (print writes the text, then the newline)
    assert seen_during.index(1) < seen_during.index(2) < seen_during.index(4)


# ------------------------------------------------------------------ on a terminal (issue 28)
def test_bar_with_eta_on_a_terminal():
    """A forced terminal: the bar counts the ``[k/N]`` steps, shows the elapsed time and the
    ETA, and prints every message above itself as written."""
    import re

    from rich.console import Console

    from topoopt.app.cli.common import CommandProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    with CommandProgress("compare", terminal=True, console=console) as p:
        p("[1/4] ideal: building")
        p("[2/4] fat-tree: building")
        task = p._bar.tasks[0]
        assert (task.total, task.completed) == (4, 1)  # step 2 of 4 started: 1 done
        p.advance()
        assert task.completed == 2
        p._bar.refresh()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "[1/4] ideal: building" in text and "[2/4] fat-tree: building" in text
    frame = next(ln for ln in text.splitlines() if "2/4" in ln and "ETA" in ln)
    assert re.search(
        r"compare: fat-tree: building .*2/4 +\d:\d\d:\d\d ETA (\d:\d\d:\d\d|-:--:--)", frame
    )


def test_cli_bar_on_a_terminal(monkeypatch):
    """``compare`` on a (forced) terminal draws the bar with the ETA column on stderr; stdout
    is still exactly one JSON document."""
    import json
    import re

    monkeypatch.setenv("TOPOOPT_PROGRESS", "1")  # stderr written live, not held
    monkeypatch.setattr(common, "_is_terminal", lambda _stream: True)
    res = CliRunner().invoke(app, ["compare", "dlrm", "--fabrics", "ideal,fat-tree", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["command"] == "compare"
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", res.stderr)
    assert "[2/2] fat-tree: simulating" in text
    assert re.search(r"compare: .*\d/2 .*ETA", text), text[-2000:]


def test_no_bar_off_a_terminal():
    out = io.StringIO()
    from rich.console import Console

    from topoopt.app.cli.common import CommandProgress

    with CommandProgress("design", terminal=False, console=Console(file=out)) as p:
        p("joint: incumbent 12 ms")
        p.advance()
        p.total(3)
    assert out.getvalue() == "joint: incumbent 12 ms\n"  # the line only: no bar, no codes
