"""The anchors' own configurations (benchmarks/bench_anchors.py, issue 26 item 5) against hand
counts: the TPU v4 pod's optical share and its break-even figures, a small Jupiter-style pair
(spine blocks against an OCS layer) counted switch by switch, and MixNet's Mixtral 8x22B plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoopt.fabrics.catalogue import SwitchModel
from topoopt.fabrics.cost import load_prices
from traffic.plan import load_plan

ROOT = Path(__file__).resolve().parents[2]
P = load_prices()


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("bench_anchors")


def test_tpu_v4_share_and_break_even_by_hand(bench):
    """4,096 chips, 48 OCS x 136 ports, 96 optical ports a cube x 64 cubes (ISCA'23)."""
    r = bench.tpu_v4()
    ocs, tr, fib = P.unit("ocs_port"), P.unit("transceiver", 400), P.unit("fibre")
    acc = P.unit("accelerator")
    optics_c = 48 * 136 * ocs[0] + 6144 * (tr[0] + fib[0])
    optics_p = 48 * 136 * ocs[1] + 6144 * tr[1]
    rest_c = 9216 * P.unit("copper_cable")[0]  # 3 x 4,096 torus links less the 3,072 optical
    assert r["optics_capex_usd"] == pytest.approx(optics_c)
    assert r["network_capex_usd"] == pytest.approx(optics_c + rest_c)
    system_c = optics_c + rest_c + 4096 * acc[0]
    system_p = optics_p + 4096 * acc[1]
    assert r["capex_share"] == pytest.approx(optics_c / system_c)
    assert r["power_share"] == pytest.approx(optics_p / system_p)
    # at the break-even accelerator, the share is exactly the paper's 5 % (capex), 3 % (power)
    a = r["break_even_accelerator_usd"]
    assert optics_c / (optics_c + rest_c + 4096 * a) == pytest.approx(0.05)
    w = r["break_even_accelerator_w"]
    assert optics_p / (optics_p + 4096 * w) == pytest.approx(0.03)
    # optics scaled by the break-even factor: 5 % of the system with the default accelerator
    f = r["break_even_optics_price_factor"]
    assert f * optics_c / (f * optics_c + rest_c + 4096 * acc[0]) == pytest.approx(0.05)
    g = r["break_even_optics_power_factor"]
    assert g * optics_p / (g * optics_p + 4096 * acc[1]) == pytest.approx(0.03)


def test_tpu_v4_chip_power_replaces_only_the_accelerator(bench):
    chip = bench.with_accelerator(P, 12000.0, bench.TPU_V4_MAX_POWER_W, "test")
    a, b = bench.tpu_v4(P), bench.tpu_v4(chip)
    assert b["network_capex_usd"] == a["network_capex_usd"]
    assert b["optics_power_w"] == a["optics_power_w"]
    assert b["power_share"] == pytest.approx(
        a["optics_power_w"] / (a["optics_power_w"] + 4096 * 192.0)
    )


def test_jupiter_pair_small_case_by_hand(bench):
    """4 blocks of 16 uplinks (64 servers of one port) on 8-port 100 G switches.

    Clos: 16 leaves of 4 servers, 4 pods of 4 leaves and 4 aggregation switches, 8 cores of 8
    ports; 64 host + 64 leaf-aggregation + 64 aggregation-core cables. OCS layer: the same
    leaves and aggregation switches, one 136-port OCS holding the 64 uplinks as 32 circuits.
    """
    r = bench.jupiter_pair(SwitchModel("8x100G", 8, 100.0), blocks=4, uplinks=16)
    nic, tr, sw = P.unit("nic_port", 100), P.unit("transceiver", 100), P.unit("switch_port", 100)
    fib, ocs = P.unit("fibre"), P.unit("ocs_port")
    clos = 64 * nic[0] + 384 * tr[0] + 40 * 8 * sw[0] + 192 * fib[0]
    opt = 64 * nic[0] + 320 * tr[0] + 32 * 8 * sw[0] + 192 * fib[0] + 136 * ocs[0]
    assert r["clos"].capex_usd == pytest.approx(clos)
    assert r["ocs"].capex_usd == pytest.approx(opt)
    assert r["clos_shape"]["cores"] == 8 and r["ocs_shape"]["circuits"] == 32
    # the two differ only above the aggregation switches
    (sc, sp), (lc, lp) = r["spine_layer"], r["ocs_layer"]
    assert sc == pytest.approx(64 * sw[0] + 64 * (2 * tr[0] + fib[0]))
    assert lc == pytest.approx(136 * ocs[0] + 64 * (tr[0] + fib[0]))
    assert r["clos"].capex_usd - sc == pytest.approx(r["ocs"].capex_usd - lc)
    assert r["clos"].power_w - sp == pytest.approx(r["ocs"].power_w - lp)


def test_mixnet_plan_is_the_published_job():
    """MixNet's Mixtral-8x22B: dp 2 x tp 8 x pp 8 x ep 8 on 1,024 GPUs, batch 128, 8 micro-batches
    a pipeline."""
    p = load_plan(ROOT / "tests" / "data" / "anchors" / "mixnet-mixtral-8x22b.yaml")
    m, par = p.model, p.parallelism
    assert (m.layers, m.hidden, m.ffn, m.experts, m.top_k) == (56, 6144, 16384, 8, 2)
    assert (p.gpus, par.tp, par.pp, p.dp, par.ep, par.etp) == (1024, 8, 8, 16, 8, 8)
    assert p.gpus // (par.ep * par.etp * par.pp) == 2  # MixNet's dp 2 of the experts
    assert p.global_batch == 128 and p.micro_batches == 8
