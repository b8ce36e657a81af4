"""The web interface in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium, against a real lab's controller. Run as root
(labs need it): scripts/test.sh runs it."""

import contextlib
import json
import os
import subprocess
import tempfile
import time
import pathlib
import re
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VEMU = os.environ.get("VEMU", os.path.join(ROOT, "target", "release", "vemu"))
# A screenshot of the page at the end of each test goes here.
ARTIFACTS = pathlib.Path(os.environ.get("VEMU_UI_ARTIFACTS", os.path.join(ROOT, "target", "ui-artifacts")))
DOWNLOADS = pathlib.Path(tempfile.mkdtemp(prefix="vemu-ui-downloads-"))

LAB = """
name: t-ui
addressing: {ipv6: none}
nodes:
  client: {canvas: [0, 0]}
  router: {}
  server: {run: ["echo server says hello"], canvas: [400, 0]}
  h1: {}
  h2: {}
links:
  - endpoints: [client, router]
    delay: 2ms
  - endpoints: [router, server]
    bandwidth: 20Mbit
segments:
  lan0:
    members: [router, h1, h2]
    canvas: [200, 300]
routing: static
events:
  - {at: 1s, link: client:router, set: {delay: 2ms}}
  - {at: 3600s, node: h2, state: stop}
expect:
  - {name: client reaches server, reach: {from: client, to: server}, within: 60s}
  - {name: later, at: 3000s, reach: {from: h1, to: h2}, within: 10s}
"""


def vemu(*args, check=True):
    r = subprocess.run([VEMU, *args], capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"vemu {' '.join(args)}: {r.stdout}{r.stderr}")
    return r


def status():
    return json.loads(vemu("status", "--lab", "t-ui", "--json").stdout)


@contextlib.contextmanager
def ui_lab(name, yaml):
    """A lab up with --ui: its login link."""
    vemu("down", "--lab", name, check=False)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(yaml)
    try:
        r = vemu("up", f.name, "--ui")
        yield next(line.split(": ", 1)[1] for line in r.stdout.splitlines() if line.startswith("web interface: "))
    finally:
        vemu("down", "--lab", name, check=False)
        os.unlink(f.name)


@pytest.fixture(scope="module")
def lab():
    with ui_lab("t-ui", LAB) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--window-size=1400,900", f"--user-data-dir={tempfile.mkdtemp(prefix='vemu-ui-')}"]:
        opts.add_argument(a)
    opts.add_experimental_option("prefs", {"download.default_directory": str(DOWNLOADS), "download.prompt_for_download": False})
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_script_timeout(30)
    yield d
    d.quit()


def console_errors(d):
    """Errors in the browser's console since the last call: script errors, failed loads.
    A 4xx answer of the API to a request the test makes wrong on purpose is the page
    doing its job (it shows the message), not an error of the page."""
    return [e["message"] for e in d.get_log("browser")
            if e["level"] == "SEVERE" and not re.search(r"the server responded with a status of 4(00|22)", e["message"])]


@pytest.fixture(autouse=True)
def screenshot_and_console(request):
    """The page as the test left it, in ARTIFACTS/TEST.png; no console errors meanwhile."""
    yield
    if "browser" in request.fixturenames:
        d = request.getfixturevalue("browser")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        d.save_screenshot(str(ARTIFACTS / f"{request.node.name}.png"))
        assert console_errors(d) == []


def downloaded(name, secs=10):
    """The bytes of a file the page offered for download, once it is complete."""
    f = DOWNLOADS / name
    end = time.time() + secs
    while time.time() < end:
        if f.exists() and not (DOWNLOADS / (name + ".crdownload")).exists():
            return f.read_bytes()
        time.sleep(0.1)
    raise AssertionError(f"{name} was not downloaded: {sorted(p.name for p in DOWNLOADS.iterdir())}")


def click_at(d, graph_id, x, y):
    """A real mouse click at (x, y) of a cytoscape canvas (pixels from its top left)."""
    el = d.find_element(By.ID, graph_id)
    size = el.size
    ActionChains(d).move_to_element_with_offset(el, int(x - size["width"] / 2), int(y - size["height"] / 2)).click().perform()


def rendered(d, cy, eid):
    return d.execute_script(f"return window.vemu.{cy}.$id(arguments[0]).renderedPosition()", eid)


