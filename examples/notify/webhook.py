#!/usr/bin/env python3
"""Post a batch event to a webhook: a notify command for Slack, ntfy or any HTTP endpoint.

Use it as a sweep's notify command (examples/notify/README.md)::

    notify: [python3, examples/notify/webhook.py, https://ntfy.sh/my-sweeps]

It reads the event batch writes to its stdin (docs/notify.md) and POSTs it:

- the URL is argv[1], else ``$BATCH_WEBHOOK_URL``;
- ``--format slack`` sends ``{"text": MESSAGE}`` (Slack and Mattermost incoming webhooks),
  ``--format text`` the one-line message as plain text (ntfy), the default ``json`` the
  event itself;
- ``$BATCH_WEBHOOK_TOKEN``, when set, is sent as ``Authorization: Bearer ...``;
- ``--timeout SECONDS`` (default 10) bounds the request; batch also kills a notifier that
  outlives the sweep's ``notify.timeout``.

Standard library only. Exits 0 when the endpoint answered 2xx, else 1 with the reason on
stderr (batch writes it to ``batch-logs/notify.log``). It names the endpoint by scheme and
host only: a webhook URL's path is often its secret.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request


def request_for(url: str, event: dict, fmt: str, token: str | None) -> urllib.request.Request:
    if fmt == "slack":
        body, kind = json.dumps({"text": event.get("message", "")}).encode(), "application/json"
    elif fmt == "text":
        body, kind = str(event.get("message", "")).encode(), "text/plain; charset=utf-8"
    else:
        body, kind = json.dumps(event).encode(), "application/json"
    headers = {"Content-Type": kind, "User-Agent": "batch-notify-webhook"}
    if fmt == "text":
        headers["Title"] = f"batch {event.get('event', '')}: {event.get('batch_id', '')}"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return urllib.request.Request(url, data=body, headers=headers, method="POST")


def where(url: str) -> str:
    """The URL's scheme and host only: a webhook's path or query often is its secret (Slack)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="POST a batch event to a webhook.")
    parser.add_argument("url", nargs="?", default=os.environ.get("BATCH_WEBHOOK_URL"))
    parser.add_argument("--format", choices=("json", "slack", "text"), default="json")
    parser.add_argument("--timeout", type=float, default=10.0)
    args = parser.parse_args(argv)
    if not args.url:
        print("webhook: no URL (give it as an argument or $BATCH_WEBHOOK_URL)", file=sys.stderr)
        return 1
    try:
        event = json.loads(sys.stdin.read() or "{}")
    except json.JSONDecodeError as exc:
        print(f"webhook: stdin is not a JSON event: {exc}", file=sys.stderr)
        return 1
    shown = where(args.url)
    request = request_for(args.url, event, args.format, os.environ.get("BATCH_WEBHOOK_TOKEN"))
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        print(f"webhook: {shown} answered {exc.code} {exc.reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"webhook: cannot reach {shown}: {reason}", file=sys.stderr)
        return 1
    print(f"webhook: {shown} answered {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
