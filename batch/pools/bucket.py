"""The token bucket for starts: ``rate`` tokens a second, at most two saved up.

One token is one start, and a start needs a whole token. Saving up little keeps the starts
of a pool evenly spaced (a burst of saved-up starts is what a provider's own bucket
refuses); saving up more than one makes up for a start that came late (the driver whose
turn it was woke a few milliseconds after its token: with at most one saved up, each such
delay would be lost, a tenth of the key's rate on a busy machine). A rate below one (0.5:
one start every 2 s) is a limit below one job at a time. Pure: the time is passed in.
"""

from __future__ import annotations

#: Tokens saved up at most.
BURST = 2.0


def refill(tokens: float, at: float, rate: float | None, now: float) -> float:
    """The tokens at ``now``, ``tokens`` having been there at ``at``."""
    if rate is None:
        return BURST
    return min(BURST, tokens + max(0.0, now - at) * rate)


def wait_for_token(tokens: float, rate: float) -> float:
    """Seconds until there is a whole token (0 when there is one)."""
    return 0.0 if tokens >= 1.0 else (1.0 - tokens) / rate


def recent_rate(starts: list[float], now: float, window: float) -> float | None:
    """Starts a second over the last ``window`` seconds; None with fewer than two starts."""
    recent = [at for at in starts if now - at <= window]
    if len(recent) < 2:
        return None
    span = max(now - recent[0], 1e-6)
    return len(recent) / span
