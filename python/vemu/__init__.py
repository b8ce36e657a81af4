"""Python client of vemu, the scalable network emulator.

A lab is brought up with :meth:`Lab.up` (which runs ``vemu up``) or reached with
:meth:`Lab.connect`; everything else goes through the lab controller's HTTP/JSON API
(``/v1/...``, described by ``GET /v1/openapi.json``), over the lab's Unix socket or, with a
bearer token, over TCP.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

__all__ = ["Lab", "Node", "Link", "Result", "VemuError", "find_vemu", "test", "TestRun"]

STATE_DIR = "/run/vemu"


class VemuError(Exception):
    """An error answer of the API (``status`` is the HTTP status), or a failed command."""

    def __init__(self, status: int, message: str, details: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        #: The whole error answer, e.g. a scenario check's ``errors`` (line, col, field, message).
        self.details = details or {}

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.status})" if self.status else self.message


@dataclass(frozen=True)
class Result:
    """What a command run in a node did."""

    exit: int
    stdout: str
    stderr: str
    timed_out: bool = False
    #: Some output was cut at the API's limit (16 MiB per stream unless asked otherwise).
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit == 0


def find_vemu() -> str:
    """The ``vemu`` executable: ``$VEMU``; else, for this package as ``vemu mininet
    --path`` wrote it out, the executable that wrote it (named in the file
    ``vemu-executable`` beside this module); else ``vemu`` on ``PATH``."""
    exe = os.environ.get("VEMU")
    if not exe:
        try:
            with open(os.path.join(os.path.dirname(__file__), "vemu-executable")) as f:
                written_by = f.read().strip()
            if os.access(written_by, os.X_OK):
                exe = written_by
        except OSError:
            pass
    exe = exe or shutil.which("vemu")
    if not exe:
        raise VemuError(0, "cannot find the vemu command: put it on PATH or set VEMU")
    return exe


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("vemu", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Lab:
    """A running lab, reached through its API. Use as a context manager to take the lab
    down at the end of the block when this object brought it up."""

    def __init__(self, name: str, url: Optional[str] = None, token: Optional[str] = None, owned: bool = False) -> None:
        self.name = name
        self._url = urllib.parse.urlsplit(url) if url else None
        if self._url is not None and self._url.scheme != "http":
            # The controller serves plain HTTP only: never send the token somewhere the
            # caller believes to be encrypted.
            raise VemuError(0, f"unsupported URL scheme {self._url.scheme!r}: the lab API speaks plain http:// "
                            "(reach a remote lab through an SSH tunnel to its 127.0.0.1 address)")
        self._token = token
        self._owned = owned

    # --- life cycle -------------------------------------------------------------------

    @classmethod
    def up(cls, scenario: Union[str, os.PathLike], name: Optional[str] = None, api: Optional[str] = None) -> "Lab":
        """Bring up a lab from a scenario file (``vemu up``) and return it once ready.
        ``api="127.0.0.1:8080"`` also serves the API on TCP."""
        cmd = [find_vemu(), "up", os.fspath(scenario)]
        if name:
            cmd += ["--name", name]
        if api:
            cmd += ["--api", api]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise VemuError(0, (r.stderr or r.stdout).strip())
        lab_name = name
        if not lab_name:
            # "lab 'NAME' is up: ..."
            first = r.stdout.split("'")
            lab_name = first[1] if len(first) > 2 else ""
        return cls(lab_name, owned=True)

    @classmethod
    def connect(cls, name: str, url: Optional[str] = None, token: Optional[str] = None) -> "Lab":
        """A running lab: over its Unix socket, or over TCP at ``url`` with ``token``."""
        lab = cls(name, url=url, token=token)
        lab.status()
        return lab

    def down(self) -> None:
        """Take the lab down and remove every trace of it."""
        self._call("POST", "/v1/down", {})
        self._owned = False

    def __enter__(self) -> "Lab":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._owned:
            self.down()

    # --- the API ----------------------------------------------------------------------

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._url is None:
            return _UnixConnection(os.path.join(STATE_DIR, self.name, "api.sock"), timeout)
        port = self._url.port or 80
        return http.client.HTTPConnection(self._url.hostname or "localhost", port, timeout=timeout)

    def _headers(self) -> Dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self._token:
            h["Authorization"] = f"Bearer {self._token}"
        return h

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None, timeout: Optional[float] = 120.0) -> Any:
        conn = self._connection(timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            try:
                conn.request(method, path, body=data, headers=self._headers())
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise VemuError(0, f"lab '{self.name}' is not running ({e})") from None
            res = conn.getresponse()
            raw = res.read()
        finally:
            conn.close()
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            raise VemuError(res.status, raw.decode(errors="replace")) from None
        if res.status >= 400:
            message = value.get("error", "request failed") if isinstance(value, dict) else str(value)
            raise VemuError(res.status, message, value if isinstance(value, dict) else None)
        return value

    def status(self) -> Dict[str, Any]:
        """Everything about the lab: nodes, links, segments, impairments, counters."""
        return self._call("GET", "/v1/lab")

    def timeline(self) -> Dict[str, Any]:
        """The scenario's events as planned (each with its ``index``) and the lab clock
        (``now_ns``); their firings come as ``timeline`` events."""
        return self._call("GET", "/v1/timeline")

    def check_scenario(self, yaml: str, file: Optional[str] = None) -> Dict[str, Any]:
        """Check a scenario's text as ``vemu check`` does (this lab is not touched): what
        the lab would have, or :class:`VemuError` (422) whose ``details["errors"]`` give
        each problem's line, column and field."""
        body: Dict[str, Any] = {"yaml": yaml}
        if file is not None:
            body["file"] = file
        return self._call("POST", "/v1/scenario/check", body)

    def expect(self) -> Dict[str, Any]:
        """The lab's checks (``expect:`` in its scenario) as they stand: ``checks`` (each
        with ``name``, ``outcome`` — pending, passed, failed or untrustworthy —,
        ``measured_ns`` and ``detail``), ``done`` and the ``exit`` status ``vemu test``
        would give (docs/testing.md)."""
        return self._call("GET", "/v1/expect")

    def stats(self) -> Dict[str, Any]:
        """Counters of every link direction and segment port (``t_ns``: lab-clock time)."""
        return self._call("GET", "/v1/stats")

    def nodes(self) -> List["Node"]:
        return [Node(self, n["name"]) for n in self._call("GET", "/v1/nodes")]

    def node(self, name: str) -> "Node":
        return Node(self, name)

    def link(self, a: str, b: Optional[str] = None) -> "Link":
        """A link by its ends (``lab.link("r1", "r2")``) or name; a LAN port as
        ``lab.link("lan1", "h1")`` (forward = toward h1)."""
        return Link(self, a if b is None else f"{a}:{b}")

    def traffic_cbr(self, src: str, dst: str, rate_pps: float, size_bytes: int = 64, start_s: Optional[float] = None,
                    duration_s: Optional[float] = None, count: Optional[int] = None) -> Dict[str, Any]:
        """Start a constant-bit-rate UDP flow from node ``src`` to node ``dst`` (first
        packet at lab time ``start_s``, or now); returns the flow (``id``, ``port``, ...).
        ``vemu report`` reads the per-packet records."""
        body: Dict[str, Any] = {"from": src, "to": dst, "size_bytes": size_bytes, "rate_pps": rate_pps}
        if start_s is not None:
            body["start_ns"] = int(start_s * 1e9)
        if duration_s is not None:
            body["duration_ns"] = int(duration_s * 1e9)
        if count is not None:
            body["count"] = count
        return self._call("POST", "/v1/traffic", body)

    def events(self, stats: Optional[str] = "1s") -> Iterator[Dict[str, Any]]:
        """Events as they happen (``type``: link, node, timeline, positions, traffic, stats,
        warning, lab-down); stats
        snapshots every ``stats`` (``None``: none). Ends when the lab goes down."""
        query = "?" + urllib.parse.urlencode({"stats": stats or "0"})
        conn = self._connection(None)
        conn.request("GET", "/v1/events" + query, headers=self._headers())
        res = conn.getresponse()
        if res.status >= 400:
            body = res.read()
            conn.close()
            raise VemuError(res.status, json.loads(body).get("error", "request failed"))
        try:
            while True:
                line = res.readline()
                if not line:
                    return
                if line.startswith(b"data:"):
                    yield json.loads(line[5:].strip())
        finally:
            conn.close()


