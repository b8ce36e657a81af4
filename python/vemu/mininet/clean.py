"""``mn -c``: take down the labs Mininet scripts left behind (``mn-*``), with ``vemu
clean`` for the remains of any that crashed."""

import subprocess

from vemu.mininet.log import info


def cleanup():
    from vemu import find_vemu
    vemu = find_vemu()
    info('*** Removing vemu labs left by Mininet scripts\n')
    out = subprocess.run([vemu, 'ls'], capture_output=True, text=True).stdout
    for line in out.splitlines():
        words = line.split()
        if words and words[0].startswith('mn-'):
            info(words[0] + ' ')
            subprocess.run([vemu, 'down', words[0]], capture_output=True)
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
