"""SimGrid peer: run a netsim JSON case through SimGrid's max-min network model.

Run by Debian's ``/usr/bin/python3`` (which has ``python3-simgrid`` 3.32), as a separate process::

    /usr/bin/python3 tests/peers/simgrid_peer.py CASE.json OUT.json [maxmin|lv08|cm02-gamma]

CASE.json is the netsim format of :mod:`topoopt.flowsim.netsim_json` without ``after``
(``{"links": [{"id", "capacity", "latency"}], "flows": [{"id", "bytes", "start", "paths":
[{"links", "weight"}]}]}``). OUT.json gets ``{"flows": [{"id", "finish"}], "wall_s", "version"}``.

How the case is mapped onto SimGrid (pure max-min, as in docs' flow-model notes):

- engine options: network/model CM02, crosstraffic 0, TCP-gamma 0, bandwidth- and latency-factor
  1, weight-S 0, and the timing precision (``surf/precision`` in 3.32) 1e-13 s;
- one SHARED link per case link (bandwidth = capacity, latency as given; compare with 0);
- every path of a flow is one communication of ``weight * bytes`` bytes (must be whole bytes:
  SimGrid takes integer sizes) started with ``Comm.sendto_async`` at the flow's start time by one
  controller actor; a flow's finish is the latest finish of its communications;
- SimGrid routes per (source, destination) host pair, so every distinct link list gets its own
  ordered pair of hosts in one Full zone with exactly that route: ``m`` hosts give ``m(m-1)``
  pairs, with ``m`` the smallest that covers the distinct routes. Hosts only name routes; they
  add no links.

Weighted sharing (optional ``"sharing_weight"`` per flow, a number > 0, default 1; all case
links must then have latency 0): SimGrid's CM02 gives every communication the LMM sharing
penalty "latency of its route" (plus ``weight-S`` terms, 0 here), and LMM shares a bottleneck in
proportion to ``1 / penalty``. When any flow has a weight, every route also crosses one private
FATPIPE link of its own (never a bottleneck: bandwidth twice the largest case capacity) with
latency ``LAT_UNIT / weight``, so the penalty is ``LAT_UNIT / weight`` and the share is
proportional to the weight. A communication first waits its latency (sharing nothing), so it is
started that much earlier: at ``start + shift - LAT_UNIT / weight`` with ``shift = LAT_UNIT /
min(weight)``, and ``shift`` is taken off every finish time. Weighted cases run with
``network/optim:Full`` (the lazy update mis-times actions whose penalty changes after their
latency phase).
"""

from __future__ import annotations

import json
import math
import sys
import time

import simgrid as sg

CFG = [
    "--cfg=network/model:CM02",
    "--cfg=network/crosstraffic:0",
    "--cfg=network/TCP-gamma:0",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/latency-factor:1",
    "--cfg=network/weight-S:0",
    "--cfg=surf/precision:1e-13",
    "--log=root.thresh:critical",
]

# Second opinions for the packet-level study (benchmarks/study_packet_level.py): SimGrid's
# models calibrated against packet-level TCP. LV08 is SimGrid's default (bandwidth factor 0.97,
# latency factor 13.01, TCP window 4 MiB bounding a flow's rate by gamma / (2 * RTT-latency),
# cross-traffic on); CM02 + gamma keeps exact bandwidth but adds the window bound.
LAT_UNIT = 1e-6
"""Seconds of route latency of a weight-1 communication in weighted cases (see the docstring)."""

WEIGHTED_CFG = ["--cfg=network/optim:Full"]
"""Extra engine options of weighted cases."""

MODELS = {
    "maxmin": CFG,
    "lv08": [
        "--cfg=network/model:LV08",
        "--cfg=surf/precision:1e-13",
        "--log=root.thresh:critical",
    ],
    "cm02-gamma": [
        "--cfg=network/model:CM02",
        "--cfg=network/crosstraffic:0",
        "--cfg=network/TCP-gamma:4194304",
        "--cfg=network/bandwidth-factor:1",
        "--cfg=network/latency-factor:1",
        "--cfg=surf/precision:1e-13",
        "--log=root.thresh:critical",
    ],
}


