"""Mininet's nodes on vemu: a node is a vemu node (a network namespace with its own PID
namespace and cgroup), and ``node.cmd()`` talks to a persistent bash in it, as Mininet's
does — entered with ``vemu exec``, started on the first command.

Switches of every class are learning switches (a vemu LAN segment, or a node bridging
its ports when the switch is linked to other switches); controllers have nothing to do.
The shell protocol (the prompt is the sentinel chr(127), ``sendCmd``/``monitor``/
``waitOutput``) is Mininet 2.3's, whose copyright notice is in LICENSE.mininet.
"""

import fcntl
import os
import pty
import re
import select
import signal
import termios
from subprocess import PIPE, Popen

from vemu.mininet.log import debug, error, info, warn
from vemu.mininet.util import BaseString, decode, encode, getincrementaldecoder, isShellBuiltin, numCores, setParam
from vemu.mininet.link import Intf, Link, TCIntf, OVSIntf  # noqa: F401 (Mininet's names)


class NotEmulated(Exception):
    """Something a script asked for that vemu does not emulate (OpenFlow rules, ...)."""


def _own_terminal():
    """In the shell's process, before it runs: a session of its own whose controlling
    terminal is its pseudo-terminal, so that ``sendInt()``'s ^C interrupts the command
    in the foreground (as Mininet's mnexec arranges)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _vemu():
    from vemu import find_vemu
    return find_vemu()


class Node(object):
    """A vemu node with a shell in it."""

    portBase = 0  # Nodes start with eth0/port0

    # Mappings of shells' file descriptors to nodes (Mininet's, for monitoring many)
    inToNode = {}
    outToNode = {}

    def __init__(self, name, inNamespace=True, **params):
        self.name = params.get('name', name)
        self.privateDirs = params.get('privateDirs', [])
        self.inNamespace = params.get('inNamespace', inNamespace)
        self.params = params
        self.intfs = {}
        self.ports = {}
        self.nameToIntf = {}
        self.netUp = None
        self.where = None
        self._exited = False
        (self.shell, self.execed, self.pid, self.stdin, self.stdout,
         self.lastPid, self.lastCmd, self.pollOut) = (None,) * 8
        self.waiting = False
        self.readbuf = ''
        self.decoder = getincrementaldecoder()
        self.master, self.slave = None, None
        #: The vemu lab this node is in, once the network is built.
        self.lab = None
        #: Where vemu put this node: 'node' (a namespace of its own), 'root' (a
        #: switch made a LAN segment: its commands run in the machine's namespace, as
        #: Mininet's switches do) or None before the network is built.
        self.where = None
        self._exited = False
        #: Commands given before the network was built: run when it is.
        self.pending = []
        #: Brings the network's lab up once it is built (set by Mininet).
        self.netUp = None

    @property
    def stdout(self):
        """The shell's output (its pseudo-terminal). vemu starts a node's shell when it is
        first used; asking for its output once the network is built starts it too, as
        Mininet's nodes have theirs from the start (multiping.py polls every host's
        ``stdout.fileno()`` before giving it a command)."""
        if (self._stdout is None and self.shell is None and not self._exited
                and (self.where is not None or self.netUp is not None)):
            self._needShell()
        return self._stdout

    @stdout.setter
    def stdout(self, f):
        self._stdout = f

    @classmethod
    def fdToNode(cls, fd):
        return cls.outToNode.get(fd) or cls.inToNode.get(fd)

    # --- the shell ----------------------------------------------------------------

    def _enter(self):
        """The command line that runs a program in this node."""
        if self.where == 'node':
            return [_vemu(), 'exec', '--lab', self.lab, self.name, '--']
        return []

    def _up(self):
        "Bring the lab up if the network is built but its lab not yet made."
        if self.where is None and self.netUp:
            self.netUp()

    def _needShell(self):
        self._up()
        if self.shell is None and not self._exited:
            if self.where is None:
                raise RuntimeError(
                    "node %s has no shell until the network is built (net.build() or net.start())"
                    % self.name)
            self.startShell()

    def startShell(self, mnopts=None):
        "Start the node's shell: bash with the sentinel prompt, in a pseudo-terminal."
        if self.shell:
            error("%s: shell is already running\n" % self.name)
            return
        self.spawnShell()
        self.awaitShell()

    @staticmethod
    def startShells(nodes):
        """Start the shells of ``nodes`` that have none, all at once: each is spawned, then
        each awaited (what Mininet has done for every host when it starts; one at a
        time, each waits for its own ``vemu exec`` and bash, ~15 ms)."""
        todo = [n for n in nodes if n.shell is None and not n._exited and n.where is not None]
        for n in todo:
            n.spawnShell()
        for n in todo:
            n.awaitShell()

    def spawnShell(self):
        "Start the shell's process (awaitShell waits for its prompt)."
        cmd = self._enter() + ['env', 'PS1=' + chr(127), 'bash', '--norc', '--noediting',
                               '-is', 'mininet:' + self.name]
        self.master, self.slave = pty.openpty()
        self.shell = Popen(cmd, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                           close_fds=False, preexec_fn=_own_terminal)
        self.stdin = os.fdopen(self.master, 'r')
        self.stdout = self.stdin
        self.pid = self.shell.pid
        self.pollOut = select.poll()
        self.pollOut.register(self.stdout)
        self.outToNode[self.stdout.fileno()] = self
        self.inToNode[self.stdin.fileno()] = self
        self.execed = False
        self.lastCmd = None
        self.lastPid = None
        self.readbuf = ''

    def awaitShell(self):
        "Wait for the spawned shell's first prompt, then set it up."
        seen = ''
        while True:
            data = self.read(1024)
            seen += data
            if data and data[-1] == chr(127):
                break
            if self.shell.poll() is not None and not self.waitReadable(100):
                raise RuntimeError('the shell of node %s ended: %s' % (self.name, seen.strip()))
            self.pollOut.poll(1000)
        self.waiting = False
        self.cmd('unset HISTFILE; stty -echo; set +m')
        self._mountPrivateDirs()

    def _mountPrivateDirs(self):
        assert not isinstance(self.privateDirs, BaseString)
        for directory in self.privateDirs:
            if isinstance(directory, tuple):
                privateDir = directory[1] % self.__dict__
                mountPoint = directory[0]
                self.cmd('mkdir -p %s' % privateDir)
                self.cmd('mkdir -p %s' % mountPoint)
                self.cmd('mount --bind %s %s' % (privateDir, mountPoint))
            else:
                self.cmd('mkdir -p %s' % directory)
                self.cmd('mount -n -t tmpfs tmpfs %s' % directory)

    def cleanup(self):
        if self.shell:
            self.stdin.close()
            os.close(self.slave)
            try:
                self.shell.wait(timeout=5)
            except Exception:  # noqa: BLE001 (a shell that will not end is killed)
                self.shell.kill()
                self.shell.wait()
        self.shell = None

    def read(self, size=1024):
        count = len(self.readbuf)
        if count < size:
            try:
                data = os.read(self.stdout.fileno(), size - count)
            except OSError:  # the pty's other end is closed: the shell ended
                data = b''
            self.readbuf += self.decoder.decode(data)
        if size >= len(self.readbuf):
            result = self.readbuf
            self.readbuf = ''
        else:
            result = self.readbuf[:size]
            self.readbuf = self.readbuf[size:]
        return result

    def readline(self):
        self.readbuf += self.read(1024)
        if '\n' not in self.readbuf:
            return None
        pos = self.readbuf.find('\n')
        line = self.readbuf[0:pos]
        self.readbuf = self.readbuf[pos + 1:]
        return line

    def write(self, data):
        self._needShell()
        os.write(self.stdin.fileno(), encode(data))

    def terminate(self):
        if self.shell:
            if self.shell.poll() is None:
                try:
                    os.killpg(self.shell.pid, signal.SIGHUP)
                except ProcessLookupError:
                    pass
        self.cleanup()
        self._exited = True

    def stop(self, deleteIntfs=False):
        self.terminate()

    def waitReadable(self, timeoutms=None):
        if len(self.readbuf) == 0:
            return self.pollOut.poll(timeoutms)
        return None

    def sendCmd(self, *args, **kwargs):
        """Send a command, followed by a command to echo a sentinel, and return
        without waiting for the command to complete."""
        self._needShell()
        assert self.shell and not self.waiting
        printPid = kwargs.get('printPid', False)
        if len(args) == 1 and isinstance(args[0], list):
            cmd = args[0]
        elif len(args) > 0:
            cmd = args
        if not isinstance(cmd, str):
            cmd = ' '.join([str(c) for c in cmd])
        if not re.search(r'\w', cmd):
            cmd = 'echo -n'
        self.lastCmd = cmd
        if len(cmd) > 0 and cmd[-1] == '&':
            # print ^A{pid}\n so monitor() can set lastPid
            cmd += ' printf "\\001%d\\012" $! '
        elif printPid and not isShellBuiltin(cmd):
            # (Mininet's mnexec -p: the shell prints the PID it is about to exec.)
            cmd = 'sh -c \'printf "\\001%%d\\012" $$; exec "$@"\' sh ' + cmd
        self.write(cmd + '\n')
        self.lastPid = None
        self.waiting = True

    def sendInt(self, intr=chr(3)):
        debug('sendInt: writing chr(%d)\n' % ord(intr))
        self.write(intr)

    def monitor(self, timeoutms=None, findPid=True):
        ready = self.waitReadable(timeoutms)
        if not ready:
            return ''
        data = self.read(1024)
        if data == '' and self.shell.poll() is not None:
            self.waiting = False
            return ''
        pidre = r'\[\d+\] \d+\r\n'
        marker = chr(1) + r'\d+\r\n'
        if findPid and chr(1) in data:
            if re.findall(pidre, data):
                data = re.sub(pidre, '', data)
            while not re.findall(marker, data):
                data += self.read(1024)
            markers = re.findall(marker, data)
            if markers:
                self.lastPid = int(markers[0][1:])
                data = re.sub(marker, '', data)
        if len(data) > 0 and data[-1] == chr(127):
            self.waiting = False
            data = data[:-1]
        elif chr(127) in data:
            self.waiting = False
            data = data.replace(chr(127), '')
        return data

    def waitOutput(self, verbose=False, findPid=True):
        log = info if verbose else debug
        output = ''
        while self.waiting:
            data = self.monitor(findPid=findPid)
            output += data
            log(data)
        return output

    def cmd(self, *args, **kwargs):
        """Send a command, wait for its output, and return it."""
        verbose = kwargs.get('verbose', False)
        log = info if verbose else debug
        log('*** %s : %s\n' % (self.name, args))
        if self._exited:
            warn('(%s exited - ignoring cmd%s)\n' % (self, args))
            return None
        self._up()
        if self.where is None:
            # Before the network is built (a Node subclass's __init__, as Mininet's
            # examples have): run once the node exists, in order; no output to return.
            self.pending.append((args, kwargs))
            debug('%s: %s waits for the network to be built\n' % (self.name, args))
            return ''
        self.sendCmd(*args, **kwargs)
        return self.waitOutput(verbose)

    def cmdPrint(self, *args):
        return self.cmd(*args, **{'verbose': True})

    def popen(self, *args, **kwargs):
        """A Popen() of a command in this node."""
        self._up()
        if self.where is None:
            raise RuntimeError('node %s runs nothing until the network is built' % self.name)
        defaults = {'stdout': PIPE, 'stderr': PIPE, 'mncmd': self._enter()}
        defaults.update(kwargs)
        shell = defaults.pop('shell', False)
        if len(args) == 1:
            if isinstance(args[0], list):
                cmd = args[0]
            elif isinstance(args[0], BaseString):
                cmd = [args[0]] if shell else args[0].split()
            else:
                raise Exception('popen() requires a string or list')
        elif len(args) > 0:
            cmd = list(args)
        if shell:
            cmd = [os.environ.get('SHELL', '/bin/bash'), '-c'] + [' '.join(cmd)]
        cmd = defaults.pop('mncmd') + cmd
        popen = Popen(cmd, **defaults)
        debug('_popen', cmd, popen.pid)
        return popen

    def pexec(self, *args, **kwargs):
        popen = self.popen(*args, stdin=PIPE, stdout=PIPE, stderr=PIPE, **kwargs)
        out, err = popen.communicate()
        exitcode = popen.wait()
        return decode(out), decode(err), exitcode

    # --- interfaces -----------------------------------------------------------------

    def newPort(self):
        if len(self.ports) > 0:
            return max(self.ports.values()) + 1
        return self.portBase

    def addIntf(self, intf, port=None, moveIntfFn=None):
        if self.lab is not None and intf.link is not None:
            raise NotEmulated('links cannot be added to a running vemu network (%s)' % intf)
        if port is None:
            port = self.newPort()
        self.intfs[port] = intf
        self.ports[intf] = port
        self.nameToIntf[intf.name] = intf
        debug('added intf %s (%d) to node %s\n' % (intf, port, self.name))

    def delIntf(self, intf):
        port = self.ports.get(intf)
        if port is not None:
            del self.intfs[port]
            del self.ports[intf]
            del self.nameToIntf[intf.name]

    def defaultIntf(self):
        ports = self.intfs.keys()
        if ports:
            return self.intfs[min(ports)]
        warn('*** defaultIntf: warning:', self.name, 'has no interfaces\n')
        return None

    def intf(self, intf=None):
        if not intf:
            return self.defaultIntf()
        elif isinstance(intf, BaseString):
            return self.nameToIntf[intf]
        return intf

    def connectionsTo(self, node):
        connections = []
        for intf in self.intfList():
            link = intf.link
            if link:
                node1, node2 = link.intf1.node, link.intf2.node
                if node1 == self and node2 == node:
                    connections += [(intf, link.intf2)]
                elif node1 == node and node2 == self:
                    connections += [(intf, link.intf1)]
        return connections

    def deleteIntfs(self, checkName=True):
        for intf in list(self.intfs.values()):
            if (self.name in intf.name) or (not checkName):
                intf.delete()

    # --- routing and configuration ------------------------------------------------

    def setARP(self, ip, mac):
        return self.cmd('arp', '-s', ip, mac)

    def setHostRoute(self, ip, intf):
        return self.cmd('route add -host', ip, 'dev', intf)

    def setDefaultRoute(self, intf=None):
        if isinstance(intf, BaseString) and ' ' in intf:
            params = intf
        else:
            params = 'dev %s' % intf
        self.cmd('ip route del default; ip route add default', params)

    def setMAC(self, mac, intf=None):
        return self.intf(intf).setMAC(mac)

    def setIP(self, ip, prefixLen=8, intf=None, **kwargs):
        return self.intf(intf).setIP(ip, prefixLen, **kwargs)

    def IP(self, intf=None):
        i = self.intf(intf)
        return i.IP() if i else None

    def MAC(self, intf=None):
        i = self.intf(intf)
        return i.MAC() if i else None

    def intfIsUp(self, intf=None):
        return self.intf(intf).isUp()

    def setParam(self, results, method, **param):
        return setParam(self, results, method, **param)

    def config(self, mac=None, ip=None, defaultRoute=None, lo='up', **_params):
        """Configure the node (Mininet's parameters): the default interface's MAC and
        IP (vemu gave them when it built the node: set again only if they differ),
        the default route, and ``lo``."""
        r = {}
        self.setParam(r, 'setMAC', mac=mac)
        self.setParam(r, 'setIP', ip=ip)
        self.setParam(r, 'setDefaultRoute', defaultRoute=defaultRoute)
        if lo != 'up':
            self.cmd('ifconfig lo ' + lo)
        return r

    def configDefault(self, **moreParams):
        self.params.update(moreParams)
        self.config(**self.params)

    def linkTo(self, node, link=Link):
        return link(self, node)

    def intfList(self):
        return [self.intfs[p] for p in sorted(self.intfs.keys())]

    def intfNames(self):
        return [str(i) for i in self.intfList()]

    def __repr__(self):
        intfs = (','.join(['%s:%s' % (i.name, i.IP()) for i in self.intfList()]))
        return '<%s %s: %s pid=%s> ' % (self.__class__.__name__, self.name, intfs, self.pid)

    def __str__(self):
        return self.name

    isSetup = True

    @classmethod
    def checkSetup(cls):
        return

    @classmethod
    def setup(cls):
        return


class Host(Node):
    "A host is simply a Node"


class CPULimitedHost(Host):
    """A host whose processes share a CPU limit: Mininet's ``cpu`` (a fraction of the
    whole machine's CPU) becomes vemu's node limit in cores (``cpu × cores``)."""

    def __init__(self, name, sched='cfs', **kwargs):
        Host.__init__(self, name, **kwargs)
        if sched != 'cfs':
            raise NotEmulated("CPULimitedHost %s: sched=%r: vemu limits CPU with CFS quotas only" % (name, sched))
        self.sched = sched
        self.period_us = kwargs.get('period_us', 100000)

    def cpuCores(self, f=None):
        """The vemu limit (cores) of fraction ``f`` of the machine, None for none."""
        f = self.params.get('cpu', -1) if f is None else f
        if f is None or f < 0:
            return None
        return max(0.01, round(f * numCores(), 4))

    def setCPUFrac(self, f, sched=None):
        """Set the host's share of the whole machine's CPU (-1: no limit)."""
        self.params['cpu'] = f
        if self.lab is None:
            return
        from vemu import Lab
        cores = self.cpuCores(f)
        Lab(self.lab).node(self.name).set_limits(cpu=cores if cores is not None else 'none')
        if cores is not None:
            quota = int(self.period_us * f * numCores())
            info('(cfs %d/%dus) ' % (quota, self.period_us))

    def setCPUs(self, cores, mems=0):
        if cores:
            raise NotEmulated('CPULimitedHost %s: cores=%r: vemu does not pin nodes to cores' % (self.name, cores))

    def config(self, cpu=-1, cores=None, **params):
        r = Node.config(self, **params)
        # (The limit itself was given when vemu built the node.)
        self.setParam(r, 'setCPUs', cores=cores)
        return r


class Switch(Node):
    """A learning switch (every Mininet switch class is one: there is no OpenFlow)."""

    portBase = 1  # Switches start with port 1 in OpenFlow
    dpidLen = 16

    def __init__(self, name, dpid=None, opts='', listenPort=None, **params):
        Node.__init__(self, name, **params)
        self.dpid = self.defaultDpid(dpid)
        self.opts = opts
        self.listenPort = listenPort
        self.controlIntf = None

    def defaultDpid(self, dpid=None):
        if dpid:
            dpid = dpid.replace(':', '')
            assert len(dpid) <= self.dpidLen and int(dpid, 16) >= 0
        else:
            nums = re.findall(r'\d+', self.name)
            if nums:
                dpid = hex(int(nums[0]))[2:]
            else:
                raise Exception('Unable to derive default datapath ID - '
                                'please either specify a dpid or use a '
                                'canonical switch name such as s23.')
        return '0' * (self.dpidLen - len(dpid)) + dpid

    def connected(self):
        return True

    def start(self, controllers):
        "The switch runs once the network is built: nothing to start."

    def stop(self, deleteIntfs=True):
        self.terminate()

    def dpctl(self, *args):
        raise NotEmulated('%s dpctl %s: OpenFlow is not emulated: vemu switches are learning '
                          'switches (docs/mininet.md)' % (self.name, ' '.join(args)))

    def attach(self, intf):
        raise NotEmulated('%s: ports cannot be added to a running vemu network' % self.name)

    def detach(self, intf):
        raise NotEmulated('%s: ports cannot be removed from a running vemu network' % self.name)

    @classmethod
    def batchStartup(cls, switches, **_kwargs):
        return switches

    @classmethod
    def batchShutdown(cls, switches, **_kwargs):
        for s in switches:
            s.terminate()
        return switches

    def __repr__(self):
        intfs = (','.join(['%s:%s' % (i.name, i.IP()) for i in self.intfList()]))
        return '<%s %s: %s pid=%s> ' % (self.__class__.__name__, self.name, intfs, self.pid)


class UserSwitch(Switch):
    def __init__(self, name, dpopts='--no-slicing', **kwargs):
        Switch.__init__(self, name, **kwargs)


class OVSSwitch(Switch):
    def __init__(self, name, failMode='secure', datapath='kernel', inband=False,
                 protocols=None, reconnectms=1000, stp=False, batch=False, **params):
        Switch.__init__(self, name, **params)
        self.failMode = failMode
        self.datapath = datapath
        self.stp = stp

    @classmethod
    def setup(cls):
        return

    def vsctl(self, *args, **kwargs):
        raise NotEmulated('%s ovs-vsctl %s: there is no Open vSwitch: vemu switches are '
                          'learning switches (docs/mininet.md)' % (self.name, ' '.join(map(str, args))))


OVSKernelSwitch = OVSSwitch


class OVSBridge(OVSSwitch):
    "An OVSSwitch in standalone mode: a learning switch."

    def __init__(self, *args, **kwargs):
        kwargs.update(failMode='standalone')
        OVSSwitch.__init__(self, *args, **kwargs)


class IVSSwitch(Switch):
    def __init__(self, name, verbose=False, **kwargs):
        Switch.__init__(self, name, **kwargs)


class Controller(Node):
    """An OpenFlow controller: vemu's switches learn by themselves, so it has nothing to
    do; accepted so that scripts run."""

    def __init__(self, name, inNamespace=False, command='controller', cargs='ptcp:%d',
                 cdir=None, ip='127.0.0.1', port=6653, protocol='tcp', **params):
        Node.__init__(self, name, inNamespace=inNamespace, **params)
        self.ip = ip
        self.port = port
        self.protocol = protocol
        self.where = 'root'

    def start(self):
        "Nothing to start: vemu's switches are learning switches."

    def stop(self, *args, **kwargs):
        self.terminate()

    def checkListening(self):
        return

    def IP(self, intf=None):
        return self.ip

    def __repr__(self):
        return '<%s %s: %s:%s pid=%s> ' % (self.__class__.__name__, self.name, self.IP(), self.port, self.pid)

    @classmethod
    def isAvailable(cls):
        return True


class OVSController(Controller):
    pass


class NOX(Controller):
    def __init__(self, name, *noxArgs, **kwargs):
        Controller.__init__(self, name, **kwargs)


class Ryu(Controller):
    def __init__(self, name, ryuArgs='ryu.app.simple_switch', command='ryu run', **kwargs):
        Controller.__init__(self, name, **kwargs)


class RemoteController(Controller):
    """A controller elsewhere: its rules would not be applied — vemu does not emulate
    OpenFlow, its switches learn by themselves. Said once when the network starts."""

    def __init__(self, name, ip='127.0.0.1', port=None, **kwargs):
        Controller.__init__(self, name, ip=ip, port=port, **kwargs)


def findController(controllers=None):
    return Controller


def DefaultController(name, controllers=None, **kwargs):
    "The default controller (one that has nothing to do)."
    return Controller(name, **kwargs)


def NullController(*_args, **_kwargs):
    "Nonexistent controller - simply returns None"
    return None
