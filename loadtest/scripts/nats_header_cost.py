#!/usr/bin/env python3
"""What a message's headers cost nats-server, in CPU per published message.

Starts its own nats-server (the one on PATH) on a free port, publishes batches of one
message shape at a time over a raw connection, with one subscriber draining them, and
prints the server's CPU time per message (from /proc) for each shape, round after round.

Why: nats-server (2.11 and later) looks at every published message's headers for its own
message tracing. When a `traceparent` says "sampled", it copies every header into a map
before it finds that the account traces nothing, so a sampled trace costs the server
more per message than an unsampled one. `Nats-Trace-Dest: trace disabled` makes it stop
looking. Shoal's figures for these are in the README (*Tracing overhead*).

Usage: loadtest/scripts/nats_header_cost.py [messages per shape] [rounds]
"""

import os
import socket
import subprocess
import sys
import threading
import time

PAYLOAD = b"x" * 300
TRACEPARENT = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-"
DISABLED = (b"Nats-Trace-Dest", b"trace disabled")
# Headers a Shoal object event carries besides its trace.
EVENT_HEADERS = [(b"Shoal-Event", b"PUT"), (b"Nats-Msg-Id", b"4f1c2a9e-7d4b-4f7e-9a55-0c1d2e3f4a5b")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hpub(headers):
    block = b"NATS/1.0\r\n" + b"".join(k + b": " + v + b"\r\n" for k, v in headers) + b"\r\n"
    return b"HPUB t.a %d %d\r\n%s%s\r\n" % (len(block), len(block) + len(PAYLOAD), block, PAYLOAD)


SHAPES = {
    "no headers": b"PUB t.a %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD),
    "event, no trace": hpub(EVENT_HEADERS),
    "event, unsampled": hpub(EVENT_HEADERS + [(b"traceparent", TRACEPARENT + b"00")]),
    "event, sampled": hpub(EVENT_HEADERS + [(b"traceparent", TRACEPARENT + b"01")]),
    "event, sampled, trace disabled": hpub(
        [DISABLED] + EVENT_HEADERS + [(b"traceparent", TRACEPARENT + b"01")]
    ),
}


def connect(port, deadline):
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port))
            conn.recv(4096)  # INFO
            return conn
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nats-server did not listen on port {port} within 10 s")
            time.sleep(0.05)


def server_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_trip(conn):
    conn.sendall(b"PING\r\n")
    seen = b""
    while b"PONG" not in seen:
        seen = seen[-8:] + conn.recv(4096)


def main():
    batch = 1000
    messages = max(batch, int(sys.argv[1]) // batch * batch) if len(sys.argv) > 1 else 400_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    port = free_port()
    server = subprocess.Popen(
        ["nats-server", "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        publisher = connect(port, deadline)
        publisher.sendall(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n')
        subscriber = connect(port, deadline)
        subscriber.sendall(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\nSUB t.> 1\r\n')
        round_trip(subscriber)
        round_trip(publisher)

        # The subscriber's PONG comes after every message queued for it: once it is read,
        # the server has delivered (and been charged for) all of a shape's messages.
        flushed = threading.Event()

        def drain():
            tail = b""
            while data := subscriber.recv(1 << 20):
                if b"PONG" in tail[-3:] + data:
                    flushed.set()
                tail = data

        threading.Thread(target=drain, daemon=True).start()
        print(f"nats-server CPU per message, {messages:,} messages of each shape, {len(PAYLOAD)} B payload")
        for n in range(1, rounds + 1):
            for name, message in SHAPES.items():
                chunk = message * batch
                before = server_cpu_seconds(server.pid)
                for _ in range(messages // batch):
                    publisher.sendall(chunk)
                round_trip(publisher)
                flushed.clear()
                subscriber.sendall(b"PING\r\n")
                if not flushed.wait(30):
                    raise SystemExit("the subscriber's PONG did not come within 30 s")
                after = server_cpu_seconds(server.pid)
                print(f"round {n}  {name:32s} {1e6 * (after - before) / messages:6.2f} µs", flush=True)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
