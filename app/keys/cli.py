"""`python -m app keys add|list|update|revoke|usage`: manage API keys in the store the server uses (MT_KEYS_DB or
MT_REDIS_URL, or --keys-db / --redis-url). A new key is printed once; only its hash is stored."""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets

from app.keys.access import open_store
from app.keys.records import LIMITS, KeyRecord
from app.settings import Settings


def _limit(text: str) -> int | None:
    """A limit on the command line: a number (-1: unlimited), or "default" for the server's default."""
    return None if text == "default" else int(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app keys", description=__doc__)
    p.add_argument("--keys-db")
    p.add_argument("--redis-url")
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("add", "update"):
        cmd = sub.add_parser(name, help=f"{name} a key (limits: a number, -1 for none, 'default')")
        cmd.add_argument("name", nargs="?" if name == "add" else None, help="the key's name (add: generated if none)")
        if name == "add":
            cmd.add_argument("--key", help="use this key instead of a new random one (e.g. a LibreTranslate key)")
        for limit in LIMITS:  # update: only the limits given change
            cmd.add_argument("--" + limit.replace("_", "-"), type=_limit, default=argparse.SUPPRESS)
    sub.add_parser("list", help="every key with its limits (JSON lines)")
    sub.add_parser("revoke", help="refuse a key from now on").add_argument("name")
    sub.add_parser("usage", help="requests and characters of a key (or of ip:ADDRESS)").add_argument("name")
    return p


async def run(args: argparse.Namespace) -> str:
    """Carry out one command; what to print."""
    overrides = {k: v for k, v in vars(args).items() if v is not None and k in ("keys_db", "redis_url")}
    store = open_store(Settings(**overrides))
    limits = {k: getattr(args, k) for k in LIMITS if hasattr(args, k)}
    try:
        if args.command == "add":
            key = args.key or secrets.token_urlsafe(24)
            name = args.name or f"key-{secrets.token_hex(4)}"
            await store.add(key, KeyRecord(name, {k: v for k, v in limits.items() if v is not None}))
            return json.dumps({"name": name, "key": key})
        if args.command == "update":
            await store.update(args.name, limits)
            return f"updated {args.name}"
        if args.command == "revoke":
            await store.revoke(args.name)
            return f"revoked {args.name}"
        if args.command == "usage":
            subject = args.name if args.name.startswith("ip:") else f"key:{args.name}"
            return json.dumps({"name": args.name, **await store.usage(subject)})
        return "\n".join(json.dumps(r.public()) for r in await store.records())
    finally:
        await store.close()


def main(argv: list[str]) -> int:
    """Run the command; exit code 1 with the reason for an unknown name or a taken one."""
    try:
        print(asyncio.run(run(parser().parse_args(argv))))
    except KeyError as exc:
        print(f"error: no key named {exc.args[0]!r}")
        return 1
    except ValueError as exc:
        print(f"error: {exc}")
        return 1
    return 0
