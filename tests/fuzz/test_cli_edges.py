"""Bad command lines end like bad files: exit 2, exactly one ``error:`` line, nothing on stdout.

Cases an outside fuzzer of the options found (issue 12): usage errors (a value of the wrong type,
an unknown choice or command, a missing option) printed a usage box; an integer beyond int64 or a
degree of 10**12 ended in ``OverflowError``/``MemoryError``; NaN options reached the results; a
FIFO given as a file blocked the read; progress lines came before the error line; a file name
too long for the system was a traceback.
"""

from __future__ import annotations

import os

import pytest
from fuzz_kinds import COMMAND, RUNNER, SEEDS

PLAN = str(SEEDS / "plan.json")


def _one_error_line(args: list[str]) -> str:
    r = RUNNER.invoke(COMMAND, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    lines = r.stderr.strip().splitlines()
    assert (r.exit_code, r.stdout) == (2, ""), (r.exit_code, r.stdout[:200], r.stderr[-300:])
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-500:]
    return lines[0]


@pytest.mark.parametrize(
    "args, names",
    [
        (["design", PLAN, "--degree", "x"], "--degree"),
        (["design", PLAN, "--fabric", "IDEAL"], "'IDEAL'"),
        (["traffic", PLAN, "--algorithm", "x" * 400], "--algorithm"),
        (["fabric", "nope"], "'nope'"),
        (["nope"], "'nope'"),
        (["traffic"], "PLAN"),
        (["fabric", "direct", "--servers", "8"], "--degree"),
        (["fabric", "ideal", "--servers", "8", "--degree", "9223372036854775808"], "--degree"),
        (["simulate", PLAN, "--fabric", "topoopt", "--degree", "1000000000000"], "--degree"),
        # more ports per server than any server has: ran for minutes (advise: its expander's
        # ring search) before a result or an unrelated error
        (["advise", PLAN, "--degree", "3000"], "--degree: got 3000; allowed: an integer from 1"),
        (["design", PLAN, "--degree", "257"], "--degree: got 257"),
        # limits past the machine's integers and timers: OverflowError tracebacks (exit 1) from
        # the kernel's work limit and from a pipe's poll
        (["design", PLAN, "--degree", "2", "--work-limit", "1e300"], "--work-limit: got 1e+300"),
        (["design", PLAN, "--degree", "2", "--time-limit", "1e300"], "--time-limit: got 1e+300"),
        (["compare", PLAN, "--fabrics", "ideal", "--time-limit", "1e9"], "at most 1,000,000 "),
        (["cosearch", "vgg16", "--servers", "8", "--work-limit", "1e10"], "--work-limit"),
        (["fabric", "hybrid", "--servers", "8", "--optical-degree", "300"], "--optical-degree"),
        (
            ["cluster", str(SEEDS / "cluster-jobs.yaml"), "--servers", "8", "--degree", "1024"],
            "--degree: got 1024",
        ),
        (["compare", PLAN, "--fabrics", "ideal", "--oversubscription", "nan"], "nan"),
        (["simulate", PLAN, "--fabric", "ideal", "--link-gbps", "inf"], "--link-gbps"),
        # the error comes after the first fabric's progress line: only the error is printed
        (["compare", PLAN, "--fabrics", "ideal,fat-tree", "--degree", "0", "--json"], "degree"),
        (["simulate", "x" * 300 + ".yaml", "--fabric", "ideal"], "x" * 50),
        # accepted before, and reported "gpus": -8
        (
            ["fabric", "expander", "--servers", "8", "--degree", "2", "--gpus-per-server", "-1"],
            "gpus_per_server",
        ),
        (["fabric", "ideal", "--servers", "8", "--gpus-per-server", "0"], "gpus_per_server"),
        (["cosearch", "vgg16", "--servers", "8", "--address", "1x1"], "address"),
        (["simulate", PLAN, "--fabric", "topoopt", "--degree", "2", "--seed", "-1"], "--seed"),
        (["fabric", "torus", "--dims", "3000x3000"], "9,000,000 servers"),  # ran for minutes
        # --efficiency: a fraction of the GPU's peak in [0.001, 1], on every command with --gpu
        (["simulate", PLAN, "--fabric", "ideal", "--efficiency", "0"], "--efficiency: got 0.0;"),
        (["compare", PLAN, "--fabrics", "ideal", "--efficiency", "-1"], "--efficiency: got -1"),
        (["design", PLAN, "--degree", "2", "--efficiency", "1.5"], "[0.001, 1]"),
        (["simulate", PLAN, "--fabric", "ideal", "--efficiency", "1e-300"], "got 1e-300;"),
        # rates and ratios past any hardware: one line naming the option (1e-300 Gbps ended as
        # "prices.nic_port: got 0.0", 1e300 as "port_bandwidth: got inf", a 1e300:1 ratio
        # built a 1:1 Clos)
        (["simulate", PLAN, "--fabric", "ideal", "--link-gbps", "1e-300"], "--link-gbps: got"),
        (["compare", PLAN, "--fabrics", "ideal", "--link-gbps", "1e300"], "0.001 to 1,000,000"),
        (
            [
                "collective",
                "--collective",
                "all-reduce",
                "--size",
                "1GB",
                "--fabric",
                "ideal",
                "--servers",
                "8",
                "--link-gbps",
                "1e-300",
            ],
            "--link-gbps: got 1e-300",
        ),
        (
            ["simulate", PLAN, "--fabric", "fat-tree-oversub", "--oversubscription", "1e300"],
            "--oversubscription: got 1e+300; allowed: a ratio from 1 to 1,024",
        ),
        # the experts' options on a model without experts were accepted and ignored; a load of
        # 1e308 overflowed math.fsum (a traceback)
        (["traffic", "vgg16-dp", "--set", "options.expert_load=[1,1]"], "without experts"),
        # design prices the switched fabrics it sizes only: on an optical design it was ignored
        (["design", PLAN, "--degree", "2", "--preset", "topoopt-paper"], "--preset: got"),
        (
            [
                "simulate",
                "gpt3-175b-32",
                "--fabric",
                "ideal",
                "--set",
                "options.capacity_factor=1.25",
            ],
            "options.capacity_factor: got 1.25",
        ),
        (
            ["traffic", "mixtral-8x7b", "--set", "options.expert_load=[1e308,1e308,1,1,1,1,1,1]"],
            "options.expert_load: got [1e+308, 1e+308",
        ),
        (["advise", PLAN, "--efficiency", "nan"], "--efficiency: got nan; allowed: a fraction"),
        (["cosearch", "vgg16", "--servers", "8", "--efficiency", "abc"], "--efficiency"),
        (
            ["simulate", PLAN, "--fabric", "ideal", "--gpu", "h100-sxm", "--efficiency", "inf"],
            "--efficiency: got inf",
        ),
        # --set KEY=VALUE: the plan validated again; on every command that reads one plan
        (["simulate", PLAN, "--fabric", "ideal", "--set", "parallelism.pp=3"], "parallelism"),
        (["compare", PLAN, "--fabrics", "ideal", "--set", "x" * 5000], "--set: got 'xxx"),
        (["advise", PLAN, "--set", "cluster.servers=10**20"], "cluster.servers"),
        (["traffic", PLAN, "--set", "parallelism.tp=.nan"], "parallelism.tp"),
        (["export", PLAN, "--format", "simai", "--out", "o.txt", "--set", "a.b=1"], "--set"),
        (["design", PLAN, "--degree", "2", "--set", "model.layers=-4"], "model.layers"),
        (["reconfig", PLAN, "--set", "parallelism.vpp=\x00"], "--set"),
    ],
)
def test_bad_command_line_is_one_error_line(args, names):
    line = _one_error_line(args)
    assert names in line and len(line) <= 400, line


