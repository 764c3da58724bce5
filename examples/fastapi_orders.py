# SPDX-License-Identifier: MIT
"""FastAPI: one request at a time per order, across every replica of the service.

    python examples/fastapi_orders.py              # against the embedded redis-server
    python examples/fastapi_orders.py redis://...  # or your Redis

It sends two "ship" requests for order 7 at once and one for order 8: one of the order-7
requests ships, the other is answered 409 (the order is busy), order 8 ships. Needs
``pip install fastapi httpx``. tests/test_integrations.py runs it.
"""

# (no `from __future__ import annotations`: FastAPI reads the endpoints' annotations,
# which name local dependencies)

import asyncio
import sys
from typing import Annotated, Any

import httpx
import redis.asyncio
from fastapi import Depends, FastAPI

from redislock import AsyncLock
from redislock.integrations.fastapi import LockDependency


def create_app(client: Any) -> FastAPI:
    """The service: ``POST /orders/{order_id}/ship`` holds the order's lock while it works."""
    app = FastAPI()
    order_lock = LockDependency(client, "order:{order_id}", timeout=0)

    @app.post("/orders/{order_id}/ship")
    async def ship(
        order_id: int, lock: Annotated[AsyncLock, Depends(order_lock)]
    ) -> dict[str, Any]:
        await asyncio.sleep(0.3)  # the work: talk to the carrier
        return {"order": order_id, "shipped": True, "fencing_token": lock.fencing_token}

    return app


async def main(url: str) -> int:
    client = redis.asyncio.Redis.from_url(url)
    app = create_app(client)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://orders") as http:
        replies = await asyncio.gather(
            http.post("/orders/7/ship"), http.post("/orders/7/ship"), http.post("/orders/8/ship")
        )
    await client.aclose()
    for reply in replies:
        print(reply.status_code, reply.json())
    codes = sorted(r.status_code for r in replies)
    ok = codes == [200, 200, 409]
    print("OK: one ship per order at a time" if ok else f"FAIL: {codes}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = sys.argv[1]
    else:
        from redislock.server import ensure_embedded

        target = ensure_embedded()
    raise SystemExit(asyncio.run(main(target)))
