"""The API: time of a link change, event-stream throughput."""

import json
import os
import sys
import time

from .common import ROOT, down, plot, up, write_csv


def bench_api():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from vemu import Lab  # noqa: E402

    # (1) Link changes: request -> reply, 1000 times, alternating values.
    up("b-api", "name: b-api\naddressing: {ipv6: none}\nnodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n")
    try:
        lab = Lab("b-api")
        link = lab.link("a", "b")
        times = []
        for i in range(1000):
            t0 = time.perf_counter()
            link.set(delay=f"{i % 7}ms")
            times.append((time.perf_counter() - t0) * 1e6)
        times.sort()
        p50, p99, mx = times[len(times) // 2], times[int(len(times) * 0.99)], times[-1]
    finally:
        down("b-api")
    write_csv("api_latency.csv", ["request", "microseconds"], list(enumerate(times)))
    plot("api_latency.png", "Link change: request to reply (sorted)", "request (sorted)", "µs", [("PATCH /v1/links/a:b", list(range(len(times))), times)])
    print(f"api: link change request->reply (engine updated before the reply) p50 {p50:.0f} µs, p99 {p99:.0f} µs, max {mx:.0f} µs")

    # (2) Event stream with 1000 links (a star: hub + 1000 leaves).
    n = 1000
    nodes = "".join(f"  l{i}: {{}}\n" for i in range(n))
    links = "".join(f"  - endpoints: [hub, l{i}]\n" for i in range(n))
    up("b-api1k", f"name: b-api1k\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n  hub: {{}}\n{nodes}links:\n{links}")
    rows = []
    try:
        lab = Lab("b-api1k")
        for period in ["1s", "200ms", "50ms", "10ms"]:
            got, nbytes = 0, 0
            t0 = time.monotonic()
            for ev in lab.events(stats=period):
                if ev["type"] == "stats":
                    got += 1
                    nbytes += len(json.dumps(ev))
                if time.monotonic() - t0 >= 5:
                    break
            dt = time.monotonic() - t0
            rows.append([period, got / dt, nbytes / dt / 1e6])
            print(f"api: event stream, 1000 links, stats every {period:>5}: {got / dt:6.1f} snapshots/s, {nbytes / dt / 1e6:6.2f} MB/s of JSON")
        # Link-change events as fast as requests go.
        import threading

        seen = []

        def read():
            for ev in lab.events(stats=None):
                if ev["type"] == "link":
                    seen.append(time.monotonic())
                    if len(seen) >= n:
                        return

        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        for i in range(n):
            lab.link("hub", f"l{i}").set(delay="1ms", direction="forward")
        t.join(timeout=60)
        dt = (seen[-1] - t0) if seen else float("nan")
        rows.append(["link events", len(seen) / dt, 0])
        print(f"api: {len(seen)} link-change events delivered in {dt:.2f} s ({len(seen) / dt:.0f} events/s, bounded by the requests)")
    finally:
        down("b-api1k")
    write_csv("api_events.csv", ["stats_period", "per_second", "mb_per_second"], rows)
