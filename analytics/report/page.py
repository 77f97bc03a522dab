"""Self-contained HTML pages: the style, escaping, tables and plots as ``data:`` URIs.

Shared by ``sci-ingest report`` (:mod:`analytics.report.html`) and ``sci-ingest bench report``
(:mod:`analytics.bench.report`).  A page made with these needs nothing but itself: styles
inline, system fonts, plots as PNG ``data:`` URIs, no script, no font or CDN request.
Every value goes through :func:`esc`: what the database holds (file names, formulas, ids)
is text, never markup.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable, Iterable

__all__ = ["CSS", "esc", "html_table", "png_uri", "figure_uri"]

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1d1d1f;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2.5rem;border-bottom:1px solid #ddd;padding-bottom:.3rem}
h3{font-size:1rem;margin:1.2rem 0 .4rem}table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:12.5px}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:right;vertical-align:top}th{background:#f4f4f6}
td.l,th.l{text-align:left}.meta{color:#555;font-size:12.5px}.note{background:#fff8e1;padding:.4rem .7rem;border-left:3px solid #f0b400}
.missing{color:#999}img{max-width:100%;border:1px solid #eee}nav a{margin-right:.8rem}code{background:#f4f4f6;padding:0 .25rem}
"""


def esc(value) -> str:
    """``value`` as HTML text (quotes too: safe in an attribute)."""
    return html.escape(str(value), quote=True)


def html_table(rows: Iterable[dict], columns: list, text: Iterable[str] = (), fmt: Callable[[object], str] = str,
               row_class: Callable[[dict], str] | None = None, table_id: str | None = None) -> str:
    """An HTML table of ``rows``; ``columns`` are keys or ``(key, header)`` pairs.  The first
    column and the keys in ``text`` align left, the rest (numbers) right; each cell is
    ``fmt(value)``, escaped.  ``row_class(row)``: a class for the row's ``<tr>``; ``table_id``:
    the table's ``id``."""
    pairs = [c if isinstance(c, tuple) else (c, c) for c in columns]
    text = set(text)
    cls = ["l" if i == 0 or k in text else "" for i, (k, _) in enumerate(pairs)]
    head = "".join(f'<th class="{c}">{esc(h)}</th>' for c, (_, h) in zip(cls, pairs))
    body = []
    for r in rows:
        tr = f'<tr class="{esc(row_class(r))}">' if row_class else "<tr>"
        body.append(tr + "".join(f'<td class="{c}">{esc(fmt(r.get(k)))}</td>' for c, (k, _) in zip(cls, pairs))
                    + "</tr>")
    table = f'<table id="{esc(table_id)}">' if table_id else "<table>"
    return f"{table}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def png_uri(data: bytes) -> str:
    """PNG bytes as a ``data:`` URI for an ``<img src>``."""
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def figure_uri(fig, dpi: int = 100) -> str:
    """A matplotlib figure as a PNG ``data:`` URI; the figure is closed."""
    import matplotlib  # noqa: PLC0415 - lazy: the Agg backend is chosen here, before pyplot, not at import; matplotlib costs 0.22 s

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - lazy: the Agg backend is chosen here, before pyplot, not at import; matplotlib costs 0.22 s

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return png_uri(buf.getvalue())
