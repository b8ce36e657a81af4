"""``mininet`` served by vemu.mininet: put this directory's parent first on PYTHONPATH
(``vemu mininet --path`` prints it) and unmodified Mininet scripts build vemu labs.
A real Mininet installed on the machine is not touched."""

import importlib as _importlib
import sys as _sys

for _m in ('log', 'util', 'moduledeps', 'topo', 'link', 'node', 'nodelib', 'term', 'cli',
           'net', 'topolib', 'clean'):
    _mod = _importlib.import_module('vemu.mininet.' + _m)
    _sys.modules[__name__ + '.' + _m] = _mod
    globals()[_m] = _mod

# Mininet's other packages (mininet.examples, mininet.test) where a Mininet checkout or
# installation is on the path: found there, while the modules above stay vemu's.
import os as _os

for _p in list(_sys.path):
    _d = _os.path.join(_p or '.', 'mininet')
    if _os.path.isdir(_d) and all(_os.path.realpath(_d) != _os.path.realpath(q) for q in __path__):
        __path__.append(_d)
