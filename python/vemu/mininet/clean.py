"""``mn -c``: take down the labs Mininet scripts left behind (``mn-*``): those of this
process, and — with ``vemu clean`` — those whose script has ended (each lab belongs to
the script that built it: ``vemu up --owner``) or crashed. A running script's lab is
left alone (another script's, or another ``mn``'s)."""

import os
import subprocess

from vemu.mininet.log import info

#: Where each lab notes the process it belongs to ("PID START-TICKS").
STATE_DIR = '/run/vemu'


def own_labs(pid=None):
    "The labs Mininet scripts built that belong to process ``pid`` (this one)."
    pid = os.getpid() if pid is None else pid
    labs = []
    try:
        names = sorted(os.listdir(STATE_DIR))
    except OSError:
        return labs
    for name in names:
        if not name.startswith('mn-'):
            continue
        try:
            with open(os.path.join(STATE_DIR, name, 'owner')) as f:
                words = f.read().split()
        except OSError:
            continue
        if words and words[0] == str(pid):
            labs.append(name)
    return labs


def cleanup():
    from vemu import find_vemu
    vemu = find_vemu()
    info('*** Removing vemu labs left by Mininet scripts\n')
    for name in own_labs():
        info(name + ' ')
        subprocess.run([vemu, 'down', name], capture_output=True)
    subprocess.run([vemu, 'clean'], capture_output=True)
    info('\n*** Cleanup complete.\n')


class Cleanup(object):
    callbacks = []

    @classmethod
    def cleanup(cls):
        for callback in cls.callbacks:
            callback()
        cleanup()

    @classmethod
    def addCleanupCallback(cls, callback):
        if callback not in cls.callbacks:
            cls.callbacks.append(callback)


def addCleanupCallback(callback):
    Cleanup.addCleanupCallback(callback)