def test_fifo_input_is_refused_not_read(tmp_path):
    fifo = tmp_path / "prices.yaml"
    os.mkfifo(fifo)
    line = _one_error_line(["fabric", "ideal", "--servers", "4", "--prices", str(fifo)])
    assert "FIFO" in line and str(fifo) in line


def test_success_still_shows_progress():
    """Held-back progress (stderr not a terminal) is printed when the command succeeds."""
    r = RUNNER.invoke(COMMAND, ["simulate", PLAN, "--fabric", "ideal", "--json"])
    assert r.exit_code == 0, r.stderr[-500:]
    assert "simulating" in r.stderr and r.stdout.lstrip().startswith("{")


def test_bare_group_still_prints_help():
    r = RUNNER.invoke(COMMAND, ["fabric"])
    assert "Usage" in r.stdout + r.stderr and "direct" in r.stdout + r.stderr


@pytest.mark.parametrize(
    "name, text",
    [
        ("huge.csv", "server,ports\n0,99999999999999999999\n"),  # was an OverflowError
        ("dup.json", '{"ports": [[0, 1]], "ports": [[1, 1]]}'),  # the last key won
        ("deep.json", '{"ports": ' + "[" * 5000 + "]" * 5000 + "}"),  # was a RecursionError
        ("nan.json", '{"ports": [[0, NaN]]}'),
        ("digit.csv", "server,ports\n\u0663,1\n"),  # an Arabic-Indic 3 was read as server 3
        ("underscore.csv", "server,ports\n0,1_0\n"),
        ("cr.csv", "\rserver,ports\n0,x\n"),  # csv.Error: new-line character in unquoted field
        ("wide.csv", "ser" + " " * 200_000 + "ver,ports\n0,1\n"),  # csv.Error: field limit
    ],
)
def test_bad_fail_ports_file_is_one_error_line(name, text, tmp_path):
    """``whatif --fail-ports`` files go through the strict decoder like every other input."""
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    design = str(SEEDS / "design.json")
    _one_error_line(["whatif", PLAN, "--design", design, "--fail-ports", str(f), "--json"])


