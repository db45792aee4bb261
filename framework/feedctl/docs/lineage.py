"""The lineage graph of the docs site: tables → feeds → sinks, laid out in three columns, as inline SVG."""

from __future__ import annotations

from html import escape

_WIDTH, _HEIGHT, _GAP, _COLUMN = 230, 30, 14, 330
_KINDS = ("table", "feed", "sink")


def _clip(text: str, room: int = 30) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"


def _middle(rows: list[int]) -> float:
    return sum(rows) / len(rows) if rows else float("inf")


def lineage_svg(tables: list[str], feeds: dict[str, tuple[list[str], str | None]]) -> str:
    """`feeds`: each feed's tables and sink (None: sinkless). Every box links to its section of the page."""
    tables = sorted(tables)
    # Each feed beside the middle of its tables, each sink beside the middle of its feeds: fewer crossings.
    row = {t: i for i, t in enumerate(tables)}
    ordered_feeds = sorted(feeds, key=lambda f: (_middle([row[t] for t in feeds[f][0] if t in row]), f))
    row = {f: i for i, f in enumerate(ordered_feeds)}
    sinks = sorted(
        {s for _, s in feeds.values() if s},
        key=lambda s: (_middle([row[f] for f, (_, to) in feeds.items() if to == s]), s),
    )
    columns = {"table": tables, "feed": ordered_feeds, "sink": sinks}
    rows = max(len(c) for c in columns.values()) or 1
    height = rows * (_HEIGHT + _GAP) + _GAP
    place = {}
    for x, kind in enumerate(_KINDS):
        names = columns[kind]
        top = (height - len(names) * (_HEIGHT + _GAP) + _GAP) / 2  # each column centered
        for i, name in enumerate(names):
            place[kind, name] = (20 + x * _COLUMN, top + i * (_HEIGHT + _GAP))
    edges = [(("table", t), ("feed", f)) for f, (ts, _) in feeds.items() for t in ts if ("table", t) in place]
    edges += [(("feed", f), ("sink", s)) for f, (_, s) in feeds.items() if s]
    out = [
        f'<svg id="lineage" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="lineage: tables, feeds, '
        f'sinks" viewBox="0 0 {40 + 2 * _COLUMN + _WIDTH} {height:.0f}" width="{40 + 2 * _COLUMN + _WIDTH}" '
        f'height="{height:.0f}">'
    ]
    for a, b in edges:
        (x1, y1), (x2, y2) = place[a], place[b]
        x1, y1, y2 = x1 + _WIDTH, y1 + _HEIGHT / 2, y2 + _HEIGHT / 2
        middle = (x1 + x2) / 2
        out.append(
            f'<path class="edge" data-from="{escape(a[1])}" data-to="{escape(b[1])}" '
            f'd="M{x1:.0f},{y1:.0f} C{middle:.0f},{y1:.0f} {middle:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"/>'
        )
    for (kind, name), (x, y) in place.items():
        out.append(
            f'<a href="#{kind}-{escape(name)}"><g class="node {kind}"><title>{kind} {escape(name)}</title>'
            f'<rect x="{x}" y="{y:.0f}" width="{_WIDTH}" height="{_HEIGHT}" rx="6"/>'
            f'<text x="{x + 10}" y="{y + _HEIGHT / 2 + 4.5:.0f}">{escape(_clip(name))}</text></g></a>'
        )
    out.append("</svg>")
    return "\n".join(out)
