# SPDX-License-Identifier: MIT
"""Integrations with frameworks (each module imports its framework: install it yourself):
:mod:`redislock.integrations.fastapi`."""
