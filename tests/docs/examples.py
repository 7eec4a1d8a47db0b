#!/usr/bin/env python3
"""Runs the code blocks of README.md and docs/*.md, like rustdoc's doc tests.

Every fenced block is decided by its language and by a marker in the
fence's info string (the words after the language: GitHub does not render
them, so a marker costs no line of the page):

    ```python                    a complete program: run as it is
    ```python fragment           a part of one: the runner completes it with
                                 the language's prelude (below), which makes
                                 `client` and the helpers examples call
    ```c fragment=lock           the same, with a `lock` too (C: a variable;
                                 Rust: a held lock)
    ```python no-run: <reason>   not run; the reason is printed

Blocks without a language, and `text`, `ini`, `yaml`, `xml` ones, are output
or configuration, not programs: never run. The `lua` blocks of
docs/PROTOCOL.md are the scripts themselves, already checked against the
code by tests/protocol_doc.rs: not run here. The Rust blocks of
docs/rust.md are rustdoc's: it is the crate's front page, whose blocks
`cargo test` runs as doc tests; Rust blocks elsewhere are compiled here by
rustc against the crate `cargo build` made. A language this runner cannot
run needs a `no-run:` marker, or the run fails. A `sh` block runs only
when marked `run` (```sh run), from the repository's root: without a
marker it fails, so that a command added to a document (an install, say)
never runs in a test unless someone said it should.

The blocks run against one throwaway redis-server on a free loopback port
(never 6379), flushed before each block; the address in the examples,
127.0.0.1 or localhost on the default port, is replaced by that server's before a
block runs, and PHP's `vendor/autoload.php` by the repository's
bindings/php/autoload.php. The server is stopped at the end. The Java
blocks are compiled together first, each in a package of its own.

Each block prints one line: file:line, language, and `ran`, `FAILED` or
`not run: <reason>`. The exit status is 1 when a block that should run
failed, or when a block cannot run and says no reason.

    tests/docs/examples.py [--python PY] [--jar JAR] [FILE[:LINE]...]

Needs: the wheel installed in --python's environment (make python-env),
target/debug/libredislock.so, bindings/node/redislock.node (node
bindings/node/build.js --debug), the jar of make java, ruby, php, cc, java, rustc.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(ROOT, "target", "debug")
VERSION = re.search(r'^version = "(.*)"', open(os.path.join(ROOT, "Cargo.toml")).read(), re.M).group(1)
JNA_JAR = "/usr/share/java/jna.jar"
TIMEOUT = 60
PORT = "6379"  # the server's, once it runs

NEVER_RUN = {
    "": "output",
    "text": "output",
    "ini": "configuration",
    "yaml": "configuration",
    "xml": "configuration",
    "lua": "the scripts: tests/protocol_doc.rs checks them against the code",
}

FENCE = re.compile(r"^(\s*)(`{3,})(.*)$")


class Block:
    def __init__(self, path, line, lang, marker, code):
        self.path, self.line, self.lang, self.marker, self.code = path, line, lang, marker, code

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def blocks(path):
    """The fenced blocks of one Markdown file, indentation removed."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.group(1), m.group(2), m.group(3).strip()
        lang, _, marker = info.partition(" ")
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*" + ticks + r"\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        yield Block(path, start, lang.lower(), marker.strip(), "\n".join(body) + "\n")


# ---- the server -------------------------------------------------------------

# The suites' throwaway server (tests/python/redis_server.py): a free
# loopback port, never 6379; $REDIS_SERVER chooses the binary.
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import redis  # noqa: E402  (the test environment's redis-py, as the suites')
from redis_server import RedisServer  # noqa: E402


# ---- the languages ----------------------------------------------------------
#
# A prelude makes `client` on the server and the helpers that examples call
# for the application's own work (write_report, step, ...): they do nothing.

def indent(code, by):
    return "".join(by + line if line.strip() else line for line in code.splitlines(True))


PY_PRELUDE = """\
import asyncio, logging, redis, redislock
client = redislock.Client("redis://DOC_SERVER/0")
r = redis.Redis.from_url("redis://DOC_SERVER/0")   # a redis-py client
log = logging.getLogger("app")
def write_report(*args, **kwargs): pass
def more_work(): return False
def step(*args): pass
def run_job(): pass
"""


