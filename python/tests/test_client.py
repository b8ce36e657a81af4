"""The Python client against real labs (root, namespaces), through the API only."""

import http.client
import json
import os
import re
import socket
import threading
import time

import pytest

from vemu import Lab, VemuError

CHAIN = """
name: {name}
addressing: {{ipv6: none}}
nodes:
  n1: {{}}
  n2: {{run: ["sleep 1000"]}}
links:
  - endpoints: [n1, n2]
    delay: 10ms
"""


@pytest.fixture
def scenario(tmp_path):
    def make(name):
        p = tmp_path / f"{name}.yaml"
        p.write_text(CHAIN.format(name=name))
        return p

    return make


def rtt_ms(result):
    m = re.search(r"rtt min/avg/max/mdev = [\d.]+/([\d.]+)/", result.stdout)
    assert m, result.stdout + result.stderr
    return float(m.group(1))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_a_lab_driven_only_through_the_client(scenario):
    with Lab.up(scenario("py-drive")) as lab:
        assert lab.name == "py-drive"
        assert [n.name for n in lab.nodes()] == ["n1", "n2"]
        lab.node("n1").run("ping -c 1 n2")  # neighbours resolved before measuring
        r = lab.node("n1").run("ping -c 5 -i 0.1 n2")
        assert r.ok and abs(rtt_ms(r) - 20.0) < 2.0, r
        lab.link("n1", "n2").set(delay="50ms")
        r = lab.node("n1").run(["ping", "-c", "5", "-i", "0.1", "n2"])
        assert abs(rtt_ms(r) - 100.0) < 2.0, r
        lab.link("n1", "n2").set(delay="0ms", direction="reverse")
        r = lab.node("n1").run("ping -c 5 -i 0.1 n2")
        assert abs(rtt_ms(r) - 50.0) < 2.0, r
        info = lab.link("n2", "n1").info()
        assert info["forward"]["impairments"]["delay_ns"] == 50_000_000
        stats = lab.stats()
        assert stats["links"][0]["forward"]["tx_frames"] >= 15
        assert stats["t_ns"] > 0
        # Exit status, output and input pass through.
        r = lab.node("n2").run("cat; echo err >&2; exit 3", stdin="hello")
        assert (r.exit, r.stdout, r.stderr) == (3, "hello", "err\n")
        assert lab.node("n1").run(["no-such-command"]).exit == 127
        assert lab.node("n1").run("sleep 5", timeout=0.5).timed_out
    # Down on leaving the block: nothing left.
    assert not os.path.exists("/run/vemu/py-drive")
    assert not any(n.startswith("vemu-py-drive.") for n in os.listdir("/run/netns"))


def test_bad_requests_get_4xx_and_change_nothing(scenario):
    with Lab.up(scenario("py-errors")) as lab:
        with pytest.raises(VemuError) as e:
            lab.node("nope").run("true")
        assert e.value.status == 404 and "nope" in e.value.message
        with pytest.raises(VemuError) as e:
            lab.link("n1", "n2").set(loss="150%")
        assert e.value.status == 400 and "between 0% and 100%" in e.value.message
        with pytest.raises(VemuError) as e:
            lab.link("n1", "n2").set(delay="-5ms")
        assert e.value.status == 400
        with pytest.raises(VemuError) as e:
            lab.link("n1", "n9").set(delay="5ms")
        assert e.value.status == 404
        with pytest.raises(VemuError) as e:
            lab.link("n1", "n2").set(direction="sideways", delay="5ms")
        assert e.value.status == 400 and "direction" in e.value.message
        # Malformed JSON, an unknown endpoint, an unknown field of exec.
        for method, path, body in [("PATCH", "/v1/links/n1:n2", b"{bad"), ("GET", "/v1/nope", None), ("POST", "/v1/nodes/n1/exec", b'{"cmd": "true", "x": 1}')]:
            conn = lab._connection(10)
            conn.request(method, path, body=body)
            res = conn.getresponse()
            payload = json.loads(res.read())
            conn.close()
            assert 400 <= res.status < 500, (path, res.status)
            assert payload["error"], payload
        link = lab.link("n1", "n2").info()
        assert link["forward"]["impairments"]["delay_ns"] == 10_000_000
        assert link["forward"]["impairments"]["loss"] == {"model": "none"}


