"""Mininet's node library on vemu: ``LinuxBridge`` (a learning switch, with STP where
the switch is a bridge of its own) and ``NAT`` (refused: see docs/mininet.md)."""

from vemu.mininet.node import Node, NotEmulated, Switch


class LinuxBridge(Switch):
    "Linux Bridge (with optional spanning tree)"

    nextPrio = 100

    def __init__(self, name, stp=False, prio=None, **kwargs):
        self.stp = stp
        if prio:
            self.prio = prio
        else:
            self.prio = LinuxBridge.nextPrio
            LinuxBridge.nextPrio += 1
        Switch.__init__(self, name, **kwargs)

    def connected(self):
        if self.stp and self.where == 'node':
            return 'forwarding' in self.cmd('bridge link show')
        return True

    def dpctl(self, *args):
        return self.cmd('bridge', *args)


class NAT(Node):
    """Mininet's NAT joins the hosts to the machine's own network. vemu keeps a lab's
    traffic inside the lab; its management network (``mgmt: {nat: true}`` in a
    scenario, docs/images.md) is the way out for nodes that need one."""

    def __init__(self, name, subnet='10.0/8', localIntf=None, flush=False, **params):
        raise NotEmulated('%s: NAT to the machine\'s network is not offered by vemu.mininet '
                          '(a lab\'s traffic stays in the lab; see docs/mininet.md)' % name)
