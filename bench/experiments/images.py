"""Image nodes: 100 nodes of one image beside the same lab without `image:` (up, down,
disk), and an image's first start (copied and unpacked) beside a cached one."""

import os
import shutil
import subprocess
import tempfile

from .common import ROOT, down, plot, up, write_csv, write_md


def du_mib(path):
    """Disk used under `path` (MiB), each file once."""
    r = subprocess.run(["du", "-s", "-B1", path], capture_output=True, text=True)
    return int(r.stdout.split()[0]) / 2**20 if r.returncode == 0 and r.stdout else 0.0


def bench_images():
    subprocess.run(["bash", os.path.join(ROOT, "scripts/test-images.sh")], check=True)
    image = os.path.join(ROOT, "target/test-images/alpha")
    store = os.path.join(tempfile.gettempdir(), "vemu-bench-images")
    os.environ["VEMU_IMAGES_DIR"] = store
    n = int(os.environ.get("VEMU_IMAGES_NODES", "100"))
    rounds = 3
    nodes = "".join(f"  h{i}: {{}}\n" for i in range(1, n + 1))
    members = ", ".join(f"h{i}" for i in range(1, n + 1))
    # The same lab either way: each node runs one program (the image's main process, or
    # the same `sleep` as a run command), so that the difference is the image's.
    lab = lambda img: ("name: bimg\nrouting: none\naddressing: {ipv6: none}\n"
                       + (f"defaults: {{node: {{image: {image}}}}}\n" if img else "defaults: {node: {run: ['exec sleep infinity']}}\n")
                       + f"nodes:\n{nodes}segments:\n  lan: {{kind: lan, members: [{members}]}}\n")
    rows = []
    for setting in ["no image", "image, first start", "image, cached"]:
        ups, downs, disk = [], [], []
        for r in range(rounds if setting != "image, first start" else 1):
            if setting == "image, first start":
                shutil.rmtree(store, ignore_errors=True)
            ups.append(up("bimg", lab(setting != "no image")))
            # Disk: the store's copy of the image (layout + unpacked root) and what the
            # nodes wrote so far (their upper directories, on the lab's tmpfs).
            uppers = sum(du_mib(f"/run/vemu/bimg/fs/h{i}/image/upper") for i in range(1, n + 1)) if setting != "no image" else 0.0
            disk.append((du_mib(store) if setting != "no image" else 0.0, uppers))
            downs.append(down("bimg"))
        med = lambda xs: sorted(xs)[len(xs) // 2]
        row = [setting, n, med(ups), med(downs), disk[-1][0], disk[-1][1]]
        rows.append(row)
        print(f"images {setting:20s}: {n} nodes up {row[2]:.2f} s, down {row[3]:.2f} s, store {row[4]:.1f} MiB, nodes' own {row[5]:.2f} MiB")
    shutil.rmtree(store, ignore_errors=True)
    base = rows[0]
    cached = rows[2]
    write_csv("images.csv", ["setting", "nodes", "up_s", "down_s", "store_mib", "nodes_upper_mib"], rows)
    plot("images.png", f"{n} nodes: with and without an image", "setting (0 none, 1 first start, 2 cached)", "seconds",
         [("up", [0, 1, 2], [r[2] for r in rows]), ("down", [0, 1, 2], [r[3] for r in rows])])
    write_md("images", f"Image nodes: {n} nodes of one image", "IMUNES' per-node images (vimage), containerlab's image nodes; the issue's goal ≤ 1.5× the time without an image, one copy on disk",
             ["setting", "nodes", "up (s)", "down (s)", "image store (MiB)", "nodes' own (MiB)"], rows,
             [f"Cached, up takes {cached[2] / base[2]:.2f}× and down {cached[3] / base[3]:.2f}× the lab without an image (median of {rounds}).",
              "One copy on disk: the store holds the image once (its OCI layout and one unpacked root) however many nodes use it; each node's own writes are its upper directory."])
