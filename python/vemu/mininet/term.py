"""Terminals: vemu.mininet opens no X11 windows; ``vemu shell --lab LAB NODE`` (or the
web interface's terminal) is a node's terminal."""

from vemu.mininet.log import error


def makeTerm(node, title='Node', term='xterm', display=None, cmd='bash'):
    error('%s: no %s here: use "vemu shell --lab %s %s" for a terminal in the node\n'
          % (node.name, term, node.lab, node.name))
    return []


def makeTerms(nodes, title='Node', term='xterm'):
    terms = []
    for node in nodes:
        terms += makeTerm(node, title, term)
    return terms


def runX11(node, cmd):
    error('%s: X11 is not forwarded into vemu nodes\n' % node.name)
    return None, None


def cleanUpScreens():
    "No screens to clean up."


def tunnelX11(node, display=None):
    return None, None
