#!/usr/bin/env python3
"""A fake Redis server that lies: the fake-server suite of every binding.

What a broken server, a proxy or a desynchronised connection sends must
never talk redislock into a grant. This server answers the handshake and
housekeeping commands a client sends sanely (PING, AUTH, SELECT, CLIENT,
SCRIPT LOAD, INFO, SUBSCRIBE, ...) and the commands that decide a grant --
`SET key token NX PX ms [GET]` and the acquire scripts (EVALSHA / EVAL of a
script that does `SET ... NX PX`) -- with a broken reply of one KIND. It
never answers in a way that correctly says "granted": where a kind sends a
well-formed reply (before or after the broken part) it is the "held" reply
of that command:

  SET k t NX PX ms GET      $32 <token>     (the holder's token)
  SET k t NX PX ms          $-1             (not set)
  the ACQUIRE script        *3 [0, 5000, <token>]
  the ENQUEUE script        *4 [0, 5000, <token>, 0]

Other scripts (cancel, release, ...) are answered with "not yours"
(nil / 0), and EVALSHA of a script the server has not seen with NOSCRIPT,
as Redis does, so that the client sends its source with EVAL.

Usage:

  fake_redis.py --list              the kinds, one a line
  fake_redis.py --kind KIND         serve KIND on a free loopback port; the
                                    port is stdout's first line
  fake_redis.py --all               serve every kind, each on a port of its
                                    own: one line "KIND PORT" per kind, then
                                    a line "ready"

Each connection is served in a thread of its own. The server exits after
--lifetime seconds (default 600) in case whoever started it died without
stopping it. FAKE_REDIS_DEBUG=1 logs every command received and every reply
sent to stderr. Python 3 standard library only.
"""
import argparse
import hashlib
import os
import random
import socket
import sys
import threading
import time

DEBUG = bool(os.environ.get("FAKE_REDIS_DEBUG"))

# The holder's token in a "held" reply: 32 hex digits, as redislock makes them.
HOLDER = b"6f746865722d686f6c6465722d746f6b"
PTTL = 5000

# The reply that, read in place of another, would grant: the nil that
# `SET ... NX ... GET` answers when it took the lock.
NIL = b"$-1\r\n"

# 2^64 + 1: read into a wrapping 64-bit integer it is 1 ("taken").
WRAPS_TO_ONE = b"18446744073709551617"

# Each kind: a one-line description (--list --verbose). The replies are
# made by Conn.lock_reply.
KINDS = {
    "negative_bulk": "a bulk length of -7 ($-7): only $-1 is nil",
    "negative_array": "an array length of -3 (*-3): only *-1 is nil",
    "reply_twice": "the first lock command's held reply, then (5 ms later) a nil nobody asked for",
    "unsolicited": "a nil sent right after connect, before any command; then held replies",
    "dribble": "a valid held reply, one byte every 300 ms",
    "silent": "never answers a lock command",
    "random_bytes": "64 random bytes (never a valid frame's first byte)",
    "truncated": "half of a held reply, then the connection is closed",
    "huge_bulk": "a bulk of 512 MB announced, a few bytes of it sent, then nothing",
    "huge_array": "an array of 2^31 elements announced, then nothing",
    "deep_nesting": "10,000 nested one-element arrays around an integer",
    "resp3": "RESP3 frames on a RESP2 connection: _ (null) to SET, ~ (a set {1, 7}) to the scripts",
    "int_overflow": "integers beyond 64 bits (2^64 + 1 in the scripts' status)",
    "int_for_array": "an integer (:1) where an array (scripts) or a bulk string (SET ... GET) is expected",
    "array_for_int": "an array where an integer or a bulk string is expected",
    "wrong_string": "+QUEUED",
    "trailing_garbage": "a held reply followed by junk bytes in the same write",
    "error_reply": "-ERR something (the one kind whose right outcome is a Server error)",
    "bulk_too_long": "$3 followed by 6 bytes",
    "close_at_once": "the connection closed after the command is read",
    "empty_array": "*0",
}


