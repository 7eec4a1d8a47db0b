#!/usr/bin/env python3
"""The behaviour table of docs/behaviour.md, checked in every language.

One driver per language (driver.c, driver.py, driver.php, driver.rb,
driver.js, Driver.java, all in this directory) runs the same scenarios
against one throwaway redis-server and prints what happened, one line per
scenario. This runner compares each line with its cell of the table in
docs/behaviour.md: the table is what the document promises and what the
test expects, the same text.

The drivers' protocol, on their stdin and stdout:

  ID<TAB>VALUE      a scenario's outcome; a cell "—" means the language has
                    no such call, and its driver prints no line for it
  ? pttl KEY        a question to this runner, answered on the driver's
                    stdin by one line: the key's PTTL on the server (-2 when
                    there is none)
  ? arm TOKEN       arms the reply cutter (tests/fake/reply_cutter.py, the
                    `cutter` URL) with TOKEN: the next request holding it
                    runs on the server and its reply is lost with the
                    connection; answered "armed"

and in their environment: BEHAVIOUR_URL (the server), BEHAVIOUR_CUTTER
(the cutter in front of it), BEHAVIOUR_SILENT (a listener that accepts and
never answers), BEHAVIOUR_DEAD (a port nothing listens on). The key
behaviour:wrong-type is a list when a driver starts.

  run.py [--python PY] [--jar JAR] [--only LANG,...] [--show]
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fake"))

import redis  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from reply_cutter import ReplyCutter  # noqa: E402

LIB = os.path.join(ROOT, "target", "debug")
VERSION = re.search(r'^version = "(.*)"', open(os.path.join(ROOT, "Cargo.toml")).read(), re.M).group(1)
JNA_JAR = "/usr/share/java/jna.jar"
DOC = os.path.join(ROOT, "docs", "behaviour.md")
# The table's columns, in its order.
LANGS = [("c", "C"), ("python", "Python"), ("php", "PHP"), ("ruby", "Ruby"), ("node", "Node.js"), ("java", "Java")]
NOT_APPLICABLE = "—"
TIMEOUT = 120


def table(path=DOC):
    """{id: {lang: expected}} from the table whose header names the
    languages; a row's id is the first `code` of its first cell."""
    rows, header = {}, None
    for line in open(path, encoding="utf-8"):
        if not line.startswith("|"):
            header = None if rows else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            if [c for c in cells[1:]] == [name for _, name in LANGS]:
                header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        found = re.search(r"`([^`]+)`", cells[0])
        if not found:
            raise SystemExit(f"{path}: a row without an `id` in its first cell: {line.strip()}")
        if len(cells) != len(LANGS) + 1:
            raise SystemExit(f"{path}: row {found.group(1)} has {len(cells) - 1} cells, not {len(LANGS)}")
        rows[found.group(1)] = {lang: cell.replace("`", "").strip()
                                for (lang, _), cell in zip(LANGS, cells[1:])}
    if not rows:
        raise SystemExit(f"{path}: no table with the columns {' | '.join(n for _, n in LANGS)}")
    return rows