def test_prewired_error_names_the_real_line_after_blank_lines(tmp_path):
    """Blank lines before the header are skipped in one pass (dropping them one by one was
    quadratic: a million of them hung), and the line numbers stay those of the file."""
    f = tmp_path / "p.csv"
    f.write_text("\n" * 1000 + "u,v,count\n0,1,1\n0,1,x\n")
    args = ["design", PLAN, "--degree", "2", "--solver", "topoopt", "--prewired", str(f)]
    assert f"{f} line 1003 count" in _one_error_line(args)


@pytest.mark.parametrize(
    "table, said",
    [
        ("switch_port: {100: {capex_usd: 0, power_w: 0}}\n", "a positive switch_port price"),
        (
            "nic_port: {100: {capex_usd: 0, power_w: 0}}\n"
            "transceiver: {100: {capex_usd: 0, power_w: 0}}\n"
            "patch_panel_port: {capex_usd: 0, power_w: 0}\nfibre: {capex_usd: 0, power_w: 0}\n",
            "in which the topoopt design costs more than 0 USD",
        ),
        (  # no model of the catalogue builds a Clos: "optical-faster ... against inf ms"
            'switch_catalogue: [{name: "tiny", radix: 3, gbps: 100}]\n',
            "a switch catalogue with a model that builds a Clos of",
        ),
    ],
)
def test_breakeven_on_a_free_price_table_is_one_line(table, said, tmp_path):
    """A price the breakeven scales at 0 (every factor: 0, "0 to 0 USD"), or a design that costs
    nothing (no fat-tree of equal capex: "against inf ms") is one line, exit 2."""
    prices = tmp_path / "p.yaml"
    prices.write_text(table)
    line = _one_error_line(["breakeven", PLAN, "--solver", "topoopt", "--prices", str(prices)])
    assert line.startswith("error: --prices: got ") and said in line
