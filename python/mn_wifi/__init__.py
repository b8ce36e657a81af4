"""``mn_wifi`` served by vemu.mn_wifi: with this directory's parent first on PYTHONPATH
(``vemu mininet --path``), unmodified Mininet-WiFi scripts build vemu labs."""

import importlib as _importlib
import sys as _sys

for _m in ('net', 'node', 'link', 'cli', 'wmediumdConnector', 'topo', 'replaying', 'plot'):
    _mod = _importlib.import_module('vemu.mn_wifi.' + _m)
    _sys.modules[__name__ + '.' + _m] = _mod
    globals()[_m] = _mod
