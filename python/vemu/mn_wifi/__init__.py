"""Mininet-WiFi's API on vemu (``import mn_wifi`` with ``vemu mininet SCRIPT``): its
scripts build vemu labs whose radio is vemu's own 802.11 channel, on machines without
mac80211_hwsim. The mapping, and what is refused, is in docs/mininet.md."""
