#!/usr/bin/env python3
"""make lint: everything the Makefile and scripts/ install from PyPI or npm
comes from a lock file at an exact version with its hashes.

  scripts/check-pins.py [ROOT]     check the checkout (default: this one)
  scripts/check-pins.py --self-test

Checks, each failure printed with where it is:
  1. every `pip install` / `pip download` of the Makefile and scripts/ reads
     a lock file with --require-hashes, or installs local files only
     (--no-index, a wheel or sdist path, `.`); every `npm install` is
     `npm ci`, --offline or --package-lock-only. scripts/test-latest.sh is
     the one place allowed the newest releases (make test-latest).
  2. requirements/NAME.txt exists for each NAME.in, pins each name of the .in
     with == and every entry of the .txt carries at least one sha256.
  3. tests/node-tools and bench/node: package.json names exact versions
     and package-lock.json locks those versions, each with its integrity.
Exit 1 when anything fails, 0 otherwise.
"""
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ALLOWED_UNPINNED = {"scripts/test-latest.sh"}
NPM_DIRS = ["tests/node-tools", "bench/node"]


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def logical_lines(text):
    """(line number, line) with backslash continuations joined."""
    out, buf, start = [], "", None
    for n, line in enumerate(text.splitlines(), 1):
        if start is None:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        out.append((start, buf + line))
        buf, start = "", None
    if buf:
        out.append((start, buf))
    return out


PIP = re.compile(r"\bpip3?[\"']?\s+(?:-\S+\s+)*(install|download|wheel)\b(.*)")
NPM = re.compile(r"\bnpm\s+(install|i|add)\b(.*)")


def command_problems(root):
    files = ["Makefile"] + sorted(
        str(p.relative_to(root)) for p in (root / "scripts").rglob("*") if p.is_file() and p.suffix in (".sh", "")
    )
    files += ["bench/deps.sh"]
    problems = []
    for rel in files:
        path = root / rel
        if rel in ALLOWED_UNPINNED or not path.is_file():
            continue
        for n, line in logical_lines(path.read_text(errors="replace")):
            code = line.strip()
            if code.startswith("#") or code.startswith("##"):
                continue
            # What a message says is not a command.
            code = re.sub(r"\b(echo|die|printf)\b\s+(\"[^\"]*\"|'[^']*')", "", code)
            for m in PIP.finditer(code):
                verb, rest = m.group(1), m.group(2)
                rest = re.split(r"\s(?:\|\||&&|;|\|)\s", rest)[0]
                if verb == "wheel":
                    if "--no-build-isolation" not in rest and "--no-index" not in rest:
                        problems.append(f"{rel}:{n}: pip wheel with build isolation (fetches its backend unpinned)")
                    continue
                if "--require-hashes" in rest and re.search(r"(-r|--requirement)\s", rest):
                    continue
                if "--no-index" in rest:
                    continue
                words = [w for w in rest.split() if not w.startswith("-") and not w.startswith(("2>", ">"))]
                if words and all(re.search(r"(\.whl|\.tar\.gz|/|^\.)$|^\S*[/$]", w) for w in words):
                    continue
                problems.append(f"{rel}:{n}: pip {verb} without a lock file (-r requirements/... --require-hashes): {code[:120]}")
            for m in NPM.finditer(code):
                rest = m.group(2)
                if "--offline" in rest or "--package-lock-only" in rest:
                    continue
                problems.append(f"{rel}:{n}: npm {m.group(1)} instead of npm ci from a package-lock.json: {code[:120]}")
    return problems