def ping_min_ms(node, dst):
    out = vemu("exec", "--lab", "t-ui", node, "--", "ping", "-c", "4", "-i", "0.2", "-q", dst).stdout
    return float(re.search(r"= ([0-9.]+)/", out).group(1))


def wait(d, cond, secs=20, what="condition"):
    return WebDriverWait(d, secs, poll_frequency=0.1).until(lambda _: cond(), message=what)


def post_json(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json", **(headers or {})})
    return urllib.request.urlopen(req, timeout=10)


def test_login_link_opens_the_page_once_and_the_api_needs_it(lab, browser):
    base = lab.split("/ui/")[0]
    assert lab.startswith(base + "/ui/#once=")
    # The page itself is public (it holds no secret); the API needs a session.
    assert urllib.request.urlopen(base + "/ui/", timeout=5).status == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/v1/lab", timeout=5)
    assert e.value.code == 401
    browser.get(lab)
    wait(browser, lambda: browser.execute_script("return !!(window.vemu && window.vemu.ready)"), what="the page to load the lab")
    # The secret is gone from the address bar (and the browser's history).
    assert browser.current_url == base + "/ui/"
    assert browser.find_element(By.ID, "summary").text.startswith("5 nodes, 2 links, 1 segments")
    # The graph: 5 nodes and the LAN's hub; 2 links and 3 LAN ports.
    counts = browser.execute_script("const cy = window.vemu.cy; return [cy.nodes().length, cy.edges().length]")
    assert counts == [6, 5]
    # The link works once.
    with pytest.raises(urllib.error.HTTPError) as e:
        post_json(base + "/ui/session", {"once": lab.split("#once=")[1]})
    assert e.value.code == 401


def test_what_the_browser_keeps_cannot_be_replayed_by_another_program(lab, browser):
    """Issue 39: the session lives in the page's origin storage and travels in a header;
    the browser keeps no cookie that another port's page (any local user's) could have
    it send. A cookie holding the session is refused; so is a WebSocket whose first
    message is not the session."""
    base = lab.split("/ui/")[0]
    session = browser.execute_script("return sessionStorage.getItem('vemu-session')")
    assert session and browser.get_cookies() == []
    exec_body = {"cmd": ["id", "-u"]}
    with pytest.raises(urllib.error.HTTPError) as e:
        post_json(base + "/v1/nodes/client/exec", exec_body, {"Cookie": f"vemu_session={session}"})
    assert e.value.code == 401
    # The header is what the page sends (a program that has the session could too: it
    # is the browser's, never sent by the browser on its own).
    v = json.loads(post_json(base + "/v1/nodes/client/exec", exec_body, {"X-Vemu-Session": session}).read())
    assert v["stdout"].strip() == "0"
    # A WebSocket without a header: its first message must be the session.
    said = browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const ws = new WebSocket(`ws://${location.host}/v1/nodes/client/shell`);
        const got = [];
        ws.onopen = () => ws.send(JSON.stringify({session: 'not-' + window.vemu.session}));
        ws.onmessage = (m) => got.push(typeof m.data === 'string' ? m.data : 'bytes');
        ws.onclose = () => done(got);
    """)
    assert len(said) == 1 and "first message must be" in json.loads(said[0])["error"], said


def test_two_labs_pages_open_at_once_keep_their_sessions(lab, browser):
    """Issue 39: with a cookie (which ignores ports), the second lab's login logged the
    first's page out."""
    base = lab.split("/ui/")[0]
    with ui_lab("t-ui-second", "name: t-ui-second\nnodes: {x: {}}\n") as second:
        browser.get(second)
        wait(browser, lambda: browser.execute_script("return !!(window.vemu && window.vemu.ready) && window.vemu.lab.name === 't-ui-second'"), what="the second lab's page")
        browser.get(base + "/ui/")
        wait(browser, lambda: browser.execute_script("return !!(window.vemu && window.vemu.ready) && window.vemu.lab.name === 't-ui'"), what="the first lab's page, still logged in")
        assert browser.find_element(By.ID, "conn").text == "live"


def click(d, element_id):
    """Click the element with this id, found afresh if the page redrew it meanwhile."""
    for _ in range(50):
        try:
            d.find_element(By.ID, element_id).click()
            return
        except StaleElementReferenceException:
            time.sleep(0.1)
    raise AssertionError(f"#{element_id} kept being redrawn")


def click_edge(d, eid):
    d.execute_script("const e = window.vemu.cy.$id(arguments[0]); e.emit('tap');", eid)


def test_a_link_is_changed_from_the_page_with_the_clis_checks(lab, browser):
    click_edge(browser, "l:router:server")
    wait(browser, lambda: "link router:server" in browser.find_element(By.ID, "panel").text, what="the link's panel")
    panel = browser.find_element(By.ID, "panel")
    assert "bandwidth 20.00 Mbit/s" in panel.text
    # A bad value: the CLI's message, nothing changed.
    browser.find_element(By.CSS_SELECTOR, "#impform input[name=delay]").send_keys("fast")
    click(browser, "apply")
    wait(browser, lambda: "delay" in browser.find_element(By.CSS_SELECTOR, "#panel .error").text, what="the error")
    link = next(l for l in status()["links"] if l["name"] == "router:server")
    assert link["forward"]["impairments"]["delay_ns"] == 0
    # A good one, forward only.
    field = browser.find_element(By.CSS_SELECTOR, "#impform input[name=delay]")
    field.clear()
    field.send_keys("15ms")
    browser.find_element(By.CSS_SELECTOR, "#impform select[name=direction] option[value=forward]").click()
    click(browser, "apply")
    wait(browser, lambda: next(l for l in status()["links"] if l["name"] == "router:server")["forward"]["impairments"]["delay_ns"] == 15_000_000,
         what="the new delay in the lab")
    link = next(l for l in status()["links"] if l["name"] == "router:server")
    assert link["reverse"]["impairments"]["delay_ns"] == 0
    wait(browser, lambda: "delay 15ms" in browser.find_element(By.ID, "panel").text, what="the panel to show it")
    # And the lab's packets feel it: 15 ms more from router to server.
    assert 15.0 <= ping_min_ms("router", "server") < 40.0
    # Down and up again; the edge shows it.
    click(browser, "toggle")
    wait(browser, lambda: not next(l for l in status()["links"] if l["name"] == "router:server")["up"], what="the link down")
    wait(browser, lambda: browser.execute_script("return window.vemu.cy.$id('l:router:server').data('up')") == 0, what="the edge marked down")
    wait(browser, lambda: browser.find_element(By.ID, "toggle").text == "bring up", what="the button")
    click(browser, "toggle")
    wait(browser, lambda: next(l for l in status()["links"] if l["name"] == "router:server")["up"], what="the link up")


def test_live_throughput_shows_on_the_link(lab, browser):
    # About 0.8 Mbit/s through client:router (1000-byte pings, 50 a second, and their
    # replies) for 4 s; the page's rate of that link follows the stats stream.
    ping = subprocess.Popen([VEMU, "exec", "--lab", "t-ui", "client", "--", "ping", "-c", "200", "-i", "0.02", "-s", "1000", "-q", "router"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait(browser, lambda: (browser.execute_script("return window.vemu.rates['l:client:router'] || 0") or 0) > 400_000, secs=10, what="the link's rate")
        width = browser.execute_script("return parseFloat(window.vemu.cy.$id('l:client:router').style('width'))")
        idle = browser.execute_script("return parseFloat(window.vemu.cy.$id('l:router:server').style('width'))")
        assert width > idle, (width, idle)
    finally:
        ping.wait(timeout=30)


def test_nodes_are_drawn_where_the_scenario_says(lab, browser):
    pos = lambda i: browser.execute_script("return window.vemu.cy.$id(arguments[0]).position()", i)
    # Where canvas: puts them (the others placed around them by the layout).
    assert pos("n:client") == {"x": 0, "y": 0}
    assert pos("n:server") == {"x": 400, "y": 0}
    assert pos("s:lan0") == {"x": 200, "y": 300}
    assert not browser.execute_script("return window.vemu.cy.$id('n:client').locked()")


def test_a_nodes_log_in_its_panel(lab, browser):
    browser.execute_script("window.vemu.cy.$id('n:server').emit('tap')")
    wait(browser, lambda: "node server" in browser.find_element(By.ID, "panel").text, what="the node's panel")
    wait(browser, lambda: "server says hello" in browser.find_element(By.ID, "nodelog").text, what="its run command's output")
    # Followed: what the node writes next shows within a few seconds.
    # (What the lab's supervisor does with a run command's output: append to the log.)
    with open("/var/log/vemu/t-ui/server.log", "a") as f:
        f.write("a later line\n")
    wait(browser, lambda: "a later line" in browser.find_element(By.ID, "nodelog").text, secs=10, what="the log followed")


def test_a_terminal_in_a_node(lab, browser):
    browser.execute_script("window.vemu.cy.$id('n:h1').emit('tap')")
    wait(browser, lambda: "node h1" in browser.find_element(By.ID, "panel").text, what="the node's panel")
    click(browser, "terminal")
    wait(browser, lambda: browser.find_element(By.ID, "termbox").is_displayed(), what="the terminal")
    time.sleep(0.5)
    area = browser.find_element(By.CSS_SELECTOR, "#term textarea")
    area.send_keys("echo $((6*7)) $(hostname)\n")

    def screen():
        return browser.execute_script(
            "const b = window.vemu.term.term.buffer.active; let s = ''; for (let i = 0; i < b.length; i++) s += b.getLine(i).translateToString(true) + '\\n'; return s")

    wait(browser, lambda: "42 h1" in screen(), what="the shell's answer")
    area.send_keys("exit 4\n")
    wait(browser, lambda: "exit status 4" in screen(), what="the shell's end")
    browser.find_element(By.ID, "termclose").click()


def test_plots_of_a_link_over_time_and_their_export(lab, browser):
    ping = subprocess.Popen([VEMU, "exec", "--lab", "t-ui", "client", "--", "ping", "-c", "150", "-i", "0.02", "-s", "1000", "-q", "router"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        click_edge(browser, "l:client:router")
        wait(browser, lambda: "link client:router" in browser.find_element(By.ID, "panel").text, what="the link's panel")
        # Three plots (throughput, queue, time held), filled from the stats stream.
        assert len(browser.find_elements(By.CSS_SELECTOR, "#plots .uplot")) == 3
        hist = lambda: browser.execute_script("return window.vemu.history.get('l:client:router')")
        wait(browser, lambda: len(hist()[0]) >= 3 and max(hist()[1]) > 200_000, secs=15, what="rows with the pings' throughput")
        # Time held over client:router: its 2 ms delay (the bucket bound above it, 2 ms).
        wait(browser, lambda: 2.0 in [x for x in hist()[5] if x is not None], secs=10, what="the time held")
    finally:
        ping.wait(timeout=30)
    click(browser, "export-csv")
    csv = downloaded("client-router.csv").decode().splitlines()
    assert csv[0].startswith("t_s,forward_bps,reverse_bps,forward_queue_frames")
    assert len(csv) >= 4 and max(float(r.split(",")[1]) for r in csv[1:]) > 200_000
    click(browser, "export-png")
    assert downloaded("client-router.png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_timeline_shows_the_scenarios_events_and_the_clock(lab, browser):
    tl = browser.find_element(By.ID, "timeline")
    assert tl.is_displayed()
    marks = browser.find_elements(By.CSS_SELECTOR, "#timeline .mark")
    assert len(marks) == 2
    assert "client:router: set delay 2ms" in marks[0].get_attribute("title")
    # The lab is past 1 s: the first firing is done, the other (at 3600 s) is not.
    wait(browser, lambda: "fired" in browser.find_elements(By.CSS_SELECTOR, "#timeline .mark")[0].get_attribute("class"), what="the first firing")
    assert "fired" not in browser.find_elements(By.CSS_SELECTOR, "#timeline .mark")[1].get_attribute("class")
    assert browser.find_element(By.CSS_SELECTOR, "#timeline .cursor").is_displayed()
    # The lab's checks, a bar each from its start to its deadline, in the state the
    # judge gives it (the event stream's `expect` or the page's first look).
    checks = lambda: {c.get_attribute("data-check"): c.get_attribute("class") for c in browser.find_elements(By.CSS_SELECTOR, "#timeline .check")}
    wait(browser, lambda: checks().get("client reaches server") == "check passed", what="the passed check")
    assert checks()["later"] == "check pending"
    bar = browser.find_element(By.CSS_SELECTOR, "#timeline .check.passed")
    assert bar.get_attribute("title").startswith("client reaches server: passed, ")
    summary = browser.find_element(By.CSS_SELECTOR, "#timeline .checklist summary").text
    assert summary == "checks: 2 — 1 passed, 0 failed, 0 untrustworthy, 1 pending", summary


GRAPHML = """<?xml version="1.0" encoding="utf-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key attr.name="label" attr.type="string" for="node" id="d1"/>
  <key attr.name="Latitude" attr.type="double" for="node" id="d2"/>
  <key attr.name="Longitude" attr.type="double" for="node" id="d3"/>
  <graph edgedefault="undirected">
    <node id="0"><data key="d1">Paris</data><data key="d2">48.85</data><data key="d3">2.35</data></node>
    <node id="1"><data key="d1">Lyon</data><data key="d2">45.76</data><data key="d3">4.84</data></node>
    <node id="2"><data key="d1">Lille</data><data key="d2">50.63</data><data key="d3">3.06</data></node>
    <edge source="0" target="1"/><edge source="0" target="2"/>
  </graph>
</graphml>
"""


def import_file(browser, suffix, text):
    """Open a file of `text` named *`suffix` in the editor; wait until it is imported."""
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(text)
    try:
        browser.find_element(By.ID, "ed-open").send_keys(f.name)
        name = os.path.basename(f.name)
        wait(browser, lambda: browser.find_element(By.ID, "ed-status").text.startswith(f"imported {name}"), what=f"the import of {name}")
    finally:
        os.unlink(f.name)


def test_the_editor_draws_checks_saves_and_starts_a_lab(lab, browser):
    click(browser, "open-editor")
    wait(browser, lambda: browser.find_element(By.ID, "edgraph").is_displayed(), what="the editor")
    ed = lambda: browser.execute_script("const e = window.vemu.editor; return {nodes: e.cy.nodes().map(n => n.id()), edges: e.cy.edges().map(x => x.id())}")
    wait(browser, lambda: ed()["nodes"] == ["n:n1", "n:n2"], what="the new lab's template")
    # A third node where the mouse clicks, and a link from n2 to it.
    click(browser, "ed-delete")  # nothing selected: nothing happens
    browser.find_element(By.CSS_SELECTOR, "#editor [data-tool=node]").click()
    click_at(browser, "edgraph", 40, 40)  # the template's nodes are in the middle
    wait(browser, lambda: "n:n3" in ed()["nodes"], what="n3 drawn")
    browser.find_element(By.CSS_SELECTOR, "#editor [data-tool=link]").click()
    for n in ["n:n2", "n:n3"]:
        p = rendered(browser, "editor.cy", n)
        click_at(browser, "edgraph", p["x"], p["y"])
    wait(browser, lambda: "l:1" in ed()["edges"], what="the link drawn")
    yaml = lambda: browser.find_element(By.ID, "edyaml").get_attribute("value")
    assert "endpoints: [n2, n3]" in yaml()
    # The new link is selected: a bad delay is shown at the link by the checker.
    field = browser.find_element(By.CSS_SELECTOR, "#edpanel input[name=delay]")
    field.send_keys("fast")
    browser.find_element(By.CSS_SELECTOR, "#edpanel button[type=submit]").click()
    click(browser, "ed-check")
    wait(browser, lambda: "problem" in browser.find_element(By.ID, "ed-status").text, what="the checker's answer")
    assert browser.execute_script("return window.vemu.editor.cy.$id('l:1').hasClass('error')")
    assert "links[1].delay" in browser.find_element(By.ID, "edpanel").text
    # Fixed in the text instead; the graph follows the text.
    area = browser.find_element(By.ID, "edyaml")
    browser.execute_script("arguments[0].value = arguments[0].value.replace('delay: fast', 'delay: 7ms').replace('name: drawn', 'name: t-ui-drawn'); arguments[0].dispatchEvent(new Event('input'))", area)
    wait(browser, lambda: "7ms" in browser.execute_script("return JSON.stringify(window.vemu.editor.js())"), what="the text taken")
    click(browser, "ed-check")
    wait(browser, lambda: browser.find_element(By.ID, "ed-status").text.startswith("valid: lab t-ui-drawn, 3 nodes, 2 links"), what="valid")
    # Downloaded, the file is one `vemu check` accepts.
    click(browser, "ed-download")
    saved = DOWNLOADS / "t-ui-drawn.yaml"
    saved.write_bytes(downloaded("t-ui-drawn.yaml"))
    vemu("check", str(saved))
    # Started from the page, it comes up as a lab of its own.
    vemu("down", "--lab", "t-ui-drawn", check=False)
    try:
        click(browser, "ed-up")
        wait(browser, lambda: "is up" in browser.find_element(By.ID, "ed-status").text, secs=60, what="the drawn lab up")
        assert browser.find_element(By.ID, "ed-uilink").get_attribute("href").startswith("http://127.0.0.1:")
        st = json.loads(vemu("status", "--lab", "t-ui-drawn", "--json").stdout)
        assert sorted(n["name"] for n in st["nodes"]) == ["n1", "n2", "n3"]
        assert next(l for l in st["links"] if l["name"] == "n2:n3")["forward"]["impairments"]["delay_ns"] == 7_000_000
    finally:
        vemu("down", "--lab", "t-ui-drawn", check=False)
    # A GraphML map opened in the editor is imported (delays from the distances).
    import_file(browser, ".graphml", GRAPHML)
    assert sorted(ed()["nodes"]) == ["n:Lille", "n:Lyon", "n:Paris"]
    assert "delay:" in yaml()
    # A radio channel where the mouse clicks, Lyon and Lille on it.
    browser.find_element(By.CSS_SELECTOR, "#editor [data-tool=radio]").click()
    click_at(browser, "edgraph", 40, browser.find_element(By.ID, "edgraph").size["height"] - 40)
    wait(browser, lambda: "s:radio1" in ed()["nodes"], what="the radio channel")
    browser.find_element(By.CSS_SELECTOR, "#editor [data-tool=link]").click()
    for n in ["n:Lyon", "s:radio1", "n:Lille", "s:radio1"]:
        p = rendered(browser, "editor.cy", n)
        click_at(browser, "edgraph", p["x"], p["y"])
    wait(browser, lambda: {"m:radio1:0", "m:radio1:1"} <= set(ed()["edges"]), what="Lyon and Lille on the radio channel")
    assert "kind: wireless" in yaml()
    click(browser, "ed-check")
    wait(browser, lambda: browser.find_element(By.ID, "ed-status").text.endswith("2 links, 1 segments"), what="valid with the channel")
    # Select, delete: the node goes with its links.
    browser.find_element(By.CSS_SELECTOR, "#editor [data-tool=select]").click()
    browser.execute_script("window.vemu.editor.cy.$id('n:Paris').emit('tap')")
    click(browser, "ed-delete")
    wait(browser, lambda: sorted(ed()["nodes"]) == ["n:Lille", "n:Lyon", "s:radio1"] and sorted(ed()["edges"]) == ["m:radio1:0", "m:radio1:1"], what="Paris and its links gone")
    # A containerlab topology opened is imported too: its bridge a LAN of the three.
    import_file(browser, ".clab.yml", CLAB)
    assert sorted(ed()["nodes"]) == ["n:a", "n:b", "n:c", "s:br1"]
    assert "kind: lan" in yaml()
    # An IMUNES topology opened: drawn where IMUNES drew it.
    import_file(browser, ".imn", IMN)
    at = lambda n: browser.execute_script("return window.vemu.editor.cy.$id(arguments[0]).position()", n)
    assert at("n:pc0") == {"x": 100, "y": 50} and at("n:pc1") == {"x": 300, "y": 150}
    assert "canvas: [100, 50]" in yaml()
    browser.find_element(By.CSS_SELECTOR, "header [data-view=lab]").click()


CLAB = """name: t-ui-clab
topology:
  nodes: {a: {}, b: {}, c: {}, br1: {kind: bridge}}
  links:
    - endpoints: ['a:eth1', 'br1:p1']
    - endpoints: ['b:eth1', 'br1:p2']
    - endpoints: ['c:eth1', 'br1:p3']
"""


IMN = """node n0 {
    type pc
    network-config {
\thostname pc0
\t!
\tinterface eth0
\t ip address 10.0.0.20/24
\t!
    }
    canvas c0
    iconcoords {100 50}
    labelcoords {100 80}
    interface-peer {eth0 n1}
}
node n1 {
    type pc
    network-config {
\thostname pc1
\t!
\tinterface eth0
\t ip address 10.0.0.21/24
\t!
    }
    canvas c0
    iconcoords {300 150}
    labelcoords {300 180}
    interface-peer {eth0 n0}
}
link l0 {
    nodes {n0 n1}
    bandwidth 0
}
"""


RADIO = """
name: t-ui-radio
addressing: {ipv6: none}
routing: none
nodes: {a: {}, b: {}, c: {}}
segments:
  air:
    kind: wireless
    propagation: unit-disk
    range: 250m
    csma: true
    members:
      - {node: a, position: [0, 0]}
      - {node: b, position: [200, 0]}
      - {node: c, position: [400, 0]}
"""


def test_wireless_nodes_are_drawn_to_scale_and_follow_moves(browser):
    with ui_lab("t-ui-radio", RADIO) as url:
        browser.get(url)
        wait(browser, lambda: browser.execute_script("return !!(window.vemu && window.vemu.ready) && window.vemu.lab.name === 't-ui-radio'"), what="the radio lab")
        pos = lambda n: browser.execute_script("return window.vemu.cy.$id('n:' + arguments[0]).position()", n)
        a, b, c = pos("a"), pos("b"), pos("c")
        # To scale: b halfway between a and c, on one line.
        assert abs((b["x"] - a["x"]) - (c["x"] - b["x"])) < 0.5 and a["y"] == b["y"] == c["y"], (a, b, c)
        radio = lambda: sorted(browser.execute_script("return window.vemu.cy.edges('[kind = \"radio\"]').map(e => e.id())"))
        assert radio() == ["r:air:a:b", "r:air:b:c"]
        # c moves next to a (the API's move): the page follows, and so do the neighbours.
        vemu("node", "move", "--lab", "t-ui-radio", "c", "--to", "0,100")
        wait(browser, lambda: abs(pos("c")["x"] - a["x"]) < 0.5, what="c drawn at its new place")
        wait(browser, lambda: radio() == ["r:air:a:b", "r:air:a:c", "r:air:b:c"], what="the new neighbours")
        # Selected, a shows its range (250 m) and carrier-sense (550 m) circles, to scale.
        browser.execute_script("window.vemu.cy.$id('n:a').emit('tap')")
        px = (b["x"] - a["x"]) / 200.0
        ring = lambda w: browser.execute_script("const r = window.vemu.cy.$id('ring:' + arguments[0]); return r.empty() ? null : [r.data('d'), r.position()]", w)
        wait(browser, lambda: ring("range") is not None, what="the circles")
        assert abs(ring("range")[0] - 500 * px) < 0.5 and abs(ring("cs")[0] - 1100 * px) < 0.5
        assert ring("range")[1] == pos("a")
        # Its panel: its 802.11 MAC (its rate once it sent) and, per neighbour, what its
        # frames became.
        vemu("exec", "--lab", "t-ui-radio", "a", "--", "ping", "-c", "3", "-i", "0.2", "-q", "b")
        mac = lambda: browser.execute_script("const p = document.querySelector('#radio .mac'); return p ? p.textContent : ''")
        wait(browser, lambda: mac().startswith("rate 11.00 Mbit/s") and "acknowledged" in mac(), what=f"a's MAC in its panel: {mac()!r}")
        row = lambda n: browser.execute_script("const r = document.querySelector('#radio tr[data-node=\"' + arguments[0] + '\"]'); return r ? [...r.children].map(c => c.textContent) : null", n)
        wait(browser, lambda: row("b") is not None and int(row("b")[4]) >= 3, what=f"a's frames delivered to b: {row('b')}")
        assert row("b")[2] == "100.0 %", row("b")
        # b dragged with the mouse 100 px to the right: the lab moves it (50 m at this scale).
        before = next(m for m in next(g for g in json.loads(vemu("status", "--lab", "t-ui-radio", "--json").stdout)["segments"])["members"] if m["port"].startswith("b:"))
        zoom = browser.execute_script("return window.vemu.cy.zoom()")
        p = browser.execute_script("return window.vemu.cy.$id('n:b').renderedPosition()")
        graph = browser.find_element(By.ID, "graph")
        size = graph.size
        ActionChains(browser).move_to_element_with_offset(graph, int(p["x"] - size["width"] / 2), int(p["y"] - size["height"] / 2)).click_and_hold() \
            .move_by_offset(50, 0).move_by_offset(50, 0).release().perform()
        want = before["radio"]["x_m"] + 100 / zoom / px

        def b_x():
            st = json.loads(vemu("status", "--lab", "t-ui-radio", "--json").stdout)
            return next(m for m in st["segments"][0]["members"] if m["port"].startswith("b:"))["radio"]["x_m"]
        wait(browser, lambda: abs(b_x() - want) < 3, what=f"b moved to x = {want:.0f} m")
        # Away from the page before its lab goes down (it would ask a closed port).
        browser.get("about:blank")


WIFI = """
name: t-ui-wifi
addressing: {ipv6: none}
routing: none
nodes: {ap1: {}, ap2: {}, sta: {}}
segments:
  air:
    kind: wireless
    propagation: free-space
    range: 300m
    csma: true
    standard: 802.11g
    members:
      - {node: ap1, position: [0, 0], role: ap, ssid: lab}
      - {node: ap2, position: [300, 0], role: ap, ssid: lab}
      - {node: sta, position: [30, 0], role: station, ssid: lab}
"""


def test_stations_are_drawn_joined_to_their_access_point_live(browser):
    with ui_lab("t-ui-wifi", WIFI) as url:
        browser.get(url)
        wait(browser, lambda: browser.execute_script("return !!(window.vemu && window.vemu.ready) && window.vemu.lab.name === 't-ui-wifi'"), what="the wifi lab")
        joined = lambda: browser.execute_script("return window.vemu.cy.edges('[kind = \"assoc\"]').map(e => [e.source().data('label'), e.target().data('label'), e.data('label')])")
        wait(browser, lambda: [j[:2] for j in joined()] == [["sta", "ap1"]], what=f"sta joined to ap1: {joined()}")
        assert joined()[0][2].endswith(" dBm"), joined()
        assert browser.execute_script("return window.vemu.cy.$id('n:ap1').data('ap')") == 1
        # sta jumps beside ap2: it loses ap1 (or roams) and joins ap2 — drawn live, and
        # marked on the timeline.
        vemu("node", "move", "--lab", "t-ui-wifi", "sta", "--to", "290,0")
        wait(browser, lambda: [j[:2] for j in joined()] == [["sta", "ap2"]], secs=30, what=f"sta joined to ap2: {joined()}")
        marks = lambda: browser.execute_script("return [...document.querySelectorAll('#timeline .mark.wifi')].map(m => m.title)")
        wait(browser, lambda: any("sta" in t and "ap2" in t for t in marks()), what=f"the timeline's wifi marks: {marks()}")
        # Its panel says whose station it is.
        browser.execute_script("window.vemu.cy.$id('n:sta').emit('tap')")
        panel = lambda: browser.execute_script("const p = document.querySelector('#radio .wifi'); return p ? p.textContent : ''")
        wait(browser, lambda: panel().startswith("station of 'lab' on ap2"), what=f"sta's panel: {panel()!r}")
        browser.get("about:blank")


CITY = """
name: t-ui-city
addressing: {ipv6: none}
routing: none
nodes: {a: {}, b: {}}
segments:
  town:
    kind: wireless
    members:
      - {node: a, position: [100, 150]}
      - {node: b, position: [100, 50]}
    city:
      manhattan: {blocks: 3x3, block: 100m, street: 20m}
"""


def test_a_city_is_drawn_and_a_members_received_power_mapped(browser):
    """NET's city on the page: its nine buildings and 24 streets drawn to scale under the
    nodes; a member's received-power map, dark behind the buildings (opaque), shown
    and taken away from its panel."""
    with ui_lab("t-ui-city", CITY) as url:
        browser.get(url)
        wait(browser, lambda: browser.execute_script("return !!(window.vemu && window.vemu.ready) && window.vemu.lab.name === 't-ui-city'"), what="the city lab")
        count = lambda sel: browser.execute_script(f"return window.vemu.cy.elements('{sel}').length")
        buildings = 'node[kind = "building"]'
        wait(browser, lambda: count(buildings) == 9, what=f"buildings: {count(buildings)}")
        assert count('edge[kind = "street"]') == 24
        # A building's box is to scale: 80 m of the 300 m city, as the nodes' 100 m apart.
        w = browser.execute_script("return window.vemu.cy.$id('b:town:4').data('w')")
        gap = browser.execute_script("const a = window.vemu.cy.$id('n:a').position(), b = window.vemu.cy.$id('n:b').position(); return Math.hypot(a.x - b.x, a.y - b.y)")
        assert abs(w / gap - 0.8) < 1e-6, (w, gap)
        browser.execute_script("window.vemu.cy.$id('n:a').emit('tap')")
        wait(browser, lambda: browser.execute_script("return !!document.querySelector('#power')"), what="the power button")
        browser.execute_script("document.querySelector('#power').click()")
        power = lambda: browser.execute_script("return window.vemu.power")
        wait(browser, lambda: power() and power()["cells"] > 100, what=f"the power map: {power()}")
        # Behind the buildings (opaque) nothing is heard: those cells are not drawn.
        assert power()["dark"] > 0, power()
        assert count('node[kind = "power"]') == power()["cells"]
        browser.execute_script("document.querySelector('#power').click()")
        wait(browser, lambda: count('node[kind = "power"]') == 0, what="the map taken away")
        browser.get("about:blank")
