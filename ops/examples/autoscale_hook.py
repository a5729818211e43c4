#!/usr/bin/env python3
"""An autoscaling hook for Shoal, in Python with nats-py: proof that hooks need nothing but a
NATS client.

An HPA annotated `autoscaling.shoal.io/hook: NAME` has the autoscaler ask
`shoal.v1.hooks.autoscale.NAME` (JSON request, see bus-schemas/README.md) before every scale
decision. This hook sizes a worker pool by its backlog: one replica per CAPACITY waiting items,
summed over the HPA's External metrics, instead of the built-in ratio to the target. The
autoscaler still applies minReplicas/maxReplicas and `behavior` to the answer.

    python3 autoscale_hook.py --nats nats://127.0.0.1:4222 --creds integration.nk \
        --name per-five --capacity 5

The bus admits only known identities: `--creds` (or SHOAL_CREDS) is a credential of role
`integration` (`shoal creds create --role integration --name hooks -o integration.nk`), an
nkey seed file. Replies come back under the identity's private inbox prefix.
"""

import argparse
import asyncio
import json
import math
import os

import nats
import nkeys

SUFFIXES = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def quantity(text):
    """A Kubernetes quantity string ("20", "1500m", "2k") as a float."""
    text = str(text)
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * SUFFIXES[suffix]
    return float(text)


def backlog(metrics):
    total = 0.0
    for metric in metrics:
        current = (metric.get("external") or {}).get("current") or {}
        value = current.get("value") or current.get("averageValue")
        if value is not None:
            total += quantity(value)
    return total


def decide(request, capacity):
    if "hpa" not in request:
        return {"error": "not a hook request"}
    waiting = backlog(request.get("metrics", []))
    desired = math.ceil(waiting / capacity)
    return {
        "desiredReplicas": desired,
        "reason": f"{waiting:g} waiting, {capacity:g} per replica",
    }


def public_key(creds):
    """The public key of the seed in `creds`: it names the identity's private inbox."""
    with open(creds, "rb") as f:
        seed = bytearray(f.read().strip())
    return nkeys.from_seed(seed).public_key.decode()


async def connect(url, creds, name):
    """Connects as the identity of `creds`, with its inbox prefix (the only one it may read)."""
    return await nats.connect(
        url,
        name=name,
        nkeys_seed=creds,
        inbox_prefix="_INBOX." + public_key(creds),
    )


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats", default="nats://127.0.0.1:4222")
    parser.add_argument("--name", required=True, help="the hook's name (the annotation's value)")
    parser.add_argument("--capacity", type=float, default=5.0, help="items one replica handles")
    parser.add_argument(
        "--creds",
        default=os.environ.get("SHOAL_CREDS"),
        help="the identity's credential, an nkey seed file (default: $SHOAL_CREDS)",
    )
    args = parser.parse_args()
    if not args.creds:
        parser.error("--creds FILE (or SHOAL_CREDS) is required: the bus refuses anonymous connections")

    client = await connect(args.nats, args.creds, f"autoscale-hook-{args.name}")

    async def answer(msg):
        try:
            reply = decide(json.loads(msg.data), args.capacity)
        except (ValueError, TypeError) as error:
            reply = {"error": f"bad request: {error}"}
        await msg.respond(json.dumps(reply).encode())

    await client.subscribe(f"shoal.v1.hooks.autoscale.{args.name}", cb=answer)
    await client.flush()
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
