#!/usr/bin/env python3
"""Dependency cycles between the modules of each crate (docs/design.md, "Crate map").

A crate's modules are its top-level ones (a module's own sub-modules are folded into it)
plus the crate root (lib.rs/main.rs). Module A depends on B when A's non-test code names
`crate::B`, `super::B` (from a top-level module), an item the root re-exports from B, or
— when A imports its parent whole (`use super::*;`) — a top-level item of B by its bare
name;
an item defined in the root itself makes A depend on the root, and the root depends on
every module whose items it names outside `mod`/`pub use` lines (a re-export is the
root's table of contents, not a use). Prints every strongly connected component of more
than one module and exits 1 if there is one.

    scripts/module_cycles.py [crates/...]   # default: every crate under crates/
    scripts/module_cycles.py --self-test    # it finds the cycles of a made-up crate
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """Source without comments, string literals and #[cfg(test)] modules."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    text = re.sub(r"//[^\n]*", "", text)
    out, skip_depth, depth, i = [], None, 0, 0
    pending_test = False
    for m in re.finditer(r"#\[cfg\(test\)\]|\{|\}|[^{}#]+|#", text):
        tok = m.group(0)
        if tok == "#[cfg(test)]":
            pending_test = True
            continue
        if tok == "{":
            depth += 1
            if pending_test and skip_depth is None:
                skip_depth = depth
            pending_test = False
        elif tok == "}":
            if skip_depth is not None and depth == skip_depth:
                skip_depth = None
                depth -= 1
                continue
            depth -= 1
        elif pending_test and ";" in tok and "{" not in tok:
            # `#[cfg(test)] mod tests;` or a test-only `use ...;`
            head, _, rest = tok.partition(";")
            pending_test = False
            if skip_depth is None:
                out.append(rest)
            continue
        if skip_depth is None:
            out.append(tok)
    return "".join(out)