def python(block, tmp, args):
    code = block.code
    if block.marker.startswith("fragment"):
        if re.search(r"^(async with|await |async for)", code, re.M):
            code = "async def main():\n" + indent(code, "    ") + "\nasyncio.run(main())\n"
        code = PY_PRELUDE + code
    return [[args.python, write(tmp, "block.py", code)]]


JS_PRELUDE = """\
const { Client } = require('redislock');
const client = new Client('redis://DOC_SERVER/0');
const url = 'redis://DOC_SERVER/0';
const log = console;
const shutdown = new AbortController();
const batches = [1, 2];
const writeReport = async () => {};
const reindex = async () => {};
const moreWork = () => false;
const step = async () => {};
"""


def node(block, tmp, args):
    code = block.code
    if block.marker.startswith("fragment"):
        prelude = JS_PRELUDE
        if re.search(r"^(const|let) client\b", code, re.M):
            prelude = re.sub(r"^const client = .*\n", "", prelude, flags=re.M)
        if "require('redislock')" in code:
            prelude = prelude.replace("const { Client } = require('redislock');\n", "")
        code = ("(async () => {\n" + prelude + code + "\nawait client.close();\n})()"
                ".catch((e) => { console.error(e); process.exitCode = 1; });\n")
    modules = os.path.join(tmp, "node_modules")
    os.makedirs(modules, exist_ok=True)
    os.symlink(os.path.join(ROOT, "bindings", "node"), os.path.join(modules, "redislock"))
    return [["node", write(tmp, "block.js", code)]]


RB_PRELUDE = """\
require "logger"
require "redislock"
client = RedisLock::Client.new("redis://DOC_SERVER/0")
logger = Logger.new($stderr)
request_id = "req-42"
def write_report(fence: nil) = nil
def more_work? = false
def step = nil
def export = nil
def read_catalog = nil
def rebuild_catalog = nil
"""


def ruby(block, tmp, args):
    code = block.code
    if block.marker.startswith("fragment"):
        code = RB_PRELUDE + code
    return [["ruby", "-I", os.path.join(ROOT, "bindings", "ruby", "lib"), write(tmp, "block.rb", code)]]


PHP_PRELUDE = """\
<?php
require 'vendor/autoload.php';
$client = new RedisLock\\Client('redis://DOC_SERVER');
$owner = 'req-42';
[$key, $requestId, $expireMs] = ['order:59', 'req-59', 30000];
$batches = [1, 2];
function writeReport(...$args) {}
function work() { return 1; }
function issue($id) {}
function import($batch) {}
$id = 42;
"""


def php(block, tmp, args):
    code = block.code
    if block.marker.startswith("fragment"):
        code = PHP_PRELUDE + re.sub(r"^<\?php\s*", "", code)
    elif not code.startswith("<?php"):
        raise Unrunnable("a complete PHP program starts with <?php (else php prints it): mark it a fragment")
    code = code.replace("vendor/autoload.php", os.path.join(ROOT, "bindings", "php", "autoload.php"))
    return [["php", write(tmp, "block.php", code)]]


C_PRELUDE = """\
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <redislock.h>
static inline void do_work(uint64_t fence) { (void)fence; }
int main(void) {
"""
C_CLIENT = """\
    redislock_client *client = NULL;
    if (redislock_client_open("redis://DOC_SERVER", &client) != REDISLOCK_OK) return 1;
"""
# fragment=lock: a `lock` variable too.
C_LOCK = "    redislock_lock *lock = NULL;\n"


def c(block, tmp, args):
    code = block.code
    if block.marker.startswith("fragment"):
        lock = C_LOCK if block.marker == "fragment=lock" else ""
        # A block that makes its own client gets none from the prelude.
        own = re.search(r"redislock_client \*client\b", code)
        code = C_PRELUDE + ("" if own else C_CLIENT) + lock + indent(code, "    ")
        if "redislock_client_free(client)" not in code:
            code += "    redislock_client_free(client);\n"
        code += "    return 0;\n}\n"
    exe = os.path.join(tmp, "block")
    return [["cc", "-Wall", "-Wextra", "-Werror", "-std=c11", "-I", os.path.join(ROOT, "include"),
             write(tmp, "block.c", code), "-o", exe, "-L", LIB, "-lredislock", "-Wl,-rpath," + os.path.join(tmp, "lib")],
            [exe]]


