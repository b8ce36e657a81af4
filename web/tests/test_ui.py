"""The web interface in a real browser: headless Chromium (Debian's chromium and
chromium-driver) driven by Selenium, against a real lab's controller. Run as root
(labs need it): scripts/test.sh runs it."""

import contextlib
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VEMU = os.environ.get("VEMU", os.path.join(ROOT, "target", "release", "vemu"))

LAB = """
name: t-ui
addressing: {ipv6: none}
nodes:
  client: {}
  router: {}
  server: {}
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
routing: static
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
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_script_timeout(30)
    yield d
    d.quit()


def wait(d, cond, secs=20, what="condition"):
    return WebDriverWait(d, secs, poll_frequency=0.1).until(lambda _: cond(), message=what)


def test_login_link_opens_the_page_once_and_the_api_needs_it(lab, browser):
    base = lab.split("/ui/login")[0]
    # Without the link's session, neither the page nor the API answers.
    for path in ["/ui/", "/v1/lab"]:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + path, timeout=5)
        assert e.value.code == 401
    browser.get(lab)
    wait(browser, lambda: browser.execute_script("return !!(window.vemu && window.vemu.ready)"), what="the page to load the lab")
    assert browser.current_url == base + "/ui/"
    assert browser.find_element(By.ID, "summary").text.startswith("5 nodes, 2 links, 1 segments")
    # The graph: 5 nodes and the LAN's hub; 2 links and 3 LAN ports.
    counts = browser.execute_script("const cy = window.vemu.cy; return [cy.nodes().length, cy.edges().length]")
    assert counts == [6, 5]
    # The link works once.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(lab, timeout=5)
    assert e.value.code == 401


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