class Node:
    """A node of a lab."""

    def __init__(self, lab: Lab, name: str) -> None:
        self.lab = lab
        self.name = name

    def _path(self, tail: str = "") -> str:
        return f"/v1/nodes/{urllib.parse.quote(self.name, safe='')}{tail}"

    def info(self) -> Dict[str, Any]:
        return self.lab._call("GET", self._path())

    def run(self, cmd: Union[str, Sequence[str]], timeout: float = 60.0, stdin: Optional[str] = None, check: bool = False) -> Result:
        """Run a command in the node and wait for it: a string goes to ``/bin/sh -c``, a
        list is run as is. ``check=True`` raises :class:`VemuError` on a non-zero exit."""
        body: Dict[str, Any] = {"cmd": cmd if isinstance(cmd, str) else list(cmd), "timeout_s": timeout}
        if stdin is not None:
            body["stdin"] = stdin
        r = self.lab._call("POST", self._path("/exec"), body, timeout=timeout + 30)
        result = Result(r["exit"], r["stdout"], r["stderr"], r.get("timed_out", False), r.get("truncated", False))
        if check and not result.ok:
            raise VemuError(0, f"'{cmd}' in {self.name} exited with {result.exit}: {result.stderr.strip()}")
        return result

    def stream(self, cmd: Union[str, Sequence[str]], timeout: float = 60.0, stdin: Optional[str] = None) -> Iterator[Dict[str, Any]]:
        """Run a command in the node and yield its output as it comes:
        ``{"stdout": text}``, ``{"stderr": text}``, and last ``{"exit": N, "timed_out": bool}``."""
        body: Dict[str, Any] = {"cmd": cmd if isinstance(cmd, str) else list(cmd), "timeout_s": timeout, "stream": True}
        if stdin is not None:
            body["stdin"] = stdin
        conn = self.lab._connection(timeout + 30)
        try:
            conn.request("POST", self._path("/exec"), body=json.dumps(body).encode(), headers=self.lab._headers())
            res = conn.getresponse()
            if res.status >= 400:
                raise VemuError(res.status, json.loads(res.read()).get("error", "request failed"))
            while True:
                line = res.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()

    def log(self, bytes: int = 16384) -> str:
        """The end of the node's log (its ``run`` and timeline commands' output): the
        whole lines of its last ``bytes`` bytes."""
        return self.lab._call("GET", self._path(f"/log?bytes={int(bytes)}"))["text"]

    def stop(self) -> None:
        """End every process in the node (its run commands are not restarted)."""
        self.lab._call("POST", self._path("/stop"), {})

    def start(self) -> None:
        """Start the node's run commands again."""
        self.lab._call("POST", self._path("/start"), {})

    def move(self, x: float, y: float, speed: Optional[float] = None) -> None:
        """Move the node on its wireless segments to (x, y) metres: at once, or in a
        straight line at ``speed`` m/s. It stays there (its mobility model stops)."""
        body: Dict[str, Any] = {"x": x, "y": y}
        if speed is not None:
            body["speed"] = speed
        self.lab._call("POST", self._path("/move"), body)

    def set_limits(self, **limits: Union[str, int, float, None]) -> Dict[str, Any]:
        """Change the node's limits: ``cpu`` (cores), ``memory`` (bytes or "256MiB"),
        ``pids``; ``None`` lifts one. Returns the limits now in force."""
        return self.lab._call("PATCH", self._path(), dict(limits))["limits"]

    def __repr__(self) -> str:
        return f"Node({self.name!r})"