class Silent:
    """A listener that accepts connections and never answers: every
    timeout's test."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.sock.getsockname()[1]}/0"
        self.held = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.sock.close()
        for c in self.held:
            c.close()


def dead_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"redis://127.0.0.1:{s.getsockname()[1]}/0"


def commands(lang, tmp, args):
    """The commands that build (all but the last) and run a driver."""
    if lang == "python":
        return [[args.python, os.path.join(HERE, "driver.py")]]
    if lang == "php":
        return [["php", "-d", "ffi.enable=1", os.path.join(HERE, "driver.php")]]
    if lang == "ruby":
        return [["ruby", "-I", os.path.join(ROOT, "bindings", "ruby", "lib"), os.path.join(HERE, "driver.rb")]]
    if lang == "node":
        return [["node", os.path.join(HERE, "driver.js")]]
    if lang == "java":
        return [["java", "-cp", f"{args.jar}:{JNA_JAR}", os.path.join(HERE, "Driver.java")]]
    if lang == "c":
        exe = os.path.join(tmp, "driver")
        # The library under its soname, for the program's rpath.
        os.makedirs(os.path.join(tmp, "lib"), exist_ok=True)
        os.symlink(os.path.join(LIB, "libredislock.so"), os.path.join(tmp, "lib", "libredislock.so.0"))
        return [["cc", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_POSIX_C_SOURCE=200809L",
                 "-I", os.path.join(ROOT, "include"), os.path.join(HERE, "driver.c"), "-o", exe,
                 "-L", LIB, "-lredislock", "-Wl,-rpath," + os.path.join(tmp, "lib")],
                [exe]]
    raise ValueError(lang)


def drive(lang, server, args):
    """{id: value} the driver printed, and its stderr (for a failure)."""
    server.raw.flushall()
    server.raw.rpush("behaviour:wrong-type", "a list, not a lock")
    cutter, silent = ReplyCutter(server.port), Silent()
    tmp = tempfile.mkdtemp(prefix="redislock-behaviour-")
    env = dict(os.environ, REDISLOCK_LIB=os.path.join(LIB, "libredislock.so"),
               BEHAVIOUR_URL=f"redis://127.0.0.1:{server.port}/0", BEHAVIOUR_CUTTER=cutter.url,
               BEHAVIOUR_SILENT=silent.url, BEHAVIOUR_DEAD=dead_url())
    try:
        *build, run = commands(lang, tmp, args)
        for command in build:
            p = subprocess.run(command, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if p.returncode != 0:
                return None, f"{command[0]} exited with {p.returncode}:\n{p.stdout.decode(errors='replace')}"
        p = subprocess.Popen(run, cwd=tmp, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        err = []
        threading.Thread(target=lambda: err.append(p.stderr.read()), daemon=True).start()
        timer = threading.Timer(TIMEOUT, p.kill)
        timer.start()
        seen = {}
        try:
            for raw in p.stdout:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                if line.startswith("? "):
                    word, _, arg = line[2:].partition(" ")
                    if word == "pttl":
                        answer = str(server.raw.pttl(arg))
                    elif word == "arm":
                        cutter.arm(arg.encode())
                        answer = "armed"
                    else:
                        answer = f"unknown question {word!r}"
                    p.stdin.write((answer + "\n").encode())
                    p.stdin.flush()
                    continue
                id_, tab, value = line.partition("\t")
                if not tab:
                    seen.setdefault("(other output)", []).append(line)
                    continue
                if id_ in seen:
                    value = f"printed twice: {seen[id_]!r}, then {value!r}"
                seen[id_] = value
        finally:
            code = p.wait()
            timer.cancel()
        time.sleep(0.05)
        stderr = b"".join(err).decode(errors="replace")
        if code != 0:
            stderr = f"exited with {code}" + (" (killed after %d s)" % TIMEOUT if code == -9 else "") + "\n" + stderr
        return seen, stderr
    finally:
        cutter.close()
        silent.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--jar", default=os.path.join(ROOT, "target", "java", f"redislock-{VERSION}.jar"))
    parser.add_argument("--only", default="", help="languages, comma-separated: " + ",".join(l for l, _ in LANGS))
    parser.add_argument("--show", action="store_true", help="print every value, not only the differences")
    args = parser.parse_args()
    args.python, args.jar = os.path.abspath(args.python), os.path.abspath(args.jar)
    expected = table()
    langs = [l for l, _ in LANGS if not args.only or l in args.only.split(",")]
    server = RedisServer()
    server.raw = redis.Redis(port=server.port)
    failed = []
    started = time.monotonic()
    try:
        for lang in langs:
            t0 = time.monotonic()
            seen, stderr = drive(lang, server, args)
            wrong = []
            if seen is None:
                wrong.append(stderr)
            else:
                for id_, cells in expected.items():
                    want, got = cells[lang], seen.pop(id_, NOT_APPLICABLE)
                    if args.show:
                        print(f"  {lang} {id_}: {got}")
                    if got != want:
                        wrong.append(f"{id_}: the table says {want!r}, the driver printed {got!r}")
                for id_, got in seen.items():
                    wrong.append(f"{id_}: printed {got!r}, and the table has no such row")
                if wrong and stderr.strip():
                    wrong.append("its stderr:\n" + stderr.rstrip())
                elif stderr.startswith("exited with"):
                    wrong.append(stderr.rstrip())
            took = time.monotonic() - t0
            if wrong:
                failed.append(lang)
                print(f"{lang}: FAILED ({took:.1f} s)\n  " + "\n  ".join(wrong))
            else:
                print(f"{lang}: {len(expected)} rows as the table says ({took:.1f} s)")
            sys.stdout.flush()
    finally:
        server.stop()
    print(f"\n{len(langs) - len(failed)} of {len(langs)} languages behave as docs/behaviour.md says;"
          f" {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