def run(case: dict, model: str = "maxmin") -> dict:
    t0 = time.perf_counter()
    weighted = any("sharing_weight" in fl for fl in case["flows"])
    # SimGrid's lazy update mis-times actions whose penalty is set after their latency phase
    # (measured: 1e-1 relative errors on fat-tree cases); the full update is exact.
    engine = sg.Engine(["simgrid_peer", *MODELS[model], *(WEIGHTED_CFG if weighted else [])])
    zone = sg.NetZone.create_full_zone("case")
    links = {}
    for i, link in enumerate(case["links"]):
        sl = zone.create_link(f"l{i}", float(link["capacity"]))
        sl.set_latency(float(link.get("latency", 0.0)))
        sl.set_sharing_policy(sg.Link.SharingPolicy.SHARED, None)
        links[json.dumps(link["id"])] = sl.seal()
    comms = []  # (start, flow index, route key, bytes)
    routes: dict[tuple, int] = {}
    weights = [float(fl.get("sharing_weight", 1.0)) for fl in case["flows"]]
    shift = 0.0
    if weighted:
        if any(not (w > 0 and math.isfinite(w)) for w in weights):
            raise SystemExit("sharing_weight: every weight must be a finite number > 0")
        if any(float(link.get("latency", 0.0)) != 0.0 for link in case["links"]):
            raise SystemExit("weighted cases need links of latency 0 (latency sets the weight)")
        shift = LAT_UNIT / min(weights)
        fat = 2.0 * max(float(link["capacity"]) for link in case["links"])
        private: dict[float, object] = {}
        for w in sorted(set(weights)):
            pl = zone.create_link(f"w{len(private)}", fat)
            pl.set_latency(LAT_UNIT / w)
            pl.set_sharing_policy(sg.Link.SharingPolicy.FATPIPE, None)
            private[w] = pl.seal()
    for f, flow in enumerate(case["flows"]):
        if flow.get("after"):
            raise SystemExit(f"flows[{f}].after: the SimGrid peer does not take dependencies")
        paths = flow["paths"]
        for p in paths:
            w = float(p.get("weight", 1.0 if len(paths) == 1 else math.nan))
            nbytes = w * float(flow["bytes"])
            if abs(nbytes - round(nbytes)) > 1e-9 * max(1.0, nbytes):
                raise SystemExit(f"flows[{f}]: sub-flow of {nbytes} bytes is not whole bytes")
            key = tuple(json.dumps(x) for x in p["links"])
            start = float(flow.get("start", 0.0))
            if weighted:  # the private latency link names the weight (see the docstring)
                key = (*key, weights[f])
                start = start + shift - LAT_UNIT / weights[f]
            routes.setdefault(key, len(routes))
            comms.append((start, f, key, int(round(nbytes))))
    m = 2
    while m * (m - 1) < len(routes):
        m += 1
    hosts = [zone.create_host(f"h{i}", 1e9).seal() for i in range(m)]
    pair = {}
    for key, k in routes.items():
        a, b = divmod(k, m - 1)
        b += b >= a
        pair[key] = (hosts[a], hosts[b])
        zone.add_route(
            hosts[a].netpoint,
            hosts[b].netpoint,
            None,
            None,
            [sg.LinkInRoute(links[x]) for x in key[:-1]] + [sg.LinkInRoute(private[key[-1]])]
            if weighted
            else [sg.LinkInRoute(links[x]) for x in key],
            False,
        )
    zone.seal()
    comms.sort(key=lambda c: c[0])
    started = []

    def controller():
        for start, f, key, nbytes in comms:
            if start > sg.Engine.clock:
                sg.this_actor.sleep_until(start)
            src, dst = pair[key]
            started.append((f, sg.Comm.sendto_async(src, dst, nbytes)))
        sg.Comm.wait_all([c for _, c in started])

    sg.Actor.create("controller", hosts[0], controller)
    engine.run()
    finish = [0.0] * len(case["flows"])
    for f, c in started:
        finish[f] = max(finish[f], c.finish_time - shift)
    return {
        "flows": [{"id": fl["id"], "finish": finish[i]} for i, fl in enumerate(case["flows"])],
        "wall_s": time.perf_counter() - t0,
        "version": sg.simgrid_version if hasattr(sg, "simgrid_version") else "unknown",
    }


def main(argv: list[str]) -> None:
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] not in MODELS):
        raise SystemExit(f"usage: simgrid_peer.py CASE.json OUT.json [{'|'.join(MODELS)}]")
    with open(argv[1]) as fh:
        case = json.load(fh)
    out = run(case, argv[3] if len(argv) == 4 else "maxmin")
    with open(argv[2], "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv)
