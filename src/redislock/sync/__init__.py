# SPDX-License-Identifier: MIT
"""The blocking flavour: locks over ``redis.Redis`` / ``redis.cluster.RedisCluster``."""
