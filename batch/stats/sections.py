"""Every table of a ``batch stats`` document, in the order they are shown: one batch's
table (``stats_cells``), then its samples' tables (``repeats_cells``) — or a comparison's.

Its own module so the cells of one kind never import the other's: ``repeats_cells`` builds
on ``stats_cells``' cells, and this is the one place that puts them together.
"""

from collections.abc import Mapping
from typing import Any

from batch.stats.cells import Section, compare_sections, stats_sections
from batch.stats.rates import GROUPINGS
from batch.stats.repeats_cells import paired_section, repeats_section


def sections_for(result: Mapping[str, Any]) -> list[Section]:
    """The sections of ``result`` (``batch_stats`` or ``compare_stats``'s document)."""
    if "changed" in result:
        return compare_sections(result)
    sections = stats_sections(result)
    sampled = "pass_at_k" in result["overall"]
    if sampled:
        by = result["by"]
        sections.append(repeats_section(result[GROUPINGS[by]], result["overall"], by))
    # Every pair is in the JSON; the table shows them for samples or when asked for.
    if (sampled or "compare" in result) and result.get("paired"):
        sections.append(paired_section(result["paired"], result.get("paired_scheme")))
    return sections
