"""ns-3 peer: packet-level TCP finish times for flows on an explicit topology.

Run by the interpreter of the ``ns3`` wheel's virtual environment (``make ns3-peer`` makes
``.venv-ns3``), as a separate process::

    .venv-ns3/bin/python tests/peers/ns3_peer.py CASES.json OUT.json

CASES.json is a list of cases ``{"name", "nodes", "links": [{"u", "v", "bandwidth" (bytes/s),
"latency" (s)}], "flows": [{"id", "bytes", "start", "path": [node, ...]}]}``; OUT.json gets
``[{"name", "flows": [{"id", "finish"}], "wall_s", "events"}]``.

How a case is built: one node per topology node, one point-to-point link per link (data rate =
bandwidth, delay = latency, DropTail queue of ``QUEUE`` packets), the Internet stack everywhere
(global routing for the links' own subnets).
Every flow gets its own destination address (an alias on the destination host's interface) and
its own source address, with static host routes along its ``path`` (and the reverse path for its
ACKs) on every node it crosses: each flow follows exactly the path the flow model gives it. A
``BulkSendApplication`` sends the flow's bytes over TCP from ``start`` (64 KiB writes); its
finish is the time the destination's ``PacketSink`` has received the last byte. TCP: ns-3's
default congestion control (CUBIC in 3.44), 1448-byte segments, 8 MiB socket buffers (the
window never limits at these RTTs), minimum RTO 1 ms (datacenter-like; ns-3's default of 1 s
would turn every tail drop into a second of idle time).
"""

from __future__ import annotations

import json
import sys
import time

QUEUE = "1000p"
MIN_RTO_S = 1e-3
SEND_SIZE = 64 << 10  # bytes the application hands TCP per write


def _setup():
    import cppyy
    from ns import ns

    cppyy.cppdef(
        """
        #include "ns3/packet-sink.h"
        #include "ns3/simulator.h"
        namespace topoopt_peer {
          std::vector<double> finish;
          std::vector<uint64_t> target;
          std::vector<uint64_t> got;
          void OnRx(uint32_t f, ns3::Ptr<const ns3::Packet> p, const ns3::Address&) {
            got[f] += p->GetSize();
            if (got[f] >= target[f] && finish[f] < 0) {
              finish[f] = ns3::Simulator::Now().GetSeconds();
            }
          }
          void Watch(ns3::Ptr<ns3::Application> app, uint32_t f, uint64_t bytes) {
            if (finish.size() <= f) { finish.resize(f + 1, -1.0); target.resize(f + 1, 0);
                                      got.resize(f + 1, 0); }
            finish[f] = -1.0; target[f] = bytes; got[f] = 0;
            ns3::Ptr<ns3::PacketSink> s = ns3::DynamicCast<ns3::PacketSink>(app);
            s->TraceConnectWithoutContext("Rx", ns3::MakeBoundCallback(&OnRx, f));
          }
          void Reset() { finish.clear(); target.clear(); got.clear(); }
        }
        """
    )
    return ns, cppyy.gbl.topoopt_peer


def run_case(ns, peer, case: dict) -> dict:
    t0 = time.perf_counter()
    peer.Reset()
    ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
    ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(8 << 20))
    ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(8 << 20))
    ns.Config.SetDefault("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.Seconds(MIN_RTO_S)))
    nodes = ns.NodeContainer()
    nodes.Create(int(case["nodes"]))
    ns.InternetStackHelper().Install(nodes)
    p2p = ns.PointToPointHelper()
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.QueueSizeValue(ns.QueueSize(QUEUE)))
    addr = ns.Ipv4AddressHelper()
    addr.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    # (u, v) -> (interface index at u, address of v on that link)
    hop: dict[tuple[int, int], tuple[int, object]] = {}
    for lk in case["links"]:
        u, v = int(lk["u"]), int(lk["v"])
        p2p.SetDeviceAttribute("DataRate", ns.StringValue(f"{int(lk['bandwidth'] * 8)}bps"))
        p2p.SetChannelAttribute("Delay", ns.StringValue(f"{int(round(lk['latency'] * 1e9))}ns"))
        pair = ns.NodeContainer()
        pair.Add(nodes.Get(u))
        pair.Add(nodes.Get(v))
        dev = p2p.Install(pair)
        ifc = addr.Assign(dev)
        addr.NewNetwork()
        iu = nodes.Get(u).GetObject[ns.Ipv4]().GetInterfaceForDevice(dev.Get(0))
        iv = nodes.Get(v).GetObject[ns.Ipv4]().GetInterfaceForDevice(dev.Get(1))
        hop[(u, v)] = (iu, ifc.GetAddress(1))
        hop[(v, u)] = (iv, ifc.GetAddress(0))
    routing = ns.Ipv4StaticRoutingHelper()
    mask = ns.Ipv4Mask("255.255.255.255")

    def alias(node: int, via: int, k: int):
        """A fresh /32 address on ``node``'s interface towards ``via``."""
        a = ns.Ipv4Address(f"11.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255}")
        ip = nodes.Get(node).GetObject[ns.Ipv4]()
        ip.AddAddress(hop[(node, via)][0], ns.Ipv4InterfaceAddress(a, mask))
        return a

    def route(path: list[int], dest) -> None:
        for a, b in zip(path[:-1], path[1:], strict=True):
            iface, nxt = hop[(a, b)]
            sr = routing.GetStaticRouting(nodes.Get(a).GetObject[ns.Ipv4]())
            sr.AddHostRouteTo(dest, nxt, iface)

    k = 1
    for f in case["flows"]:
        path = [int(x) for x in f["path"]]
        src, dst = path[0], path[-1]
        a_dst = alias(dst, path[-2], k)
        a_src = alias(src, path[1], k + 1)
        k += 2
        route(path, a_dst)
        route(path[::-1], a_src)
        port = 10000 + int(f["id"]) % 50000
        sink = ns.PacketSinkHelper(
            "ns3::TcpSocketFactory", ns.InetSocketAddress(a_dst, port).ConvertTo()
        )
        sapp = sink.Install(nodes.Get(dst))
        sapp.Start(ns.Seconds(0.0))
        peer.Watch(sapp.Get(0), int(f["id"]), int(f["bytes"]))
        bulk = ns.BulkSendHelper(
            "ns3::TcpSocketFactory", ns.InetSocketAddress(a_dst, port).ConvertTo()
        )
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(int(f["bytes"])))
        bulk.SetAttribute("SendSize", ns.UintegerValue(SEND_SIZE))
        bulk.SetAttribute("Local", ns.AddressValue(ns.InetSocketAddress(a_src, 0).ConvertTo()))
        bapp = bulk.Install(nodes.Get(src))
        bapp.Start(ns.Seconds(float(f["start"])))
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()  # the links' own subnets, for the rest
    ns.Simulator.Stop(ns.Seconds(float(case.get("stop_s", 10.0))))
    ns.Simulator.Run()
    finish = [float(peer.finish[int(f["id"])]) for f in case["flows"]]
    ns.Simulator.Destroy()
    return {
        "name": case["name"],
        "flows": [{"id": f["id"], "finish": t} for f, t in zip(case["flows"], finish, strict=True)],
        "wall_s": time.perf_counter() - t0,
    }


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise SystemExit("usage: ns3_peer.py CASES.json OUT.json")
    with open(argv[1]) as fh:
        cases = json.load(fh)
    ns, peer = _setup()
    out = [run_case(ns, peer, c) for c in cases]
    with open(argv[2], "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main(sys.argv)
