"""The anchor rows added in session 39 (benchmarks/bench_anchors.py, docs/anchors.md) against
hand derivations: Jupiter at 40 G (the largest three-tier Clos of the 32x40G switch against its
OCS layer), DELTA's two figures (circuits in use, communication and ports saved) and the plans
of MixNet's other models (parameter counts layer by layer)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from topoopt.fabrics.cost import load_prices
from traffic.models.megatron import model_parameters
from traffic.plan import load_plan

ROOT = Path(__file__).resolve().parents[2]
ANCHORS = ROOT / "tests" / "data" / "anchors"
P = load_prices()


@pytest.fixture(scope="module")
def bench(bench_script):
    return bench_script("bench_anchors")


def test_jupiter_40g_by_hand(bench):
    """32 blocks of 256 uplinks on 32x40G switches (8,192 one-port servers).

    Clos: 512 leaves, 32 pods of 16 aggregation switches, 256 cores, all of 32 ports; three
    cable layers of 8,192 (a transceiver at each end, one fibre). OCS layer: the same leaves and
    aggregation switches, no cores, a transceiver per circuit end, 64 OCSes of 136 ports.
    """
    model = bench.MODELS[40.0]
    assert (model.radix, model.gbps) == (32, 40.0)
    with pytest.raises(ValueError, match="no three-tier Clos"):
        bench.jupiter_pair(model)  # 64 x 512 = 32,768 servers > 32**3 / 4
    r = bench.jupiter_pair(model, blocks=32, uplinks=256)
    n = 8192
    nic, tr, sw = P.unit("nic_port", 40), P.unit("transceiver", 40), P.unit("switch_port", 40)
    fib, ocs = P.unit("fibre"), P.unit("ocs_port")
    clos = n * nic[0] + 6 * n * tr[0] + (512 + 512 + 256) * 32 * sw[0] + 3 * n * fib[0]
    # an uplink is priced (transceiver, fibre) when it ends a circuit: 64 OCSes of 4 ports a
    # pod hold at most 64 x 128 / 2 = 4,096 circuits among 32 pods
    c = r["ocs_shape"]["circuits"]
    assert 4096 - 64 <= c <= 4096
    opt = (
        n * nic[0] + (4 * n + 2 * c) * tr[0] + (512 + 512) * 32 * sw[0]
        + (2 * n + 2 * c) * fib[0] + 64 * 136 * ocs[0]
    )  # fmt: skip
    assert r["clos"].capex_usd == pytest.approx(clos)
    assert r["ocs"].capex_usd == pytest.approx(opt)
    assert r["clos_shape"]["cores"] == 256 and r["ocs_shape"]["ocses"] == 64
    # the OCS layer costs more than the spine it replaces at 40 G: $500 an OCS port against a
    # $150 switch port and a $40 transceiver
    assert r["ocs"].capex_usd > r["clos"].capex_usd
    assert r["ocs"].power_w < r["clos"].power_w
    (sc, _), (lc, _) = r["spine_layer"], r["ocs_layer"]
    assert sc == pytest.approx(256 * 32 * sw[0] + n * (2 * tr[0] + fib[0]))
    assert lc == pytest.approx(64 * 136 * ocs[0] + 2 * c * (tr[0] + fib[0]))


def test_delta_circuit_use_by_hand(bench):
    """Three server pairs: 0-1 with 2 circuits busy one way, 1-2 with 1 circuit idle both ways,
    0-2 with 3 circuits busy the other way; 100 bytes/s a circuit."""
    fab = SimpleNamespace(optical_port_bandwidth=100.0)
    links = pd.DataFrame(
        {
            "kind": ["optical"] * 6 + ["intra"],
            "src": [0, 1, 1, 2, 0, 2, 0],
            "dst": [1, 0, 2, 1, 2, 0, 0],
            "capacity": [200.0, 200.0, 100.0, 100.0, 300.0, 300.0, 1e9],
            "bytes": [5.0, 0.0, 0.0, 0.0, 0.0, 7.0, 9.0],
        }
    )
    u = bench.circuit_use(fab, links)
    assert u == {"circuits": 6, "idle_circuits": 1, "ports_in_use": 10}


def test_delta_summary_by_hand(bench):
    def row(f, d, it, comm):  # 0.5 s of tensor parallelism on NVLink in every row
        return {
            "fabric": f, "degree": d, "iteration_s": it, "comm_s": comm,
            "comm_by_class": {"tp": 0.5, "dp": comm - 0.5},
        }  # fmt: skip

    rows = [
        row("ideal", 8, 9.0, 1.0), row("topoopt", 8, 10.0, 2.0), row("joint", 8, 9.8, 1.8),
        row("ideal", 6, 9.1, 1.1), row("topoopt", 6, 10.5, 2.5), row("joint", 6, 9.95, 1.95),
        row("ideal", 5, 9.2, 1.2), row("topoopt", 5, 11.0, 3.0), row("joint", 5, 10.2, 2.2),
    ]  # fmt: skip
    s = bench.delta_summary(rows, 8)
    assert s["comm_saved"] == pytest.approx(1 - 1.8 / 2.0)
    assert s["iteration_saved"] == pytest.approx(1 - 9.8 / 10.0)
    assert s["ideal_comm_saved"] == pytest.approx(0.5)
    assert s["network_comm_saved"] == pytest.approx(1 - 1.3 / 1.5)
    assert s["ideal_network_comm_saved"] == pytest.approx(1 - 0.5 / 1.5)
    assert s["fewest_ports"] == 6  # 9.95 <= 10.0; 10.2 > 10.0
    assert s["ports_saved"] == pytest.approx(0.25)


def test_mixnet_other_models_by_hand():
    """Parameters layer by layer: attention 4 h^2, two RMSNorms, the router h E, the experts
    3 h f E (SwiGLU), Qwen's shared expert 3 h (4 f); untied embeddings 2 V h, a final norm."""
    h, f, e, layers, v = 4096, 688, 16, 32, 32000
    per = 4 * h * h + 2 * h + h * e + 3 * h * f * e
    llama = load_plan(ANCHORS / "mixnet-llama-moe.yaml")
    assert model_parameters(llama.model) == layers * per + 2 * v * h + h == 6_740_512_768
    h, f, e, layers, v = 2048, 1408, 60, 24, 151936
    per = 4 * h * h + 2 * h + h * e + 3 * h * f * e + 3 * h * 4 * f
    qwen = load_plan(ANCHORS / "mixnet-qwen-moe.yaml")
    assert model_parameters(qwen.model) == layers * per + 2 * v * h + h == 14_315_587_584
    for p, ep in ((llama, 8), (qwen, 4)):
        par = p.parallelism
        assert (p.gpus, par.tp, par.pp, p.dp, par.ep, p.etp) == (1024, 8, 8, 16, ep, 8)
        assert p.global_batch == 128 and p.micro_batches == 8
    mix = load_plan(ANCHORS / "mixnet-mixtral-8x7b.yaml")
    assert (mix.model.layers, mix.model.experts, mix.model.top_k, mix.parallelism.ep) == (
        32, 8, 2, 8,
    )  # fmt: skip