def requirement_problems(root):
    problems = []
    req = root / "requirements"
    for src in sorted(req.glob("*.in")):
        lock = src.with_suffix(".txt")
        rel = lock.relative_to(root)
        if not lock.is_file():
            problems.append(f"{rel}: missing (make deps-update writes it from {src.name})")
            continue
        entries = {}
        for n, line in logical_lines(lock.read_text()):
            code = line.split("#", 1)[0].strip() if not line.lstrip().startswith("--hash") else line.strip()
            if not code or code.startswith("-"):
                continue
            m = re.match(r"([A-Za-z0-9][A-Za-z0-9_.\-]*)(\[[^\]]*\])?==(\S+)", code)
            if not m:
                problems.append(f"{rel}:{n}: not an exact pin (name==version): {code[:80]}")
                continue
            hashes = re.findall(r"--hash=sha256:[0-9a-f]{64}", code)
            if not hashes:
                problems.append(f"{rel}:{n}: {m.group(1)}=={m.group(3)} has no --hash=sha256:")
            entries[canon(m.group(1))] = m.group(3)
        for n, line in logical_lines(src.read_text()):
            code = line.split("#", 1)[0].strip()
            if not code or code.startswith("-"):
                continue
            name = canon(re.match(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", code).group(0))
            if name not in entries:
                problems.append(f"{rel}: {name} (wanted by {src.name}:{n}) is not pinned: make deps-update")
                continue
            exact = re.search(r"==\s*([^\s,;]+)\s*$", code.split(";")[0])
            if exact and exact.group(1) != entries[name]:
                problems.append(f"{rel}: {name}=={entries[name]}, but {src.name}:{n} asks for {exact.group(1)}: make deps-update")
    return problems


def npm_problems(root):
    problems = []
    for d in NPM_DIRS:
        pkg_path, lock_path = root / d / "package.json", root / d / "package-lock.json"
        if not pkg_path.is_file():
            problems.append(f"{d}/package.json: missing")
            continue
        if not lock_path.is_file():
            problems.append(f"{d}/package-lock.json: missing (make deps-update)")
            continue
        deps = json.loads(pkg_path.read_text()).get("dependencies", {})
        lock = json.loads(lock_path.read_text())
        packages = lock.get("packages", {})
        if packages.get("", {}).get("dependencies", {}) != deps:
            problems.append(f"{d}/package-lock.json: its dependencies differ from package.json's (make deps-update)")
        for name, version in deps.items():
            if not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.\-]+)?", version):
                problems.append(f"{d}/package.json: {name} is {version!r}, not an exact version")
            locked = packages.get(f"node_modules/{name}", {}).get("version")
            if locked != version:
                problems.append(f"{d}/package-lock.json: {name} is locked at {locked}, package.json says {version}")
        for key, entry in packages.items():
            if key and not entry.get("link") and not entry.get("integrity"):
                problems.append(f"{d}/package-lock.json: {key} has no integrity hash")
    return problems


def check(root):
    return command_problems(root) + requirement_problems(root) + npm_problems(root)


def self_test(root):
    """Each kind of violation, planted in a copy of the checkout's files, is found."""
    tracked = subprocess.run(
        ["git", "ls-files", "Makefile", "scripts", "bench/deps.sh", "requirements", *NPM_DIRS],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.split()
    plants = {
        "Makefile": lambda t: t + "\nplanted:\n\t" + "pip" + " install -q requests\n",
        "scripts/planted.sh": lambda t: "#!/bin/sh\nnpm install --prefix x left-pad@1\n",
        "requirements/test.txt": lambda t: t.replace("--hash=sha256:", "--hash=sha256:x", 1)
        .replace("==", ">=", 1),
        "requirements/demo.in": lambda t: t + "six\n",
        "tests/node-tools/package.json": lambda t: t.replace('"5.0.0-beta.2"', '"^5.0.0-beta.2"'),
    }
    expect = ["Makefile", "scripts/planted.sh", "requirements/test.txt", "six", "tests/node-tools/package"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for rel in tracked:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / rel, tmp / rel)
        clean = check(tmp)
        if clean:
            print("check-pins --self-test: the copy is not clean to begin with:", *clean, sep="\n  ")
            return 1
        for rel, plant in plants.items():
            p = tmp / rel
            p.write_text(plant(p.read_text() if p.exists() else ""))
        found = "\n".join(check(tmp))
    missed = [e for e in expect if e not in found]
    if missed:
        print(f"check-pins --self-test: planted violations not found: {missed}\n{found}")
        return 1
    print(f"check-pins --self-test: {len(expect)} planted violations found")
    return 0


def main():
    args = sys.argv[1:]
    here = Path(__file__).resolve().parent.parent
    if args == ["--self-test"]:
        return self_test(here)
    root = Path(args[0]).resolve() if args else here
    problems = check(root)
    for p in problems:
        print(f"check-pins: {p}")
    if problems:
        print("check-pins: see docs/testing.md (Pinned dependencies)")
        return 1
    print("check-pins: every PyPI and npm install comes from a lock file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