def test_tcp_api_needs_the_token(scenario):
    port = free_port()
    with Lab.up(scenario("py-tcp"), api=f"127.0.0.1:{port}") as lab:
        token = open("/run/vemu/py-tcp/api-token").read().strip()
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": token}]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/v1/lab", headers=headers)
            res = conn.getresponse()
            body = json.loads(res.read())
            conn.close()
            assert res.status == 401 and "Bearer" in body["error"]
        remote = Lab.connect("py-tcp", url=f"http://127.0.0.1:{port}", token=token)
        assert remote.node("n1").run("ping -c 1 n2").ok
        remote.link("n1", "n2").set(delay="20ms")
        assert lab.link("n1", "n2").info()["reverse"]["impairments"]["delay_ns"] == 20_000_000


def test_events_stream_link_changes_and_counters(scenario):
    with Lab.up(scenario("py-events")) as lab:
        seen = []

        def read():
            for ev in lab.events(stats="200ms"):
                seen.append(ev)
                if ev["type"] == "link":
                    return

        t = threading.Thread(target=read)
        t.start()
        lab.node("n1").run("sleep 0.5")
        lab.link("n1", "n2").down()
        t.join(timeout=10)
        assert not t.is_alive()
        kinds = [e["type"] for e in seen]
        assert "stats" in kinds and kinds[-1] == "link", kinds
        assert seen[-1]["up"] is False
        assert "NO-CARRIER" in lab.node("n1").run("ip link show eth0").stdout
        lab.link("n1", "n2").up()


def test_node_stop_and_start(scenario):
    with Lab.up(scenario("py-node")) as lab:
        n2 = lab.node("n2")
        assert n2.run("pgrep --ns $$ --nslist net -x sleep").ok
        n2.stop()
        assert not n2.info()["up"]
        assert [p["state"] for p in n2.info()["processes"]] == ["stopped"]
        assert not n2.run("pgrep --ns $$ --nslist net -x sleep").ok
        n2.start()
        assert n2.info()["up"]
        assert n2.run("pgrep --ns $$ --nslist net -x sleep").ok
        # Its log tells what happened, in order; a short tail is whole lines of the end.
        log = n2.log()
        assert log.index("node stopped") < log.index("node started"), log
        tail = n2.log(bytes=40)
        assert log.endswith(tail) and (tail == "" or log[-len(tail) - 1] == "\n"), (log, tail)


TIMELINE = """
name: {name}
addressing: {{ipv6: none}}
nodes: {{n1: {{}}, n2: {{}}}}
links:
  - endpoints: [n1, n2]
    delay: 10ms
events:
  - {{at: 5s, link: n1:n2, set: {{delay: 100ms}}}}
  - {{at: 6s, link: n1:n2, ramp: {{from: {{delay: 100ms}}, to: {{delay: 20ms}}, over: 1s, step: 100ms}}}}
  - {{at: 7500ms, every: 500ms, until: 8000ms, link: n1:n2, direction: forward, cycle: [{{loss: 100%}}, {{loss: 0%}}]}}
"""