def log(*parts):
    if DEBUG:
        sys.stderr.write(" ".join(str(p) for p in parts) + "\n")
        sys.stderr.flush()


def bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


def array(items) -> bytes:
    return b"*%d\r\n" % len(items) + b"".join(items)


def integer(n: int) -> bytes:
    return b":%d\r\n" % n


class Closed(Exception):
    pass


class Reader:
    """Reads the commands a client sends: RESP arrays of bulk strings, or
    inline commands."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise Closed()
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def command(self):
        line = self._line()
        if not line.startswith(b"*"):
            return line.split()
        args = []
        for _ in range(int(line[1:])):
            head = self._line()
            if not head.startswith(b"$"):
                raise Closed()
            args.append(self._exact(int(head[1:])))
        return args


class Server:
    def __init__(self, kind: str):
        self.kind = kind
        self.scripts = {}  # sha1 hex -> source
        self.lock = threading.Lock()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]

    def learn(self, source: bytes) -> str:
        sha = hashlib.sha1(source).hexdigest()
        with self.lock:
            self.scripts[sha] = source
        return sha

    def source(self, sha: bytes):
        with self.lock:
            return self.scripts.get(sha.decode("ascii", "replace").lower())

    def serve_forever(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=Conn(self, sock).run, daemon=True).start()


class Conn:
    def __init__(self, server: Server, sock):
        self.server = server
        self.kind = server.kind
        self.sock = sock
        self.reader = Reader(sock)
        self.locks = 0  # lock commands answered on this connection
        self.subscribed = 0
        self.name = "%s:%d" % (self.kind, sock.getpeername()[1])

    def send(self, data: bytes):
        log(self.name, "<-", repr(data[:200]) + ("..." if len(data) > 200 else ""))
        self.sock.sendall(data)

    def later(self, delay: float, data: bytes):
        """Send `data` after `delay` seconds (from another thread)."""

        def go():
            time.sleep(delay)
            try:
                self.send(data)
            except OSError:
                pass

        threading.Thread(target=go, daemon=True).start()

    def stall(self):
        """Answer nothing more: read and drop until the client hangs up."""
        log(self.name, "stalls")
        try:
            while self.sock.recv(65536):
                pass
        except OSError:
            pass
        raise Closed()

    def run(self):
        try:
            if self.kind == "unsolicited":
                self.send(NIL)
            while True:
                args = self.reader.command()
                log(self.name, "->", b" ".join(a[:60] for a in args))
                if args:
                    self.dispatch(args)
        except (Closed, OSError, ValueError):
            pass
        finally:
            try:
                self.sock.close()
            except OSError:
                pass

    # -- commands -------------------------------------------------------

    def dispatch(self, args):
        name = args[0].upper()
        rest = [a.upper() for a in args[1:3]]
        if name == b"SET" and b"NX" in [a.upper() for a in args[3:]]:
            get = b"GET" in [a.upper() for a in args[3:]]
            return self.lock_command(bulk(HOLDER) if get else NIL, "set_get" if get else "set")
        if name in (b"EVALSHA", b"EVAL"):
            if name == b"EVAL":
                source = args[1]
                self.server.learn(source)
            else:
                source = self.server.source(args[1])
                if source is None:
                    return self.send(b"-NOSCRIPT No matching script. Please use EVAL.\r\n")
            if b"'NX', 'PX'" in source:
                if b"local first" in source:  # ENQUEUE: queued behind 0 waiters
                    held = array([integer(0), integer(PTTL), bulk(HOLDER), integer(0)])
                else:  # ACQUIRE
                    held = array([integer(0), integer(PTTL), bulk(HOLDER)])
                return self.lock_command(held, "script")
            # cancel (nil: not handed to us), release (0: not the owner),
            # anything else: nil.
            if b"'DEL'" in source and b"~= ARGV[1] then return 0" in source:
                return self.send(integer(0))
            return self.send(NIL)
        return self.housekeeping(name, rest, args)

    def housekeeping(self, name, rest, args):
        if name == b"PING":
            if self.subscribed:
                return self.send(array([bulk(b"pong"), bulk(args[1] if len(args) > 1 else b"")]))
            return self.send(b"+PONG\r\n" if len(args) == 1 else bulk(args[1]))
        if name in (b"AUTH", b"SELECT", b"READONLY", b"READWRITE", b"ASKING", b"RESET", b"QUIT"):
            return self.send(b"+OK\r\n" if name != b"RESET" else b"+RESET\r\n")
        if name == b"CLIENT":
            sub = rest[0] if rest else b""
            if sub == b"ID":
                return self.send(integer(7))
            if sub == b"GETNAME":
                return self.send(NIL)
            return self.send(b"+OK\r\n")
        if name == b"HELLO":
            # An old server: RESP2 only. The client stays on RESP2.
            return self.send(b"-ERR unknown command 'HELLO'\r\n")
        if name == b"SCRIPT":
            sub = rest[0] if rest else b""
            if sub == b"LOAD" and len(args) > 2:
                return self.send(bulk(self.server.learn(args[2]).encode()))
            if sub == b"EXISTS":
                shas = args[2:]
                return self.send(array([integer(1 if self.server.source(s) else 0) for s in shas]))
            return self.send(b"+OK\r\n")
        if name == b"INFO":
            info = (b"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"
                    b"os:Linux\r\ntcp_port:%d\r\n# Replication\r\nrole:master\r\n"
                    b"connected_slaves:0\r\n# Memory\r\nmaxmemory:0\r\n"
                    b"maxmemory_policy:noeviction\r\n" % self.server.port)
            return self.send(bulk(info))
        if name == b"ROLE":
            return self.send(array([bulk(b"master"), integer(0), b"*0\r\n"]))
        if name in (b"SUBSCRIBE", b"SSUBSCRIBE", b"PSUBSCRIBE"):
            kind = {b"SUBSCRIBE": b"subscribe", b"SSUBSCRIBE": b"ssubscribe",
                    b"PSUBSCRIBE": b"psubscribe"}[name]
            out = b""
            for ch in args[1:]:
                self.subscribed += 1
                out += array([bulk(kind), bulk(ch), integer(self.subscribed)])
            return self.send(out)
        if name in (b"UNSUBSCRIBE", b"SUNSUBSCRIBE", b"PUNSUBSCRIBE"):
            kind = name.lower()
            out = b""
            for ch in args[1:] or [b""]:
                self.subscribed = max(0, self.subscribed - 1)
                out += array([bulk(kind), bulk(ch) if ch else NIL, integer(self.subscribed)])
            return self.send(out)
        if name in (b"GET", b"HGET", b"LPOS"):
            return self.send(NIL)
        if name in (b"PTTL", b"TTL"):
            return self.send(integer(-2))
        if name in (b"DEL", b"UNLINK", b"EXISTS", b"LLEN", b"PUBLISH", b"PEXPIRE", b"EXPIRE",
                    b"DBSIZE", b"WAIT", b"LREM"):
            return self.send(integer(0))
        if name == b"TIME":
            t = time.time()
            return self.send(array([bulk(b"%d" % int(t)), bulk(b"%d" % int((t % 1) * 1e6))]))
        if name == b"CONFIG":
            return self.send(b"*0\r\n")
        if name == b"COMMAND":
            return self.send(b"*0\r\n")
        return self.send(b"-ERR unknown command '%s'\r\n" % args[0][:40])

    # -- the lies ---------------------------------------------------------

    def lock_command(self, held: bytes, what: str):
        """Answer a command that decides a grant; `held` is its well-formed
        "held" reply, `what` is "set_get", "set" or "script"."""
        self.locks += 1
        first = self.locks == 1
        k = self.kind
        if k == "negative_bulk":
            return self.send(b"$-7\r\n")
        if k == "negative_array":
            return self.send(b"*-3\r\n")
        if k == "reply_twice":
            self.send(held)
            if first:
                # The same reply again, as a proxy retrying a write may:
                # left over for the next command on this connection.
                self.later(0.005, NIL)
            return None
        if k == "unsolicited":
            return self.send(held)
        if k == "dribble":
            def drip():
                try:
                    for i in range(len(held)):
                        self.send(held[i:i + 1])
                        time.sleep(0.3)
                except OSError:
                    pass
            threading.Thread(target=drip, daemon=True).start()
            return self.stall()
        if k == "silent":
            return self.stall()
        if k == "random_bytes":
            rng = random.Random(51 + self.locks)
            data = bytearray(rng.getrandbits(8) for _ in range(64))
            # Never a frame's type byte: the reply is garbage from its first byte.
            while chr(data[0]) in "+-:$*_#,(!=%~|>\r\n":
                data[0] = rng.getrandbits(8)
            self.send(bytes(data))
            return self.stall()
        if k == "truncated":
            self.send(held[: len(held) // 2])
            raise Closed()
        if k == "huge_bulk":
            self.send(b"$536870912\r\nabc")
            return self.stall()
        if k == "huge_array":
            self.send(b"*2147483648\r\n")
            return self.stall()
        if k == "deep_nesting":
            return self.send(b"*1\r\n" * 10000 + b":1\r\n")
        if k == "resp3":
            if what == "script":
                # A RESP3 set {1, 7}: read as an array it is "taken, fence 7".
                return self.send(b"~2\r\n:1\r\n:7\r\n")
            # The RESP3 null: read as nil it is "taken" for SET ... GET.
            return self.send(b"_\r\n")
        if k == "int_overflow":
            if what == "script":
                return self.send(b"*2\r\n:" + WRAPS_TO_ONE + b"\r\n:0\r\n")
            return self.send(b":99999999999999999999999\r\n")
        if k == "int_for_array":
            return self.send(b":1\r\n")
        if k == "array_for_int":
            if what == "script":
                # An array where the status integer should be.
                return self.send(b"*2\r\n*1\r\n:1\r\n:1\r\n")
            return self.send(b"*2\r\n:1\r\n:1\r\n")
        if k == "wrong_string":
            return self.send(b"+QUEUED\r\n")
        if k == "trailing_garbage":
            return self.send(held + b"junk\x00\xff+OK\r\n")
        if k == "error_reply":
            return self.send(b"-ERR something\r\n")
        if k == "bulk_too_long":
            return self.send(b"$3\r\nabcdef\r\n")
        if k == "close_at_once":
            raise Closed()
        if k == "empty_array":
            return self.send(b"*0\r\n")
        raise AssertionError("unknown kind %r" % k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print the kinds, one a line")
    ap.add_argument("--verbose", action="store_true", help="with --list: and what each sends")
    ap.add_argument("--kind", help="the kind of broken reply to serve")
    ap.add_argument("--all", action="store_true", help="serve every kind, each on a port of its own")
    ap.add_argument("--lifetime", type=float, default=600.0,
                    help="exit after this many seconds (default 600)")
    opts = ap.parse_args()
    if opts.list:
        for k, what in KINDS.items():
            print("%-18s %s" % (k, what) if opts.verbose else k)
        return 0
    if opts.all:
        servers = [Server(k) for k in KINDS]
        for s in servers:
            print(s.kind, s.port)
        print("ready")
    elif opts.kind in KINDS:
        servers = [Server(opts.kind)]
        print(servers[0].port)
    else:
        ap.error("--kind must be one of: " + ", ".join(KINDS))
    sys.stdout.flush()
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    time.sleep(opts.lifetime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
