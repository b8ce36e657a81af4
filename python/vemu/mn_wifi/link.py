"""Mininet-WiFi's link classes on vemu. ``wmediumd`` and the default wireless link are
vemu's 802.11 channel itself (its DCF decides every frame by signal, interference and
rate: there is no medium to choose); ``adhoc`` and ``mesh`` make a station an ad hoc
member of it; wired links are vemu's links. What has no counterpart is refused."""

from vemu.mininet.link import Intf, Link, TCIntf, TCLink  # noqa: F401 (Mininet's names)
from vemu.mininet.node import NotEmulated


class WirelessLink(object):
    "The network's radio (vemu's 802.11 channel): the default link of Mininet_wifi."


class wmediumd(WirelessLink):
    "wmediumd's medium: vemu's channel is one already (interference, SNR, error rates)."


class TCLinkWireless(WirelessLink):
    "A shaped wireless link: the channel's own rates shape it."


class adhoc(object):
    "An ad hoc radio (IBSS): the station is an ad hoc member of the channel."

    mode = 'adhoc'


class mesh(adhoc):
    """An 802.11s mesh point: an ad hoc member (forwarding is a routing daemon's, as
    vemu's MANETs do: give ``proto='babel'``)."""

    mode = 'mesh'


class _Refused(object):
    what = ''

    def __init__(self, *args, **kwargs):
        raise NotEmulated(self.what)


class physicalMesh(_Refused):
    what = 'physicalMesh: vemu has no physical radios'


class ITSLink(_Refused):
    what = 'ITSLink (802.11p OCB): not emulated by vemu\'s 802.11 channel'


class WifiDirectLink(_Refused):
    what = 'WifiDirectLink: Wi-Fi Direct is not emulated by vemu\'s 802.11 channel'


class PhysicalWifiDirectLink(_Refused):
    what = 'PhysicalWifiDirectLink: vemu has no physical radios'


class _4address(_Refused):
    what = '_4address (4-address WDS): not emulated by vemu\'s 802.11 channel'


class wmediumd_802154(_Refused):
    what = 'wmediumd_802154: 802.15.4 is not emulated'
