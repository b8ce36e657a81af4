#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs (fuzz/seeds/TARGET/NAME): real frames of the
kinds vemu sees (ARP, UDP, IGMPv3 and MLDv2 reports, a TCP super-frame with its
virtio-net GSO header), the same frames as cross-machine datagrams, ns-2 traces and
API bodies, in each target's input format. The scenario target also reads examples/.
Run it again after changing a format; the output is committed."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def vnet(flags=0, gso_type=0, hdr_len=0, gso_size=0, csum_start=0, csum_offset=0):
    return struct.pack("<BBHHHH", flags, gso_type, hdr_len, gso_size, csum_start, csum_offset)


def mac(i):
    return bytes([2, 0, 0, 0, 0, i])


def ipv4(proto, payload, src=b"\x0a\x00\x00\x01", dst=b"\x0a\x00\x00\x02", ttl=64, opts=b""):
    ihl = 5 + len(opts) // 4
    return struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 4 * ihl + len(payload), 0x1234, 0x4000, ttl, proto, 0, src, dst) + opts + payload


def ipv6(nh, payload, src=b"\xfe\x80" + b"\0" * 13 + b"\x01", dst=b"\xff\x02" + b"\0" * 13 + b"\x16"):
    return struct.pack("!IHBB16s16s", 0x60000000, len(payload), nh, 1, src, dst) + payload


def eth(dst, src, ethertype, payload):
    return dst + src + struct.pack("!H", ethertype) + payload


udp = eth(mac(2), mac(1), 0x0800, ipv4(17, struct.pack("!HHHH", 5000, 5001, 8 + 32, 0) + bytes(range(32))))
arp = eth(b"\xff" * 6, mac(1), 0x0806, struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac(1), b"\x0a\0\0\x01", b"\0" * 6, b"\x0a\0\0\x02"))
# IGMPv3 report: join 239.1.2.3 (router alert option).
igmp = struct.pack("!BBHHH", 0x22, 0, 0, 0, 1) + struct.pack("!BBH4s", 4, 0, 0, bytes([239, 1, 2, 3]))
igmp_frame = eth(bytes([1, 0, 0x5E, 0, 0, 0x16]), mac(1), 0x0800, ipv4(2, igmp, dst=bytes([224, 0, 0, 22]), ttl=1, opts=b"\x94\x04\x00\x00"))
# MLDv2 report (hop-by-hop with router alert, then ICMPv6 143): join ff05::1:3.
mld = struct.pack("!BBHHH", 143, 0, 0, 0, 1) + struct.pack("!BBH16s", 4, 0, 0, b"\xff\x05" + b"\0" * 11 + b"\x01\x00\x03")
hbh = struct.pack("!BB", 58, 0) + b"\x05\x02\x00\x00\x01\x00"
mld_frame = eth(b"\x33\x33\0\0\0\x16", mac(1), 0x86DD, ipv6(0, hbh + mld))
# A TCP/IPv4 super-frame: 3 segments of 1448 bytes, GSO header as TAP gives it.
tcp = struct.pack("!HHIIBBHHH", 40000, 5201, 1, 1, 5 << 4, 0x18, 65535, 0, 0)
payload = bytes(i % 251 for i in range(3 * 1448))
tcp_super = vnet(1, 1, 54, 1448, 34, 16) + eth(mac(2), mac(1), 0x0800, ipv4(6, tcp + payload))
plain = [vnet() + f for f in (udp, arp, igmp_frame, mld_frame)]


def records(frames):
    """frames target: port, time step (x10 us), length (LE), bytes."""
    out = b""
    for port, step, f in frames:
        out += struct.pack("<BBH", port, step, len(f)) + f
    return out


put("frames", "link", records([(0, 0, plain[0]), (1, 5, plain[0]), (0, 100, tcp_super)]))
put("frames", "lan", records([(4, 0, plain[1]), (5, 1, plain[2]), (6, 1, plain[3]), (7, 3, plain[0])]))
put("frames", "radio", records([(8, 0, plain[0]), (9, 0, plain[1]), (10, 200, plain[3])]))
put("frames", "remote", records([(2, 0, plain[0]), (0x83, 10, plain[0]), (3, 10, tcp_super)]))
put("frames", "changes", records([(0, 0, plain[0])]) + b"\xff\x00\xff\x04\xff\x82" + records([(1, 2, plain[0]), (8, 2, plain[1])]))
for name, f in [("udp", plain[0]), ("arp", plain[1]), ("igmp", plain[2]), ("mld", plain[3]), ("tcp_super", tcp_super)]:
    put("gso", name, f)