JAVA_PRELUDE = """\
import io.redislock.*;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;

public class Block {
    // Fields, not locals: a block may declare its own of the same name.
    static RedisLockClient client;
    static LockOptions opts = LockOptions.ttl(Duration.ofSeconds(30));
    static String requestId = "req-42";
    static String urlA = "redis://DOC_SERVER", urlB = urlA, urlC = urlA;
    static ExecutorService pool = Executors.newSingleThreadExecutor();
    static void writeReport(Object... args) {}
    static int buildReport(long fence) { return 1; }
    static boolean moreWork() { return false; }
    static void step() {}
    static void export() {}
    public static void main(String[] args) throws Exception {
        client = RedisLockClient.open("redis://DOC_SERVER/0");
        try {
"""


def java_source(block):
    """(class name, source) of a Java block, completed when a fragment."""
    code = block.code
    if block.marker.startswith("fragment"):
        imports = "".join(re.findall(r"^import .*\n", code, re.M))
        body = re.sub(r"^import .*\n", "", code, flags=re.M)
        code = (imports + JAVA_PRELUDE + indent(body, "            ")
                + "        } finally {\n            pool.shutdownNow();\n            client.close();\n        }\n    }\n}\n")
    name = re.search(r"public\s+(?:final\s+)?class\s+(\w+)", code)
    return (name.group(1) if name else "Block"), code


