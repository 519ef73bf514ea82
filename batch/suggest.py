"""What a mistyped name most likely meant: the suggestion of "no such command" errors."""

from __future__ import annotations


def closest(word: str, names: list[str]) -> str | None:
    """The name a typo most likely meant: fewest edits, a swap of two neighbours counting
    as one (``stauts`` -> ``status``, not ``stats``: the same letters win a tie), at most a
    third of the word's length."""

    def edits(a: str, b: str) -> int:
        # Optimal string alignment distance (Damerau-Levenshtein without re-edits).
        d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
        for i in range(1, len(a) + 1):
            for j in range(1, len(b) + 1):
                cost = a[i - 1] != b[j - 1]
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
        return d[-1][-1]

    ranked = sorted(
        (edits(word, name), sorted(word) != sorted(name), abs(len(word) - len(name)), name)
        for name in names
    )
    best = ranked[0] if ranked else None
    return best[3] if best and best[0] <= max(1, len(word) // 3) else None
