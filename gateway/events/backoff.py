"""Reconnect delays: exponential with jitter, reset after progress."""

from __future__ import annotations

import asyncio
import random


class Backoff:
    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.delay = first

    def reset(self) -> None:
        self.delay = self.first

    async def wait(self) -> None:
        await asyncio.sleep(self.delay * random.uniform(0.5, 1.0))
        self.delay = min(self.cap, self.delay * 2)
