"""``plotGraph`` as a PNG: where the network's stations and access points are on the
lab (their current places), each radio's range, and which access point each station is
joined to — drawn with matplotlib into a file, as Mininet-WiFi draws its window. The
lab's web page (``vemu ui``) draws the same live."""

import os

from vemu.mininet.log import info, warn


def plot_png(net, path, max_x=None, max_y=None, min_x=0, min_y=0, **_kwargs):
    """Draw ``net``'s radios (from the running lab's status, else their given places)
    into ``path``; returns the path, or None when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        warn('*** plotGraph: matplotlib is missing here, so no PNG; the lab\'s web page '
             'draws the network live (vemu ui --lab %s)\n' % net.lab)
        return None
    from vemu.mn_wifi.node import _radio_status
    status = _radio_status(net.lab) if net.lab else {}
    where = {}
    for n in net.stations + net.aps:
        r = status.get(n.name)
        pos = (r['x_m'], r['y_m']) if r else (n._position[:2] if n._position else None)
        if pos is not None:
            where[n.name] = pos
    fig, ax = plt.subplots(figsize=(7, 7))
    for n in net.stations + net.aps:
        if n.name not in where:
            continue
        x, y = where[n.name]
        ap = n in net.aps
        ax.plot([x], [y], marker='^' if ap else 'o', markersize=10 if ap else 7,
                color='#00897b' if ap else '#3b6fb6')
        ax.annotate(n.name, (x, y), textcoords='offset points', xytext=(6, 6))
        rng = getattr(n.wintfs[0], 'range', None) if n.wintfs else None
        if rng:
            ax.add_patch(plt.Circle((x, y), float(rng), fill=False, linestyle='--',
                                    color='#00897b' if ap else '#7c4dff', alpha=0.5))
        joined = ((status.get(n.name) or {}).get('wifi') or {}).get('ap')
        if joined in where:
            ax.plot([x, where[joined][0]], [y, where[joined][1]], color='#00897b', linewidth=1)
    if max_x is not None:
        ax.set_xlim(float(min_x), float(max_x))
    if max_y is not None:
        ax.set_ylim(float(min_y), float(max_y))
    ax.set_aspect('equal', adjustable='box')
    ax.set_xlabel('x (m)')
    ax.set_ylabel('y (m)')
    ax.set_title('%s: stations and access points' % (net.lab or 'network'))
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=100, bbox_inches='tight')
    plt.close(fig)
    info('*** plotGraph: drawn to %s (and live on the lab\'s web page: vemu ui --lab %s)\n'
         % (os.path.abspath(path), net.lab))
    return path
