"""Mininet 2.3's Python API on vemu: unmodified Mininet scripts build vemu labs.

``from vemu.mininet.net import Mininet`` works as ``from mininet.net import Mininet``
does; ``vemu mininet SCRIPT.py`` runs a script that imports ``mininet`` with this package
serving those imports (see docs/mininet.md for what maps to what, and what is refused).
Parts of this package are Mininet's own modules, adapted; their notice is in
LICENSE.mininet.
"""