def use_groups(text, prefix):
    """Top-level names reached by `prefix::name` or `prefix::{a, b::c}`."""
    names = set(re.findall(r"\b" + prefix + r"::(" + IDENT + ")", text))
    for m in re.finditer(r"\b" + prefix + r"::\{", text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        body = text[m.end() : j - 1]
        # only the first segment of each comma-separated path at depth 0
        depth, seg, parts = 0, "", []
        for ch in body:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(seg)
                seg = ""
            else:
                seg += ch
        parts.append(seg)
        for p in parts:
            n = re.match(r"\s*(" + IDENT + ")", p)
            if n:
                names.add(n.group(1))
    return names


def crate_graph(src):
    root = src / "lib.rs"
    if not root.exists():
        root = src / "main.rs"
    root_text = strip(root.read_text())
    mods = re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", root_text, re.M)
    files = {}
    for m in mods:
        fs = []
        if (src / f"{m}.rs").exists():
            fs.append(src / f"{m}.rs")
        if (src / m).is_dir():
            fs.extend(sorted((src / m).rglob("*.rs")))
        files[m] = fs
    # names the root re-exports: name -> module
    reexport = {}
    for line in re.findall(r"^\s*pub(?:\([^)]*\))?\s+use\s+([^;]+);", root_text, re.M):
        line = re.sub(r"^crate::", "", line.strip())
        first = re.match(IDENT, line)
        if not first or first.group(0) not in files:
            continue
        module = first.group(0)
        rest = line[len(module) :]
        if rest.strip() == "::*":
            for f in files[module]:
                reexport.update((n, module) for n in re.findall(
                    r"^pub(?:\([^)]*\))?\s+(?:struct|enum|fn|const|static|type|trait|mod)\s+(" + IDENT + ")", strip(f.read_text()), re.M))
            continue
        for name in re.findall(IDENT, rest):
            if name != "as" and name != "self":
                reexport[name] = module
    external = set()
    for line in re.findall(r"^\s*pub(?:\([^)]*\))?\s+use\s+([^;]+);", root_text, re.M):
        first = re.match(IDENT, line.strip())
        if first and first.group(0) not in files and first.group(0) not in ("crate", "self", "super"):
            external.update(n for n in re.findall(IDENT, line.strip()[len(first.group(0)):]) if n not in ("as", "self"))
    edges = {m: set() for m in files}
    edges["<root>"] = set()
    why = {}

    def target(name):
        if name in files:
            return name
        if name in reexport:
            return reexport[name]
        return "<root>"

    # Top-level items by module (and the root's own): what a module that imports its
    # parent whole (`use super::*;`, `use crate::*;`) reaches by bare name.
    top_item = r"^(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|fn|const|static|type|trait)\s+(" + IDENT + ")"
    defined = {}
    for m, fs in files.items():
        for f in fs:
            for n in re.findall(top_item, strip(f.read_text()), re.M):
                defined.setdefault(n, m)
    for n in re.findall(top_item, root_text, re.M):
        defined.setdefault(n, "<root>")
    for m, fs in files.items():
        for f in fs:
            text = strip(f.read_text())
            names = use_groups(text, "crate")
            if f.parent == src:
                names |= use_groups(text, "super")
            for n in names:
                if n in external:
                    continue
                t = target(n)
                if t != m:
                    edges[m].add(t)
                    why.setdefault((m, t), set()).add(n)
            if f.parent == src and re.search(r"^\s*use\s+(?:super|crate)::\*\s*;", text, re.M):
                # Bare names (not a path's later segment, a method, a field or a
                # macro) of another module's top-level items.
                for n in set(re.findall(r"(?<![A-Za-z0-9_:.])(" + IDENT + r")\b(?!\s*:(?!:)|!)", text)):
                    t = defined.get(n, m)
                    if t != m:
                        edges[m].add(t)
                        why.setdefault((m, t), set()).add(n)
    body = "\n".join(
        l for l in root_text.splitlines() if not re.match(r"^\s*(pub(\([^)]*\))?\s+)?(mod|use)\b", l)
    )
    body += "\n" + "\n".join(
        l for l in root_text.splitlines() if re.match(r"^\s*use\b", l)
    )
    for m in files:
        if re.search(r"(?<![A-Za-z0-9_:])" + m + r"::", body) or re.search(r"\bcrate::" + m + r"\b", body):
            edges["<root>"].add(m)
    return edges, why


def cycles(edges):
    """Strongly connected components with more than one member (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def self_test():
    """The checker on a made-up crate: a cycle through a re-export and the root is found,
    and the same crate without it passes."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "c" / "src"
        (src / "b").mkdir(parents=True)
        (src / "lib.rs").write_text("mod a;\nmod b;\npub use b::Thing;\npub struct Root;\n")
        (src / "a.rs").write_text("use crate::Thing; // crate::b::x in a comment\n")
        (src / "b.rs").write_text("pub struct Thing;\n#[cfg(test)]\nmod tests { use crate::a; }\n")
        (src / "b" / "inner.rs").write_text('fn f() { let s = "crate::a::g"; }\n')
        assert not cycles(crate_graph(src)[0]), "comments, strings and tests are not uses"
        (src / "b" / "inner.rs").write_text("fn f() { crate::a::g(); }\n")
        assert cycles(crate_graph(src)[0]) == [["a", "b"]], cycles(crate_graph(src)[0])
        (src / "b" / "inner.rs").write_text("fn f() -> crate::Root { todo!() }\n")
        (src / "lib.rs").write_text("mod a;\nmod b;\npub use b::Thing;\npub struct Root;\nfn g() { b::inner::f(); }\n")
        assert cycles(crate_graph(src)[0]) == [["<root>", "b"]], cycles(crate_graph(src)[0])
        # Modules that import their parent whole reach each other's items by bare name;
        # a field, a method or a path's later segment of the same name is no use.
        (src / "lib.rs").write_text("mod a;\nmod b;\nuse a::*;\nuse b::*;\n")
        (src / "a.rs").write_text("use super::*;\npub(crate) fn alpha() { beta(); }\n")
        (src / "b.rs").write_text("use super::*;\npub(crate) fn beta() {}\nstruct S { alpha: u8 }\nfn g(s: S) { s.alpha(); x::alpha(); }\n")
        (src / "b" / "inner.rs").write_text("")
        assert not cycles(crate_graph(src)[0]), cycles(crate_graph(src)[0])
        (src / "b.rs").write_text("use super::*;\npub(crate) fn beta() { alpha(); }\n")
        assert cycles(crate_graph(src)[0]) == [["a", "b"]], cycles(crate_graph(src)[0])
    print("module_cycles self-test: ok")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    crates = [Path(a) for a in argv] or sorted(Path("crates").glob("*/"))
    bad = 0
    for c in crates:
        src = c / "src"
        if not src.is_dir():
            continue
        edges, why = crate_graph(src)
        for comp in cycles(edges):
            bad += 1
            links = [
                f"{a} -> {b}" + (f" ({', '.join(sorted(why[(a, b)]))})" if (a, b) in why else "")
                for a in comp
                for b in sorted(edges[a])
                if b in comp
            ]
            print(f"{c.name}: cycle between {', '.join(comp)}: {'; '.join(links)}")
    if bad:
        print(f"{bad} cycle(s)")
        return 1
    print(f"no dependency cycle between the modules of {len(crates)} crate(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
