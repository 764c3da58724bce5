# SPDX-License-Identifier: MIT
"""The asyncio flavour: locks over ``redis.asyncio.Redis`` / ``redis.asyncio.RedisCluster``."""