def compile_java(blocks, tmp, args):
    """Compiles every Java block in one javac run, each in a package of its
    own (doc1, doc2, ...), and sets each block's `main` to its class. When
    that fails, nothing is set: each block is then compiled alone, so that
    the error is its own."""
    if not blocks:
        return
    sources, mains = [], []
    for n, block in enumerate(blocks, 1):
        name, code = java_source(block)
        os.makedirs(os.path.join(tmp, "src", f"doc{n}"))
        sources.append(write(tmp, os.path.join("src", f"doc{n}", name + ".java"), f"package doc{n};\n" + code))
        mains.append(f"doc{n}.{name}")
    p = subprocess.run(["javac", "-encoding", "UTF-8", "-cp", f"{args.jar}:{JNA_JAR}",
                        "-d", os.path.join(tmp, "classes")] + sources,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode == 0:
        for block, main in zip(blocks, mains):
            block.main = os.path.join(tmp, "classes"), main


def java(block, tmp, args):
    classpath = f"{args.jar}:{JNA_JAR}"
    if getattr(block, "main", None):
        classes, main = block.main
        return [["java", "-cp", f"{classes}:{classpath}", main]]
    name, code = java_source(block)
    # Java 11's single-file launch: compiled in memory, alone.
    return [["java", "-cp", classpath, write(tmp, name + ".java", code)]]


RS_PRELUDE = """\
#![allow(unused)]
use redislock::*;
use std::time::Duration;
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::open("redis://DOC_SERVER/0")?;
    let (ttl, wait) = (Duration::from_secs(30), Duration::from_secs(10));
"""
# fragment=lock: a held `lock` too, and what its callback sets.
RS_LOCK = """\
    let lock = client.acquire("nightly", ttl, Wait::Timeout(wait))?;
    let alarm = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    use std::sync::atomic::Ordering;
"""


def rust(block, tmp, args):
    code = block.code
    if block.marker.startswith("fragment"):
        lock = RS_LOCK if block.marker == "fragment=lock" else ""
        code = RS_PRELUDE + lock + indent(code, "    ") + "    Ok(())\n}\n"
    exe = os.path.join(tmp, "block")
    # rustc against the crate cargo build made: no cargo, no manifest.
    return [["rustc", "--edition", "2021", "-D", "warnings", "-o", exe, write(tmp, "block.rs", code),
             "--extern", "redislock=" + os.path.join(LIB, "libredislock.rlib"),
             "-L", "dependency=" + os.path.join(LIB, "deps")],
            [exe]]


def sh(block, tmp, args):
    if block.marker != "run":
        raise Unrunnable("a sh block runs only when marked `run` (```sh run), "
                         "else it says `no-run: <reason>`")
    # From the repository's root, as the documents' commands are given.
    return [["bash", "-euo", "pipefail", "-c", 'cd "$0" && . "$1"', ROOT, write(tmp, "block.sh", block.code)]]


RUNNERS = {"python": python, "js": node, "ruby": ruby, "php": php, "c": c, "java": java, "rust": rust, "sh": sh}


class Unrunnable(Exception):
    pass


def write(tmp, name, code):
    code = re.sub(r"(127\.0\.0\.1|localhost):6379", "127.0.0.1:" + PORT, code)
    # The preludes' own address: the server's, never the default port.
    code = code.replace("DOC_SERVER", "127.0.0.1:" + PORT)
    path = os.path.join(tmp, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(code)
    return path


def run(block, server, args):
    """None when the block ran, else what went wrong."""
    server.raw.flushall()
    tmp = tempfile.mkdtemp(prefix="redislock-doc-block-")
    env = dict(os.environ, REDISLOCK_LIB=os.path.join(LIB, "libredislock.so"))
    # The library under its soname, for the C programs' rpath.
    os.makedirs(os.path.join(tmp, "lib"))
    os.symlink(os.path.join(LIB, "libredislock.so"), os.path.join(tmp, "lib", "libredislock.so.0"))
    try:
        try:
            commands = RUNNERS[block.lang](block, tmp, args)
        except Unrunnable as e:
            return str(e)
        for command in commands:
            try:
                p = subprocess.run(command, cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
            except FileNotFoundError:
                return f"{command[0]} not found (scripts/deps.sh installs it)"
            except subprocess.TimeoutExpired as e:
                return f"{command[0]}: no end after {TIMEOUT} s\n" + (e.stdout or b"").decode(errors="replace")
            if p.returncode != 0:
                return f"{command[0]} exited with {p.returncode}:\n" + p.stdout.decode(errors="replace")
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def decide(block):
    """(run it?, the reason when not)."""
    if block.marker.startswith("no-run:"):
        return False, block.marker[len("no-run:"):].strip() or None
    if block.lang in NEVER_RUN:
        return False, NEVER_RUN[block.lang]
    if block.lang == "rust" and os.path.basename(block.path) == "rust.md":
        return False, "a doc test of the crate (docs/rust.md is its front page): cargo test runs it"
    if block.lang in RUNNERS:
        return True, None
    return False, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", default=os.path.join(ROOT, "target", "venv-test", "bin", "python"))
    parser.add_argument("--jar", default=os.path.join(ROOT, "target", "java", f"redislock-{VERSION}.jar"))
    parser.add_argument("files", nargs="*", help="FILE or FILE:LINE (default: README.md and docs/*.md)")
    args = parser.parse_args()
    # The blocks run in directories of their own.
    args.python, args.jar = os.path.abspath(args.python), os.path.abspath(args.jar)
    wanted = {}
    for f in args.files:
        path, _, line = f.partition(":")
        wanted.setdefault(os.path.abspath(path), set()).add(int(line) if line else None)
    files = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))
    if wanted:
        files = [f for f in files if f in wanted]
    chosen = []
    for path in files:
        lines = wanted.get(path)
        chosen += [b for b in blocks(path) if not lines or None in lines or b.line in lines]
    server = RedisServer()
    server.raw = redis.Redis(port=server.port)
    global PORT
    PORT = str(server.port)
    java_dir = tempfile.mkdtemp(prefix="redislock-doc-java-")
    ran = failed = skipped = 0
    problems = []
    started = time.monotonic()
    try:
        compile_java([b for b in chosen if b.lang == "java" and decide(b)[0]], java_dir, args)
        for block in chosen:
            go, reason = decide(block)
            lang = block.lang or "(none)"
            if not go:
                skipped += 1
                if reason is None:
                    failed += 1
                    problems.append(block.where)
                    print(f"{block.where}: {lang}: FAILED: cannot run {lang}, and no `no-run: <reason>` marker")
                else:
                    print(f"{block.where}: {lang}: not run: {reason}")
                continue
            error = run(block, server, args)
            ran += 1
            if error is None:
                print(f"{block.where}: {lang}: ran{' (fragment)' if block.marker.startswith('fragment') else ''}")
            else:
                failed += 1
                problems.append(block.where)
                print(f"{block.where}: {lang}: FAILED: {error.rstrip()}")
            sys.stdout.flush()
    finally:
        server.stop()
        shutil.rmtree(java_dir, ignore_errors=True)
    print(f"\n{ran} blocks run, {skipped} not run; {failed} failed; {time.monotonic() - started:.0f} s")
    if problems:
        print("failed: " + " ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
