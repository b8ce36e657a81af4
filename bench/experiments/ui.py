"""The web interface in headless Chromium."""

import tempfile
import time

from .common import down, plot, up, vemu, write_csv, write_md


def chromium():
    """Headless Chromium under Selenium, as the web interface's tests drive it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--window-size=1400,900", f"--user-data-dir={tempfile.mkdtemp(prefix='vemu-bench-ui-')}"]:
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_script_timeout(60)
    return d


# Counts animation frames for `ms` (the page's main thread draws the graph in them: a
# busy page gets fewer): frames per second and the longest gap between two.
FPS_JS = """
const [ms, done] = arguments;
const t = [];
function f(now) { t.push(now); if (now - t[0] < ms) requestAnimationFrame(f); else done([(t.length - 1) * 1000 / (now - t[0]), Math.max(...t.slice(1).map((x, i) => x - t[i]))]); }
requestAnimationFrame(f);
"""


def ui_measure(d, url, name):
    """Open the lab's page: ms from navigation to the drawn graph (the page's own clock),
    then frames per second over 10 s."""
    d.get(url)
    end = time.monotonic() + 120
    while not d.execute_script("return !!(window.vemu && window.vemu.ready && window.vemu.lab.name === arguments[0])", name):
        if time.monotonic() > end:
            raise RuntimeError(f"the page of {name} did not load")
        time.sleep(0.05)
    load_ms = d.execute_script("return window.vemu.readyMs")
    elements = d.execute_script("return window.vemu.cy.elements().length")
    fps, gap = d.execute_async_script(FPS_JS, 10000)
    return load_ms, elements, fps, gap


def bench_ui():
    rows = []
    d = chromium()
    try:
        for n in [100, 1000]:
            name = "bui"
            nodes = "".join(f"  n{i}: {{}}\n" for i in range(1, n + 1))
            links = "".join(f"  - endpoints: [n{i // 2}, n{i}]\n" for i in range(2, n + 1))
            yaml = f"name: {name}\nrouting: none\naddressing: {{ipv6: none}}\nnodes:\n{nodes}links:\n{links}"
            time.sleep(3)
            up(name, yaml)
            try:
                url = vemu("ui", "--lab", name).split("web interface: ", 1)[1].split()[0]
                load_ms, elements, fps, gap = ui_measure(d, url, name)
            finally:
                down(name)
            rows.append([f"tree of {n} nodes", n, elements, round(load_ms), round(fps, 1), round(gap, 1)])
            print(f"ui {rows[-1][0]}: drawn {load_ms:.0f} ms after navigation ({elements} elements), {fps:.1f} frames/s, longest frame gap {gap:.0f} ms")
        # 50 wireless nodes moving at 10 Hz (examples/manet-50.yaml's segment, without
        # its routing daemons).
        names = ", ".join(f"n{i}" for i in range(1, 51))
        manet = (f"name: bui-manet\nseed: 1\nrouting: none\naddressing: {{ipv6: none}}\nnodes: {{{', '.join(f'n{i}: {{}}' for i in range(1, 51))}}}\n"
                 f"segments:\n  radio:\n    kind: wireless\n    area: 1500x300\n    range: 250m\n    tick: 100ms\n"
                 f"    mobility: {{model: random-waypoint, speed: 0-20, pause: 0s}}\n    members: [{names}]\n")
        time.sleep(3)
        up("bui-manet", manet)
        try:
            url = vemu("ui", "--lab", "bui-manet").split("web interface: ", 1)[1].split()[0]
            load_ms, elements, fps, gap = ui_measure(d, url, "bui-manet")
            moved = d.execute_script("return window.vemu.moves || 0")
        finally:
            down("bui-manet")
        rows.append(["50 wireless nodes moving at 10 Hz", 50, elements, round(load_ms), round(fps, 1), round(gap, 1)])
        print(f"ui {rows[-1][0]}: drawn {load_ms:.0f} ms, {fps:.1f} frames/s, longest frame gap {gap:.0f} ms ({moved} position updates drawn)")
    finally:
        d.quit()
    write_csv("ui.csv", ["case", "nodes", "graph_elements", "drawn_ms", "frames_per_s", "longest_frame_gap_ms"], rows)
    trees = [r for r in rows if r[0].startswith("tree")]
    plot("ui.png", "Web interface: time until the lab is drawn", "nodes", "ms", [("page load to drawn graph", [r[1] for r in trees], [r[3] for r in trees])], logx=True)
    write_md("ui", "Web interface: drawing and interactivity (headless Chromium)", "issue 16's goals: a 1000-node lab drawn in 2 s; 30 frames/s while 50 wireless nodes move at 10 Hz",
             ["case", "nodes", "graph elements", "drawn (ms)", "frames/s", "longest frame gap (ms)"], rows,
             ["Headless Chromium with software rendering on the same 2-core machine as the lab; a desktop browser with a GPU draws faster.",
              "Frames per second = requestAnimationFrame callbacks over 10 s (the browser's cap is 60): fewer means the page's main thread was busy drawing or handling events."])
