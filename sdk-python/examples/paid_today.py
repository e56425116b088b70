"""Lists today's paid transactions, every page.

    PAYRAIL_API_URL=http://127.0.0.1:8787 PAYRAIL_CLIENT_ID=cli_... PAYRAIL_CLIENT_SECRET=sk_... \\
        python examples/paid_today.py
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone

import payrail


def main() -> int:
    try:
        url = os.environ["PAYRAIL_API_URL"]
        client_id = os.environ["PAYRAIL_CLIENT_ID"]
        client_secret = os.environ["PAYRAIL_CLIENT_SECRET"]
    except KeyError as missing:
        print(f"set {missing.args[0]} (and PAYRAIL_API_URL, PAYRAIL_CLIENT_ID, PAYRAIL_CLIENT_SECRET)")
        return 2
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    count = 0
    with payrail.Client(url, client_id, client_secret) as client:
        paid = client.transactions.list(status=payrail.Status.PAID, created_after=today, limit=100)
        for t in paid:
            count += 1
            gross = "" if t.amount.gross is None else str(t.amount.gross)
            print(f"{t.id:>8}  {t.external_reference or '-':<24}  {gross} {t.currency or ''}")
    print(f"{count} paid today")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except payrail.PayrailError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