def datagrams(frame, vni, seq, chunk=1400):
    v, eth_bytes = frame[:10], frame[10:]
    n = max(1, -(-len(eth_bytes) // chunk))
    out = []
    for i in range(n):
        piece = eth_bytes[i * chunk:(i + 1) * chunk]
        out.append(bytes([8, 0, 0, 0]) + vni.to_bytes(3, "big") + b"\0" + piece + b"vm" + bytes([i, n]) + struct.pack("!IQ", seq, 123456789) + v + b"\0\0")
    return out


def runs(ds):
    return b"".join(struct.pack("<H", len(d)) + d for d in ds)


put("tunnel", "frames", runs(datagrams(plain[0], 2, 1) + datagrams(tcp_super, 3, 1) + datagrams(plain[0], 2, 2)))
# A short probe, a padded one (path MTU discovery) and an answer saying its size.
put("tunnel", "probe", runs([bytes([8, 1, 0, 0, 0, 0, 2, 0]) + struct.pack("!QH", 5, 18),
                             (bytes([8, 1, 0, 0, 0, 0, 2, 0]) + struct.pack("!QH", 5, 1372)).ljust(1372, b"\0"),
                             bytes([8, 2, 0, 0, 0, 0, 2, 0]) + struct.pack("!QH", 5, 1372)]))

put("graphml", "zoo", """<?xml version="1.0" encoding="utf-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key attr.name="Latitude" attr.type="double" for="node" id="d29" />
  <key attr.name="Longitude" attr.type="double" for="node" id="d32" />
  <key attr.name="label" attr.type="string" for="node" id="d33" />
  <key attr.name="LinkSpeedRaw" attr.type="double" for="edge" id="d38" />
  <graph edgedefault="undirected">
    <node id="0"><data key="d29">52.52437</data><data key="d32">13.41053</data><data key="d33">Berlin</data></node>
    <node id="1"><data key="d29">48.13743</data><data key="d32">11.57549</data><data key="d33">M\u00fcnchen</data></node>
    <node id="2"><data key="d33">Frankfurt</data></node>
    <edge source="0" target="1"><data key="d38">10000000000.0</data></edge>
    <edge source="1" target="2" /><edge source="2" target="0" /><edge source="0" target="1" /><edge source="2" target="2" />
  </graph>
</graphml>
""")
put("delay_file", "text", "\x00# ping round trips\n10.5\n12\n800us\n1s\n")
put("delay_file", "netem", "\x00-8192 0 8192 # comment\n16384\n")


def ping_pcap():
    """Two ICMP echo requests and their replies (pcap, Ethernet), for series 2 (rtt)."""
    def frame(req, seq):
        src, dst = (b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02") if req else (b"\x0a\x00\x00\x02", b"\x0a\x00\x00\x01")
        icmp = struct.pack("!BBHHH", 8 if req else 0, 0, 0, 7, seq) + bytes(8)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 0, 0, 64, 1, 0, src, dst)
        return b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + icmp
    out = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
    for at_us, req, seq in [(0, True, 1), (20000, False, 1), (100000, True, 2), (140000, False, 2)]:
        f = frame(req, seq)
        out += struct.pack("<IIII", at_us // 1000000, at_us % 1000000, len(f), len(f)) + f
    return out


put("delay_file", "pcap", b"\x02" + ping_pcap())
put("ns2", "trace", "$node_(0) set X_ 10.0\n$node_(0) set Y_ 20.0\n$node_(1) set X_ 300\n$node_(1) set Y_ 0\n"
    "$ns_ at 1.5 \"$node_(0) setdest 100.0 50.0 5.0\"\n$ns_ at 2.0 \"$node_(1) setdest 0 0 20\"\n")

for i, (route, body) in enumerate([
    (0, {"direction": "forward", "delay": "20ms", "jitter": "2ms", "loss": "1%", "rate": "10Mbit"}),
    (0, {"up": False}),
    (0, {"loss": {"model": "gilbert-elliott", "p": "1%", "r": "30%"}, "queue": "50"}),
    (0, {"qos": [{"name": "ef", "match": {"dscp": "EF"}, "priority": 0, "police": {"rate": "1Mbit", "burst": "10KB"}},
                 {"name": "af4", "match": [{"dscp": ["AF41", "AF42"]}, {"proto": "udp", "dport": "5000-5010"}], "weight": 4,
                  "meter": {"type": "trtcm", "cir": "1Mbit", "cbs": "5KB", "pir": "2Mbit", "pbs": "10KB", "yellow": "AF42"},
                  "wred": {"green": {"min": "20KB", "max": "60KB"}, "red": {"min": "5KB", "max": "20KB", "probability": "20%"}}},
                 {"name": "be", "mark": "CS1", "limit": "100"}]}),
    (0, {"qos": "diffserv", "direction": "reverse"}),
    (1, {"cpu": 0.5, "memory": "256MiB", "pids": 200}),
    (2, {"x": 10.5, "y": -3, "speed": 2}),
    (3, {"from": "a", "to": "b", "size_bytes": 100, "rate_pps": 10, "count": 5, "to_addr": "10.0.0.2"}),
    (4, {"cmd": ["ip", "addr"], "timeout_s": 5, "stdin": "x", "stream": True, "max_output_bytes": 1000}),
    (4, {"cmd": "echo hi"}),
]):
    put("api_bodies", f"body{i}", bytes([route]) + json.dumps(body).encode())

# agent_channel: route byte, then a worker order, an agent's hello, a stream of
# captured-frame records (after a piece-size byte), or records after three offsets.
put("agent_channel", "request-backlog", b"\x00" + json.dumps("Backlog").encode())
put("agent_channel", "request-records", b"\x00" + json.dumps({"TrafficRecords": {"node": "a", "file": "traffic/flow1-sent.csv", "offset": 0}}).encode())
put("agent_channel", "hello", b"\x01" + json.dumps({"version": "0.1.0", "underlay_mtu": 1500, "labs": ["x"]}).encode())
capture = lambda t, i, o, f: struct.pack("<QIBI", t, i, o, len(f)) + f
put("agent_channel", "captures", b"\x02\x07" + capture(1000, 0, 1, b"\xff" * 60) + capture(2000, 1, 0, b"\x01" * 1514) + capture(3, 2, 1, b"")[:10])
put("agent_channel", "records", b"\x03" + struct.pack("<qqq", 1, -5_000_000, 9_999)
    + b"seq,sent_ns,received_ns\n1,1000000,2000000\n2,18446744073709551615,5\nx,y\n")
