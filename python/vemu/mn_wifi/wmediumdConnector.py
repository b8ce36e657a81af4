"""wmediumd's modes: vemu's 802.11 channel decides each frame by its signal against
noise and interference (SINR) and its rate's error curve whatever the mode — the
interference mode, always."""


class _Mode(object):
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


interference = _Mode('interference')
snr = _Mode('snr')
error_prob = _Mode('error_prob')
spec_prob = _Mode('spec_prob')
