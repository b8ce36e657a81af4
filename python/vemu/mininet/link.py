"""Mininet's links and interfaces on vemu: a link is a vemu link (or, to a switch made a
LAN segment, a port of that segment), and ``TCLink``'s parameters are vemu's
impairments in Mininet's units — carried out by vemu's data plane, which needs no
netem: ``bw`` (Mbit/s), ``delay`` and ``jitter`` ('5ms'), ``loss`` (percent),
``max_queue_size`` (packets). Each interface shapes what its node sends, so a ``delay``
on a link is added to each direction, as in Mininet.
"""

import re

from vemu.mininet.log import debug, error
from vemu.mininet.util import setParam


def _rate(bw):
    return '%dbit' % int(round(float(bw) * 1e6))


def _time(t, what):
    if isinstance(t, (int, float)):
        # (tc reads a bare number as microseconds)
        return '%gus' % t
    s = str(t).strip().replace(' ', '')
    m = re.fullmatch(r'(\d+(?:\.\d+)?)(us|usec|ms|msec|s|sec|secs)?', s)
    if not m:
        raise ValueError("%s %r: give a time such as '5ms'" % (what, t))
    unit = {'usec': 'us', 'msec': 'ms', 'sec': 's', 'secs': 's', None: 'us'}.get(m.group(2), m.group(2))
    return m.group(1) + unit


def impairments(bw=None, delay=None, jitter=None, loss=None, max_queue_size=None, **_rest):
    """vemu impairments (scenario keys) for TCIntf parameters."""
    out = {}
    if bw is not None:
        if float(bw) <= 0:
            raise ValueError('bw %r: a rate in Mbit/s above 0' % (bw,))
        out['bandwidth'] = _rate(bw)
    if delay is not None:
        out['delay'] = _time(delay, 'delay')
    if jitter is not None:
        out['jitter'] = _time(jitter, 'jitter')
    if loss is not None and float(loss) > 0:
        if float(loss) > 100:
            raise ValueError('loss %r: a percentage from 0 to 100' % (loss,))
        out['loss'] = '%g%%' % float(loss)
    if max_queue_size is not None:
        out['queue'] = str(int(max_queue_size))
    return out


class Intf(object):
    "An interface of a node; configured through the node's shell once the lab runs."

    def __init__(self, name, node=None, port=None, link=None, mac=None, **params):
        self.node = node
        self.name = name
        self.link = link
        self.mac = mac
        self.ip, self.prefixLen = None, None
        if self.name == 'lo':
            self.ip = '127.0.0.1'
            self.prefixLen = 8
        if node:
            params.pop('moveIntfFn', None)
            node.addIntf(self, port=port)
        self.params = params
        ip = params.get('ip')
        if ip:
            self.ip, _, plen = ip.partition('/')
            self.prefixLen = int(plen) if plen else None
        if params.get('mac'):
            self.mac = params['mac']
        #: vemu configured this interface when it built the lab: config() at build
        #: time only records.
        self.built = False

    def cmd(self, *args, **kwargs):
        return self.node.cmd(*args, **kwargs)

    def ifconfig(self, *args):
        return self.cmd('ifconfig', self.name, *args)

    def setIP(self, ipstr, prefixLen=None):
        if '/' in ipstr:
            ip, plen = ipstr.split('/')
        else:
            if prefixLen is None:
                raise Exception('No prefix length set for IP address %s' % (ipstr,))
            ip, plen = ipstr, prefixLen
        if self.built and ip == self.ip and str(plen) == str(self.prefixLen):
            return ''
        self.ip, self.prefixLen = ip, plen
        if self.node.where is None:
            return ''
        return self.ifconfig('%s/%s' % (ip, plen), 'up')

    def setMAC(self, macstr):
        if self.built and self.mac and macstr.lower() == self.mac.lower():
            return ''
        self.mac = macstr
        if self.node.where is None:
            return ''
        return (self.ifconfig('down') + self.ifconfig('hw', 'ether', macstr) + self.ifconfig('up'))

    _ipMatchRegex = re.compile(r'\d+\.\d+\.\d+\.\d+')
    _macMatchRegex = re.compile(r'..:..:..:..:..:..')

    def updateIP(self):
        ifconfig, _err, _exitCode = self.node.pexec('ifconfig %s' % self.name)
        ips = self._ipMatchRegex.findall(ifconfig)
        self.ip = ips[0] if ips else None
        return self.ip

    def updateMAC(self):
        ifconfig = self.ifconfig()
        macs = self._macMatchRegex.findall(ifconfig)
        self.mac = macs[0] if macs else None
        return self.mac

    def updateAddr(self):
        ifconfig = self.ifconfig()
        ips = self._ipMatchRegex.findall(ifconfig)
        macs = self._macMatchRegex.findall(ifconfig)
        self.ip = ips[0] if ips else None
        self.mac = macs[0] if macs else None
        return self.ip, self.mac

    def IP(self):
        return self.ip

    def MAC(self):
        return self.mac

    def isUp(self, setUp=False):
        if setUp:
            out = self.ifconfig('up')
            if out:
                error("Error setting %s up: %s " % (self.name, out))
                return False
            return True
        return "UP" in self.ifconfig()

    def rename(self, newname):
        raise NotImplementedError('%s: vemu names interfaces when it builds the lab; rename '
                                  'is not supported (give intfName1/intfName2 to addLink)' % self.name)

    def setParam(self, results, method, **param):
        return setParam(self, results, method, **param)

    def config(self, mac=None, ip=None, ifconfig=None, up=True, **_params):
        r = {}
        self.setParam(r, 'setMAC', mac=mac)
        self.setParam(r, 'setIP', ip=ip)
        self.setParam(r, 'isUp', up=up if not self.built else None)
        self.setParam(r, 'ifconfig', ifconfig=ifconfig)
        return r

    def delete(self):
        "The lab takes its interfaces with it when it goes down."

    def status(self):
        if self.node.where is None:
            return "MISSING"
        return "OK" if self.isUp() else "DOWN"

    def __repr__(self):
        return '<%s %s>' % (self.__class__.__name__, self.name)

    def __str__(self):
        return self.name


