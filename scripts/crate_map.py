#!/usr/bin/env python3
"""The crate map of docs/design.md against the code (issue 63): fails when

- a crate depends on another of vemu's (its Cargo.toml's [dependencies]) by an edge
  that the map's list of dependencies does not give ("Dependencies point one way"), or
  the list gives an edge no Cargo.toml has any more;
- a crate has no row in the map's crate table;
- a top-level module of a crate (src/NAME.rs or src/NAME/, but lib.rs and main.rs) is
  not named in backquotes in its crate's row or in a paragraph of the page that names
  the crate (`NAME`, `NAME.rs`, `NAME::…`, `NAME/…`, `dir/NAME.rs`);
- a crate declares a dependency (or dev-dependency) that none of its Rust files names
  (as `cargo machete` finds them: by the name, `-` read as `_`).

Dev-dependencies' edges are not checked (tests may use any crate below them).
`--self-test` runs the checks on made-up pages.
"""
import glob
import os
import re
import sys
import tomllib

UNUSED = []
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EDGE = re.compile(r"^- (`[^`]+`(?:, `[^`]+`)*) → (.*)$")


def listed_edges(doc):
    """{(from, to)} of the page's list, and the crates it lists as depending on nothing."""
    edges, leaves = set(), set()
    for line in doc.splitlines():
        m = EDGE.match(line.strip())
        if not m:
            continue
        sources = re.findall(r"`([^`]+)`", m.group(1))
        targets = re.findall(r"`([^`]+)`", m.group(2))
        if not targets:
            leaves.update(sources)
        for a in sources:
            edges.update((a, b) for b in targets)
    return edges, leaves


def crate_text(doc, crate):
    """The crate's table row and every paragraph (not a table) that names it."""
    out = [l for l in doc.splitlines() if l.startswith(f"| `{crate}` |")]
    for block in re.split(r"\n\s*\n", doc):
        if not block.lstrip().startswith("|") and f"`{crate}`" in block:
            out.append(block)
    return "\n".join(out)


def named(text, module):
    pat = re.compile(r"(^|[/\s(:])" + re.escape(module) + r"(\.rs|/|::|$|\s|\()")
    return any(pat.search(code) for code in re.findall(r"`([^`]+)`", text))


def unused(declared, sources):
    """The declared dependencies no source text names."""
    return sorted(d for d in declared if not re.search(r"\b" + re.escape(d.replace("-", "_")) + r"\b", sources))


def check(doc, crates):
    """crates: {name: (set of vemu deps, set of top-level modules)}. Problems, as text."""
    problems = []
    edges, leaves = listed_edges(doc)
    real = {(a, b) for a, (deps, _) in crates.items() for b in deps}
    for a, b in sorted(real - edges):
        problems.append(f"{a} depends on {b}, which docs/design.md's list of dependencies does not give (add it there, or remove the dependency)")
    for a, b in sorted(edges - real):
        problems.append(f"docs/design.md lists {a} → {b}, but {a}'s Cargo.toml has no such dependency")
    for a in sorted(leaves):
        if crates.get(a, (set(), None))[0]:
            problems.append(f"docs/design.md lists {a} as depending on nothing of vemu's, but it depends on {', '.join(sorted(crates[a][0]))}")
    for crate, (deps, modules) in sorted(crates.items()):
        if not any(crate in (a, b) for a, b in edges) and crate not in leaves:
            problems.append(f"{crate} is missing from docs/design.md's list of dependencies")
        if f"| `{crate}` |" not in doc:
            problems.append(f"{crate} has no row in docs/design.md's crate table")
            continue
        text = crate_text(doc, crate)
        for m in sorted(modules):
            if not named(text, m):
                problems.append(f"{crate}: module `{m}` is not named in docs/design.md (its crate's row or a paragraph naming `{crate}`)")
    return problems


def crates_here():
    out = {}
    for toml in sorted(glob.glob(os.path.join(ROOT, "crates", "*", "Cargo.toml"))):
        with open(toml, "rb") as f:
            t = tomllib.load(f)
        name = t["package"]["name"]
        deps = {d for d in t.get("dependencies", {}) if d.startswith("vemu")}
        src = os.path.join(os.path.dirname(toml), "src")
        sources = ""
        for rs in glob.glob(os.path.join(os.path.dirname(toml), "**", "*.rs"), recursive=True):
            with open(rs) as f:
                sources += f.read()
        declared = set(t.get("dependencies", {})) | set(t.get("dev-dependencies", {}))
        for d in unused(declared, sources):
            UNUSED.append(f"{name} declares {d} but none of its Rust files uses it: remove it from its Cargo.toml")
        modules = set()
        for entry in os.listdir(src):
            path = os.path.join(src, entry)
            if entry.endswith(".rs") and entry not in ("lib.rs", "main.rs"):
                modules.add(entry[:-3])
            elif os.path.isdir(path) and entry != "bin":
                modules.add(entry)
        out[name] = (deps, modules)
    return out


def self_test():
    doc = """Dependencies:

- `a` → `b`, `c`
- `c`, `b` → nothing of vemu's

| crate | owns | never |
|---|---|---|
| `a` | `x` and `y.rs` | |
| `b` | `z::Thing` | |

In `c` the layers are `w/sub.rs` and `v`.
| `c` | stuff | |
"""
    good = {"a": ({"b", "c"}, {"x", "y"}), "b": (set(), {"z"}), "c": (set(), {"w", "v"})}
    assert check(doc, good) == [], check(doc, good)
    bad = {"a": ({"b", "d"}, {"x", "y", "q"}), "b": ({"c"}, {"z"}), "c": (set(), {"w", "v"}), "d": (set(), set())}
    got = "\n".join(check(doc, bad))
    for want in ["a depends on d", "lists a → c", "b as depending on nothing", "d is missing", "d has no row", "module `q`"]:
        assert want in got, (want, got)
    assert unused({"serde", "netlink-sys", "vemu-core"}, "use serde::Deserialize; vemu_core::Core") == ["netlink-sys"]
    # A name inside another word is not a naming.
    assert not named("`xy_z`", "z") and named("`crate::z::T`", "z") and named("`w/z.rs`", "z")
    print("crate map: self-test passed")


def main():
    if "--self-test" in sys.argv:
        return self_test()
    with open(os.path.join(ROOT, "docs", "design.md")) as f:
        doc = f.read()
    crates = crates_here()
    problems = check(doc, crates) + UNUSED
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"crate map: {len(crates)} crates, their dependencies and modules as docs/design.md says")


if __name__ == "__main__":
    main()
