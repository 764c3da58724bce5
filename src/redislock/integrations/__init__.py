# SPDX-License-Identifier: MIT
"""Integrations with frameworks (each module imports its framework: install it yourself):
:mod:`redislock.integrations.fastapi` (a request's lock), :mod:`redislock.integrations.django`
(``cache.lock()`` through django-redis), :mod:`redislock.integrations.apscheduler` (each
scheduled run on one instance), :mod:`redislock.integrations.celery` (a task whose runs
with equal arguments never overlap). Runnable examples: ``examples/``."""
