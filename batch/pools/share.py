"""Each member's fair share of the pool's concurrency: max-min fairness (water-filling).

Every member gets an equal part of ``capacity``, unless it wants less, and what it leaves is
shared by the others in the same way. Slots that do not divide evenly go to the members that
have started the fewest jobs, so that over time equal demand gets equal starts. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping


def fair_shares(
    capacity: int, demands: Mapping[str, int], starts: Mapping[str, int]
) -> dict[str, int]:
    """Member -> the slots it may hold, given what each wants (``demands``) and how many
    jobs each has started (``starts``, which breaks ties)."""
    shares = dict.fromkeys(demands, 0)
    left = capacity
    # Fewest starts first, then the name: a fixed order, so two drivers agree.
    order = sorted(demands, key=lambda member: (starts.get(member, 0), member))
    wanting = [member for member in order if demands[member] > 0]
    while left > 0 and wanting:
        for member in list(wanting):
            if left == 0:
                break
            shares[member] += 1
            left -= 1
            if shares[member] >= demands[member]:
                wanting.remove(member)
    return shares
