# SPDX-License-Identifier: MIT
"""Pure logic shared by the sync and asyncio flavours: no sockets, no sleeping, no threads."""
