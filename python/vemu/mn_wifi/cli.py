"""Mininet-WiFi's CLI on vemu: Mininet's, and ``distance``, ``position``, ``stop`` and
``start`` (of the mobility), ``mininet-wifi>`` as its prompt."""

import sys
from cmd import Cmd
from select import poll

from vemu.mininet.cli import CLI as MN_CLI
from vemu.mininet.log import error, output


class CLI(MN_CLI):
    "Mininet-WiFi's command-line interface."

    prompt = 'mininet-wifi> '

    def __init__(self, mn_wifi, stdin=sys.stdin, script=None, cmd=None):
        if cmd:
            # One command, then back to the script (Mininet-WiFi's CLI(net, cmd=...)).
            Cmd.__init__(self, stdin=stdin)
            self.mn = mn_wifi
            self.locals = {'net': mn_wifi}
            self.inPoller = poll()
            self.inPoller.register(stdin)
            self.inputFile = None
            self.onecmd(cmd)
            return
        MN_CLI.__init__(self, mn_wifi, stdin=stdin, script=script)

    def do_distance(self, line):
        "Distance between two nodes: distance sta1 ap1"
        args = line.split()
        if len(args) != 2:
            error('invalid number of args: distance [sta or ap] [sta or ap]\n')
        elif args[0] == args[1]:
            error('invalid. Source and Destination are equals\n')
        else:
            self.mn.get_distance(*args)

    def do_position(self, line):
        "Where a node is: position sta1"
        for name in line.split():
            node = self.mn.nameToNode.get(name)
            pos = getattr(node, 'position', None) if node else None
            if pos is None:
                error('%s has no position\n' % name)
            else:
                output('%s: %s\n' % (name, ','.join('%g' % v for v in pos)))

    def do_stop(self, line):
        "Pause the mobility"
        self.mn.stop_simulation()

    def do_start(self, line):
        "Resume the mobility"
        self.mn.start_simulation()
