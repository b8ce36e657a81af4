#!/usr/bin/env python3
"""Size limits the test command keeps (issue 63): no Rust or Python file over 1,000 lines
and no function over 150 — tests and generated code included — unless listed, with a
reason, in scripts/limits-allow.txt. A listed place that is back under its limit must
leave the list (so the list only ever shrinks to what is true).

    python3 scripts/limits.py              # check the repository
    python3 scripts/limits.py --self-test  # check the checker on made-up files

Rust functions are found on the source with comments, strings and character literals
blanked out: `fn NAME` up to its body's matching brace. Python functions by `ast`."""

import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE_LINES = 1000
MAX_FN_LINES = 150
ALLOW = os.path.join(ROOT, "scripts", "limits-allow.txt")
SKIP_DIRS = {"target", "node_modules", ".git", "__pycache__", "out", "corpus", "artifacts"}


def blank_rust(src):
    """The source with comments, string and char literals replaced by spaces (newlines
    kept), so that braces and `fn` inside them do not count."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif (c == "r" or (c == "b" and i + 1 < n and src[i + 1] == "r")) and re.match(r'b?r#*"', src[i:i + 260]) \
                and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            if i + 1 < n and src[i + 1] == "\\":
                j = src.find("'", i + 2)
                j = n if j < 0 else j
                blank(i, j + 1)
                i = j + 1
            elif i + 2 < n and src[i + 2] == "'":
                blank(i, i + 3)
                i += 3
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


def rust_functions(src):
    """(name, first line, lines) of every function with a body."""
    text = blank_rust(src)
    line_at = []
    line = 1
    for ch in text:
        line_at.append(line)
        if ch == "\n":
            line += 1
    found = []
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", text):
        j = m.end()
        # The body's brace, unless a `;` ends a declaration first (generics and where
        # clauses hold no braces).
        while j < len(text) and text[j] not in "{;":
            j += 1
        if j >= len(text) or text[j] == ";":
            continue
        depth, k = 0, j
        while k < len(text):
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        start, end = line_at[m.start()], line_at[min(k, len(text) - 1)]
        found.append((m.group(1), start, end - start + 1))
    return found


def python_functions(src):
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    return [(f.name, f.lineno, f.end_lineno - f.lineno + 1) for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]


def sources(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        for f in sorted(files):
            if f.endswith((".rs", ".py")):
                yield os.path.join(d, f)


def read_allow(path):
    """{place: reason}: `PATH` (the file's length) or `PATH::FUNCTION`, then its reason."""
    allow = {}
    if not os.path.exists(path):
        return allow, []
    bad = []
    for k, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        place, _, reason = line.partition(" ")
        if not reason.strip():
            bad.append(f"{os.path.relpath(path, ROOT)}:{k}: '{place}' has no reason")
        allow[place] = reason.strip()
    return allow, bad


def check(root, allow_path):
    """What is over its limit and not allowed, and what is allowed but no longer over."""
    allow, problems = read_allow(allow_path)
    over = set()
    for path in sources(root):
        rel = os.path.relpath(path, root)
        try:
            src = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        lines = src.count("\n") + (0 if src.endswith("\n") or not src else 1)
        if lines > MAX_FILE_LINES:
            over.add(rel)
            if rel not in allow:
                problems.append(f"{rel}: {lines} lines (the limit is {MAX_FILE_LINES}; split it, or list it in scripts/limits-allow.txt with why)")
        fns = rust_functions(src) if path.endswith(".rs") else python_functions(src)
        for name, start, n in fns:
            if n > MAX_FN_LINES:
                place = f"{rel}::{name}"
                over.add(place)
                if place not in allow:
                    problems.append(f"{rel}:{start}: fn {name} is {n} lines (the limit is {MAX_FN_LINES}; split it, or list it in scripts/limits-allow.txt with why)")
    for place in sorted(set(allow) - over):
        problems.append(f"scripts/limits-allow.txt: '{place}' is within its limit now: take it off the list")
    return problems


def self_test():
    import tempfile

    tricky = 'fn a() {\n    let s = "}}}{";\n    let c = \'{\';\n    let r = r#"fn x() {"#;\n    // fn y() {\n    /* } */\n    let l: &\'static str = "";\n}\nfn b();\n'
    fns = rust_functions(tricky)
    assert fns == [("a", 1, 8)], fns
    long_rs = "fn long() {\n" + "    x();\n" * 160 + "}\nfn short() {}\n"
    long_py = "def f():\n" + "    pass\n" * 151
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "scripts"))
        open(os.path.join(d, "a.rs"), "w").write(long_rs)
        open(os.path.join(d, "b.py"), "w").write(long_py)
        open(os.path.join(d, "c.rs"), "w").write("// x\n" * 1001)
        allow = os.path.join(d, "scripts", "limits-allow.txt")
        p = check(d, allow)
        assert len(p) == 3 and any("fn long is 162 lines" in x for x in p) and any("b.py:1: fn f is 152" in x for x in p) \
            and any("c.rs: 1001 lines" in x for x in p), p
        open(allow, "w").write("a.rs::long generated\nb.py::f\nc.rs too long, to split\nd.rs::gone was long\n")
        p = check(d, allow)
        assert any("'b.py::f' has no reason" in x for x in p) and any("'d.rs::gone' is within its limit now" in x for x in p) \
            and len(p) == 2, p
    print("limits self-test: ok")


def main():
    if "--self-test" in sys.argv:
        self_test()
        return
    problems = check(ROOT, ALLOW)
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    allow, _ = read_allow(ALLOW)
    print(f"limits: no file over {MAX_FILE_LINES} lines, no function over {MAX_FN_LINES} ({len(allow)} listed with a reason)")


if __name__ == "__main__":
    main()