def test_timeline_changes_the_link_at_the_right_lab_time(tmp_path):
    p = tmp_path / "tl.yaml"
    p.write_text(TIMELINE.format(name="py-timeline"))
    with Lab.up(p) as lab:
        # Lab clock -> wall clock (ping -D prints wall-clock times).
        import time

        # The lab clock read through the API: the quickest of five answers (a slow one
        # on a loaded machine would misplace every sample by up to its time).
        reads = []
        for _ in range(5):
            t0 = time.time()
            uptime = lab.status()["uptime_ns"] / 1e9
            t1 = time.time()
            reads.append((t1 - t0, (t0 + t1) / 2 - uptime))
        slack, epoch = min(reads)
        uptime = time.time() - epoch
        assert uptime < 4.0, "the lab took too long to come up for this test"
        r = lab.node("n1").run(f"ping -D -n -i 0.01 -w {max(1, round(6.5 - uptime))} 10.0.0.2", timeout=15)
        samples = []
        for line in r.stdout.splitlines():
            m = re.match(r"\[([\d.]+)\] .* time=([\d.]+) ms", line)
            if m:
                recv, rtt = float(m.group(1)), float(m.group(2)) / 1000
                samples.append((recv - rtt - epoch, rtt))  # (lab time sent, RTT)
        assert len(samples) > 100, (r, uptime)
        # (At most 2 % of the pings off: the ping program itself may wait for a CPU.)
        def mostly(rtts, want):
            off = [x for x in rtts if abs(x - want) >= 0.005]
            return rtts and len(off) <= 0.02 * len(rtts), (want, off, len(rtts), slack)

        before = [s for s in samples if s[0] < 4.9 - slack]
        ok, why = mostly([rtt for _, rtt in before[5:]], 0.020)
        assert ok, why
        first = next(s for s in samples if s[1] > 0.060)
        # The change reached the reply's direction 10 ms after the request was sent
        # unless the request itself already saw it (RTT ~200 ms).
        change = first[0] + (0.010 if first[1] < 0.150 else 0.0)
        print(f"delay raised at lab time {change:.4f} s (scheduled 5 s); RTT {first[1]*1000:.1f} ms")
        assert abs(change - 5.0) <= 0.05 + slack, (samples[:3], slack)
        after = [rtt for t, rtt in samples if 5.05 + slack < t < 5.8 - slack]
        ok, why = mostly(after, 0.200)
        assert ok, why
        # The ramp ends at 20 ms each way, then the cycle drops everything forward for
        # 500 ms out of every second.
        time.sleep(max(0.0, epoch + 7.2 - time.time()))
        link = lab.link("n1", "n2").info()
        assert link["forward"]["impairments"]["delay_ns"] == 20_000_000
        time.sleep(max(0.0, epoch + 7.75 - time.time()))
        link = lab.link("n1", "n2").info()
        assert link["forward"]["impairments"]["loss"]["rate"] == 1.0
        assert link["reverse"]["impairments"]["loss"] == {"model": "none"}
        time.sleep(max(0.0, epoch + 8.3 - time.time()))
        assert lab.link("n1", "n2").info()["forward"]["impairments"]["loss"] == {"model": "none"}
        # The plan as the API gives it: each event with its index, in scenario order.
        tl = lab.timeline()
        assert [(e["index"], e["at_ns"], e["every_ns"]) for e in tl["events"]] == [(0, 5_000_000_000, None), (1, 6_000_000_000, None), (2, 7_500_000_000, 500_000_000)]
        assert tl["events"][0]["target"] == {"link": {"spec": "n1:n2", "direction": "both"}} and tl["events"][0]["action"]["set"]["delay_ns"] == 100_000_000
        assert tl["now_ns"] > 8_000_000_000


def test_scenarios_are_checked_without_touching_the_lab(scenario):
    with Lab.up(scenario("py-check")) as lab:
        ok = lab.check_scenario("name: other\nnodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n")
        assert ok == {"valid": True, "name": "other", "nodes": 2, "links": 1, "segments": 0, "events": 0}
        with pytest.raises(VemuError) as e:
            lab.check_scenario("name: other\nnodes: {a: {}}\nlinks:\n  - endpoints: [a, b]\n    loss: 200%\n", file="other.yaml")
        assert e.value.status == 422 and e.value.message.startswith("other.yaml:")
        errors = e.value.details["errors"]
        assert errors and all(x["line"] >= 4 and x["field"].startswith("links[0]") for x in errors), errors
        # Checked, not built.
        assert not os.path.exists("/run/vemu/other")


def test_exec_output_streams_as_it_comes(scenario):
    import time

    with Lab.up(scenario("py-stream")) as lab:
        seen = []
        t0 = time.monotonic()
        for item in lab.node("n1").stream("for i in 1 2 3; do echo $i; sleep 0.3; done; echo bye >&2; exit 5"):
            seen.append((time.monotonic() - t0, item))
        outs = [i["stdout"] for _, i in seen if "stdout" in i]
        assert "".join(outs) == "1\n2\n3\n"
        assert seen[-1][1] == {"exit": 5, "timed_out": False}
        assert any("stderr" in i and i["stderr"] == "bye\n" for _, i in seen)
        # The first line came long before the end.
        first = next(t for t, i in seen if "stdout" in i)
        assert seen[-1][0] - first > 0.5, seen
        assert list(lab.node("n1").stream(["no-such-command"]))[-1]["exit"] == 127


