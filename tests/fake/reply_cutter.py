#!/usr/bin/env python3
"""A proxy in front of a real server that loses one reply with its
connection: the release whose outcome is unknown (LockUnconfirmed,
RedisLock\\Unconfirmed), made on purpose.

Armed with some bytes (a lock's token), it lets the next request that holds
them through, waits for the server's reply (so the server has run the
command: Redis answers a script once it ran), and closes the client's
connection instead of passing the reply on. The client's retry on a fresh
connection then finds the lock already released. Everything else passes
through unchanged.

Usage:

  reply_cutter.py PORT    proxy to the server on 127.0.0.1:PORT, from a
                          free loopback port: stdout's first line. Each
                          stdin line "arm HEX" arms it with those bytes
                          and is answered "armed"; each reply cut prints
                          "cut". It exits when stdin closes.

The Python suite imports ReplyCutter; the PHP suite runs this file.
"""
import socket
import sys
import threading


class ReplyCutter:
    """A TCP proxy in front of a server that, once armed with some bytes,
    lets the next request holding them through, waits for the server's
    reply (so the server has run the command), and then closes the
    client's connection instead of passing the reply on: a command whose
    reply was lost with its connection. Everything else passes through.

    `url` is the proxy's address; `cut` counts the replies cut."""

    def __init__(self, port: int, on_cut=None):
        self._target = ("127.0.0.1", port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._armed = None
        self._lock = threading.Lock()
        self.cut = 0
        self._socks = []
        self._on_cut = on_cut
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, marker: bytes) -> None:
        """Cut the reply of the next request that holds `marker`."""
        with self._lock:
            self._armed = marker

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._socks += [client, server]
            state = {"cut": False}
            threading.Thread(target=self._up, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, state), daemon=True).start()

    def _up(self, client, server, state):
        seen = b""
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            seen = seen[-4096:] + data
            with self._lock:
                marker = self._armed
                # In this request: a match that ends in the bytes just read.
                if marker is not None and marker in seen[-(len(data) + len(marker) - 1):]:
                    # Set before the request goes on: its reply comes after.
                    state["cut"] = True
                    self._armed = None
            try:
                server.sendall(data)
            except OSError:
                break
        for s in (client, server):
            _close(s)

    def _down(self, server, client, state):
        while True:
            try:
                data = server.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            if state["cut"]:
                # The server has answered: it ran the command. The client
                # never hears of it.
                with self._lock:
                    self.cut += 1
                if self._on_cut is not None:
                    self._on_cut()
                break
            try:
                client.sendall(data)
            except OSError:
                break
        for s in (client, server):
            _close(s)

    def close(self):
        _close(self._listener)
        for s in self._socks:
            _close(s)


def _close(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def main() -> None:
    cutter = ReplyCutter(int(sys.argv[1]), on_cut=lambda: print("cut", flush=True))
    print(cutter.port, flush=True)
    for line in sys.stdin:
        word, _, arg = line.strip().partition(" ")
        if word == "arm":
            cutter.arm(bytes.fromhex(arg))
            print("armed", flush=True)
    cutter.close()


if __name__ == "__main__":
    main()
