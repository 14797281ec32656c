"""Server-rendered SVG charts: geometry computed here, drawn by a template. No JavaScript, no CDN."""

from __future__ import annotations

from datetime import date

from django.utils.formats import date_format

WIDTH, HEIGHT = 720, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 14, 30  # room for the axis labels


def _nice_ceiling(fen: int) -> int:
    """The smallest 1, 2 or 5 × 10ⁿ fen at or above ``fen`` (at least ¥1), so the axis reads cleanly."""
    step = 100
    while True:
        for factor in (1, 2, 5):
            if step * factor >= fen:
                return step * factor
        step *= 10


def _yuan(fen: int) -> str:
    yuan, cents = divmod(fen, 100)
    return f"¥{yuan:,}" if not cents else f"¥{yuan:,}.{cents:02d}"


def spend_chart(days: list[tuple[date, int]]) -> dict:
    """Bars for ``[(day, fen)]``: positions, a tooltip per bar, y ticks at 0, ½ and the top, x labels weekly."""
    top = _nice_ceiling(max((fen for _, fen in days), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(days), 1)
    bars, labels = [], []
    for i, (day, fen) in enumerate(days):
        h = round(plot_h * fen / top, 1) if fen else 0
        x = round(LEFT + i * slot + slot * 0.15, 1)
        bars.append(
            {
                "x": x,
                "y": round(TOP + plot_h - h, 1),
                "w": round(slot * 0.7, 1),
                "h": h,
                "fen": fen,
                "title": f"{date_format(day, 'M j')}: {_yuan(fen) if fen else '¥0'}",
            }
        )
        if i % 7 == (len(days) - 1) % 7:  # label today and every week before it
            labels.append({"x": round(x + slot * 0.35, 1), "text": date_format(day, "M j")})
    ticks = [{"y": round(TOP + plot_h - plot_h * part / 2, 1), "text": _yuan(top * part // 2)} for part in (0, 1, 2)]
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "baseline": TOP + plot_h,
        "label_y": HEIGHT - 10,
        "bars": bars,
        "labels": labels,
        "ticks": ticks,
        "total_fen": sum(fen for _, fen in days),
        "empty": not any(fen for _, fen in days),
    }