class TCIntf(Intf):
    """An interface that shapes what its node sends: vemu impairments on its direction
    of the link."""

    def __init__(self, *args, **kwargs):
        Intf.__init__(self, *args, **kwargs)
        self.impairments = impairments(**self.params)

    def config(self, bw=None, delay=None, jitter=None, loss=None, gro=False, txo=True, rxo=True,
               speedup=0, use_hfsc=False, use_tbf=False, latency_ms=None, enable_ecn=False,
               enable_red=False, max_queue_size=None, **params):
        result = Intf.config(self, **params)
        if not self.built:
            return result
        imp = impairments(bw=bw, delay=delay, jitter=jitter, loss=loss, max_queue_size=max_queue_size)
        if bw is None and 'bandwidth' in self.impairments:
            imp['bandwidth'] = 'unlimited'
        if delay is None and 'delay' in self.impairments:
            imp['delay'] = '0ms'
        if loss in (None, 0) and 'loss' in self.impairments:
            imp['loss'] = '0%'
        if jitter is None and 'jitter' in self.impairments:
            imp['jitter'] = '0ms'
        self.impairments = {k: v for k, v in imp.items() if v not in ('unlimited', '0ms', '0%')}
        if imp and self.link is not None:
            self.link._shape(self, imp)
        debug('%s: %s\n' % (self.name, imp))
        result['tc'] = imp
        return result


OVSIntf = Intf


class Link(object):
    """A link between two nodes: two interfaces, named ``node-ethN`` by default."""

    def __init__(self, node1, node2, port1=None, port2=None, intfName1=None, intfName2=None,
                 addr1=None, addr2=None, intf=Intf, cls1=None, cls2=None, params1=None,
                 params2=None, fast=True, **params):
        params1 = dict(params1) if params1 else {}
        params2 = dict(params2) if params2 else {}
        if port1 is not None:
            params1['port'] = port1
        if port2 is not None:
            params2['port'] = port2
        if 'port' not in params1:
            params1['port'] = node1.newPort()
        if 'port' not in params2:
            params2['port'] = node2.newPort()
        if not intfName1:
            intfName1 = self.intfName(node1, params1['port'])
        if not intfName2:
            intfName2 = self.intfName(node2, params2['port'])
        # Parameters for both interfaces (which win over each interface's own, as in
        # Mininet).
        params1 = dict(params1, **params)
        params2 = dict(params2, **params)
        if not cls1:
            cls1 = intf
        if not cls2:
            cls2 = intf
        # (addr1/addr2 are Mininet's random MACs: vemu gives its own, deterministic
        # from the lab's seed, unless the node or interface has a 'mac'.)
        intf1 = cls1(name=intfName1, node=node1, link=self, **params1)
        intf2 = cls2(name=intfName2, node=node2, link=self, **params2)
        self.intf1, self.intf2 = intf1, intf2
        #: How the lab knows this link: (spec, direction of intf1, direction of intf2).
        self.vemu = None

    @staticmethod
    def intfName(node, n):
        assert node
        return node.name + '-eth' + repr(n)

    def _shape(self, intf, imp):
        from vemu import Lab
        if self.vemu is None or not intf.node.lab:
            return
        spec, d1, d2 = self.vemu
        Lab(intf.node.lab).link(spec).set(direction=d1 if intf is self.intf1 else d2, **imp)

    def _state(self, up):
        from vemu import Lab
        if self.vemu is None:
            return
        link = Lab(self.intf1.node.lab or self.intf2.node.lab).link(self.vemu[0])
        link.up() if up else link.down()

    def delete(self):
        self.intf1.delete()
        self.intf2.delete()

    def stop(self):
        self.delete()

    def status(self):
        return "(%s %s)" % (self.intf1.status(), self.intf2.status())

    def __str__(self):
        return '%s<->%s' % (self.intf1, self.intf2)


class OVSLink(Link):
    "A link (Open vSwitch's patch ports are not needed: every link is vemu's)."


class TCLink(Link):
    "A link whose interfaces shape what they send (TCIntf on both ends)."

    def __init__(self, node1, node2, port1=None, port2=None, intfName1=None, intfName2=None,
                 addr1=None, addr2=None, **params):
        Link.__init__(self, node1, node2, port1=port1, port2=port2, intfName1=intfName1,
                      intfName2=intfName2, cls1=TCIntf, cls2=TCIntf, addr1=addr1, addr2=addr2,
                      params1=params, params2=params)


class TCULink(TCLink):
    "TCLink (the user-space switch's variant is the same on vemu)."