class Link:
    """A link (or LAN port) of a lab, named as vemu names it (``a:b``, or its name)."""

    def __init__(self, lab: Lab, spec: str) -> None:
        self.lab = lab
        self.spec = spec

    def _path(self, tail: str = "") -> str:
        return f"/v1/links/{urllib.parse.quote(self.spec, safe=':')}{tail}"

    def set(self, direction: str = "both", **impairments: Union[str, int, float]) -> None:
        """Change impairments, written as in a scenario file: ``delay="20ms"``,
        ``loss="1%"``, ``bandwidth="10Mbit"`` (or ``"unlimited"``), ``jitter``,
        ``duplicate``, ``corrupt``, ``reorder``, ``queue``, ``shaper`` (``"engine"`` or
        ``"kernel"``). ``direction``: ``both``,
        ``forward`` (from the first-named end) or ``reverse``."""
        if not impairments:
            raise ValueError("give at least one impairment, e.g. delay='20ms'")
        body: Dict[str, Any] = {"direction": direction}
        body.update({k: str(v) for k, v in impairments.items()})
        self.lab._call("PATCH", self._path(), body)

    def down(self) -> None:
        """Take the link down: frames are dropped and the interfaces lose carrier."""
        self.lab._call("POST", self._path("/down"), {})

    def up(self) -> None:
        self.lab._call("POST", self._path("/up"), {})

    def info(self) -> Dict[str, Any]:
        """This link's entry of the lab status (impairments and counters)."""
        for link in self.lab._call("GET", "/v1/links"):
            ends = {f"{link['a'].split(':')[0]}:{link['b'].split(':')[0]}", f"{link['b'].split(':')[0]}:{link['a'].split(':')[0]}"}
            if link["name"] == self.spec or self.spec in ends:
                return link
        raise VemuError(404, f"no link '{self.spec}'")

    def __repr__(self) -> str:
        return f"Link({self.spec!r})"


@dataclass(frozen=True)
class TestRun:
    """What ``vemu test`` said: its exit status (0 passed, 1 a check failed, 3
    untrustworthy, 130 interrupted) and its results (``checks``; with ``repeat``, every
    run's and the pass rates)."""

    exit: int
    results: Dict[str, Any]

    @property
    def passed(self) -> bool:
        return self.exit == 0


def test(scenario: Union[str, os.PathLike], name: Optional[str] = None, repeat: int = 1,
         seed: Optional[int] = None, junit: Optional[Union[str, os.PathLike]] = None) -> TestRun:
    """Run a scenario as a test (``vemu test``): the lab comes up, its checks are judged,
    it goes down. Bad input raises :class:`VemuError` (as ``vemu test``'s exit 2)."""
    cmd = [find_vemu(), "test", os.fspath(scenario), "--json", "--repeat", str(repeat)]
    if name:
        cmd += ["--name", name]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if junit is not None:
        cmd += ["--junit", os.fspath(junit)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 2 or not r.stdout.strip():
        raise VemuError(0, (r.stderr or r.stdout).strip() or f"vemu test exited {r.returncode}")
    return TestRun(exit=r.returncode, results=json.loads(r.stdout))