RADIO = """
name: {name}
addressing: {{ipv6: none}}
nodes: {{a: {{}}, b: {{}}}}
segments:
  air:
    kind: wireless
    propagation: unit-disk
    range: 250m
    members:
      - {{node: a, position: [0, 0]}}
      - {{node: b, position: [100, 0]}}
"""


def test_wireless_move_and_traffic(tmp_path):
    p = tmp_path / "py-radio.yaml"
    p.write_text(RADIO.format(name="py-radio"))
    with Lab.up(p) as lab:
        a = lab.node("a")
        assert a.run("ping -c 2 -i 0.2 -W 1 10.0.0.2").ok
        members = lab.status()["segments"][0]["members"]
        assert [n["node"] for n in members[0]["radio"]["neighbours"]] == ["b"]
        lab.node("b").move(1000, 0)
        assert not a.run("ping -c 2 -i 0.2 -W 1 10.0.0.2").ok
        assert lab.status()["segments"][0]["members"][1]["radio"]["x_m"] == 1000
        with pytest.raises(VemuError) as e:
            lab.node("a").move(float("nan"), 0)
        assert e.value.status == 400
        lab.node("b").move(200, 0)
        flow = lab.traffic_cbr("a", "b", rate_pps=50, count=20)
        assert flow["to"] == "b" and flow["count"] == 20
        deadline = time.monotonic() + 10
        received = os.path.join("/var/log/vemu/py-radio", flow["received_file"])
        while time.monotonic() < deadline:
            with open(received) as f:
                if len(f.read().splitlines()) == 21:
                    break
            time.sleep(0.2)
        with open(received) as f:
            assert len(f.read().splitlines()) == 21  # header + 20 packets
        with pytest.raises(VemuError) as e:
            lab.traffic_cbr("a", "a", rate_pps=1)
        assert e.value.status == 400


def test_https_urls_are_refused_not_downgraded():
    # The token would otherwise go out in clear to a server the caller thinks is TLS.
    for url in ("https://127.0.0.1:8443", "ftp://127.0.0.1"):
        with pytest.raises(VemuError, match="unsupported URL scheme"):
            Lab("x", url=url, token="secret")



def test_labs_as_tests_from_python(tmp_path):
    import xml.etree.ElementTree as ET

    import vemu

    p = tmp_path / "pyexpect.yaml"
    p.write_text(CHAIN.format(name="pyexpect") + """expect:
  - {name: n1 reaches n2, reach: {from: n1, to: n2}, within: 5s}
  - {name: n2 says hello, run: {node: n2, cmd: 'echo bye', output: hello}, within: 1s}
""")
    junit = tmp_path / "results.xml"
    run = vemu.test(p, junit=junit)
    assert run.exit == 1 and not run.passed
    by_name = {c["name"]: c for c in run.results["checks"]}
    assert by_name["n1 reaches n2"]["outcome"] == "passed"
    assert by_name["n1 reaches n2"]["measured_ns"] < 5_000_000_000
    assert by_name["n2 says hello"]["outcome"] == "failed"
    # JUnit XML that a parser reads: one suite, two cases, one failure.
    suites = ET.parse(junit).getroot()
    assert (suites.tag, suites.get("tests"), suites.get("failures")) == ("testsuites", "2", "1")
    cases = {c.get("name"): c for c in suites.iter("testcase")}
    assert cases["n2 says hello"].find("failure").get("message").startswith("failed: ")
    assert cases["n1 reaches n2"].find("failure") is None
    # A lab brought up as usual answers how its checks stand.
    with Lab.up(p) as lab:
        deadline = time.time() + 20
        while not lab.expect()["done"] and time.time() < deadline:
            time.sleep(0.2)
        got = lab.expect()
        assert got["done"] and got["exit"] == 1, got
    # Bad input (no checks at all): an error, nothing built.
    bare = tmp_path / "nochecks.yaml"
    bare.write_text(CHAIN.format(name="nochecks"))
    with pytest.raises(VemuError, match="no checks"):
        vemu.test(bare)
