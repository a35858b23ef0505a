"""The HTML report: one self-contained page (inline CSS and SVG, no script, no external asset)."""

from __future__ import annotations

import json
from html import escape
from typing import Any, Final

__all__ = ["render"]

_CSS: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#1d232a;max-width:70rem}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;width:100%}th,td{padding:.3rem .5rem;border-bottom:1px solid #dde}
th{text-align:left;background:#f3f5f8}td.num{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#17733a;font-weight:600}.fail{color:#b3261e;font-weight:600}
.cards{display:flex;gap:1rem;flex-wrap:wrap}.card{border:1px solid #dde;border-radius:6px;
padding:.6rem 1rem}.card b{display:block;font-size:1.3rem}
details pre{white-space:pre-wrap;background:#f7f7f9;padding:.5rem;border-radius:4px}
svg text{font:12px system-ui,sans-serif}
"""


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _bars(title: str, items: list[tuple[str, float]], *, unit: str = "%", top: float = 1.0) -> str:
    """A horizontal bar chart as inline SVG (``top`` is the full-width value)."""
    row, label_w, bar_w = 22, 170, 420
    height = row * len(items) + 30
    parts = [
        f'<svg role="img" aria-label="{escape(title)}" width="{label_w + bar_w + 80}" '
        f'height="{height}" viewBox="0 0 {label_w + bar_w + 80} {height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
    ]
    for index, (label, value) in enumerate(items):
        y = 10 + index * row
        width = 0 if top <= 0 else max(0.0, min(1.0, value / top)) * bar_w
        color = (
            "#2e7d4f" if unit != "%" or value >= 0.8 else "#c77700" if value >= 0.5 else "#b3261e"
        )
        shown = _pct(value) if unit == "%" else f"{value:.3f}{unit}"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(label[:28])}</text>'
            f'<rect class="bar" x="{label_w}" y="{y + 2}" width="{width:.1f}" height="{row - 6}" '
            f'fill="{color}" data-value="{value:.4f}"/>'
            f'<text x="{label_w + width + 6:.1f}" y="{y + 14}">{shown}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _comparison(comparison: Any) -> str:  # a _report.Comparison (typed there: no circle)
    style = {"improved": "pass", "regressed": "fail"}
    rows = "".join(
        f"<tr><td>{escape(c.name)}</td><td class='{style.get(c.status, '')}'>{c.status}</td>"
        f"<td class=num>{'-' if c.before is None else _pct(c.before)}</td>"
        f"<td class=num>{'-' if c.after is None else _pct(c.after)}</td></tr>"
        for c in comparison.changes
        if c.status != "unchanged"
    )
    return (
        f"<h2>Compared with {escape(comparison.before.name)}</h2>"
        f"<p>pass@k {_pct(comparison.before.pass_at_k)} → {_pct(comparison.after.pass_at_k)}; "
        f"<span class=pass>{len(comparison.improved)} improved</span>, "
        f"<span class=fail>{len(comparison.regressed)} regressed</span></p>"
        f"<table id=changes><tr><th>case</th><th>change</th><th>before</th><th>after</th></tr>"
        f"{rows}</table>"
    )


def render(report: Any, comparison: Any | None) -> str:  # _report.Report / Comparison
    """The page of ``report`` (and of its ``comparison`` with a baseline)."""
    summary = report.summary()
    k = report.repeats
    cards = "".join(
        f"<div class=card>{label}<b>{value}</b></div>"
        for label, value in (
            (f"pass@{k}", _pct(report.pass_at_k)),
            (f"pass^{k}", _pct(report.pass_every_k)),
            ("attempts passed", _pct(report.pass_rate)),
            ("cases", str(len(report.cases))),
            ("p50 latency", f"{report.latency['p50']:.3f}s"),
            ("tokens", str(report.tokens["total"])),
        )
    )
    chart = _bars(
        "Pass rate by evaluator",
        [(f"pass@{k}", report.pass_at_k), *report.evaluator_pass_rates.items()],
    )
    slowest = sorted(
        ((c.name, max(a.duration_s for a in c.attempts)) for c in report.cases),
        key=lambda item: -item[1],
    )[:15]
    latency = _bars(
        "Slowest cases (seconds)", slowest, unit="s", top=max((s for _, s in slowest), default=1)
    )
    rows = []
    for case in report.cases:
        attempts = "".join(
            f"<pre>attempt {n + 1}: {'PASS' if a.passed else 'FAIL'} in {a.duration_s:.3f}s\n"
            f"output: {escape(json.dumps(a.output, ensure_ascii=False)[:2000])}\n"
            + (f"error: {escape(a.error)}\n" if a.error else "")
            + (
                f"tools: {escape(json.dumps(a.tool_calls, ensure_ascii=False)[:1000])}\n"
                if a.tool_calls
                else ""
            )
            + "".join(
                f"{escape(s.evaluator)}: {'pass' if s.passed else 'FAIL'} ({s.score:.2f}) "
                f"{escape(s.reason)}\n"
                for s in a.scores
            )
            + "</pre>"
            for n, a in enumerate(case.attempts)
        )
        verdict = "pass" if case.passed else "fail"
        rows.append(
            f"<tr class=case data-passed={'true' if case.passed else 'false'}>"
            f"<td><details><summary>{escape(case.name)}</summary>"
            f"<pre>inputs: {escape(json.dumps(case.inputs, ensure_ascii=False)[:2000])}</pre>"
            f"{attempts}</details></td><td class={verdict}>{verdict.upper()}</td>"
            f"<td class=num>{_pct(case.pass_rate)}</td>"
            f"<td class=num>{max(a.duration_s for a in case.attempts):.3f}</td></tr>"
        )
    extra = _comparison(comparison) if comparison is not None else ""
    title = f"{report.name} on {report.dataset}"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1><div class=cards>{cards}</div>"
        f"<h2>Pass rates</h2>{chart}<h2>Latency</h2>{latency}{extra}"
        f"<h2>Cases</h2><table id=cases><tr><th>case</th><th>pass@{k}</th><th>attempts passed</th>"
        f"<th>max seconds</th></tr>{''.join(rows)}</table>"
        # Script text is not HTML-decoded: keep it JSON, with no "</" that could end the tag.
        f"<script type=application/json id=summary>"
        f"{json.dumps(summary).replace('</', '<' + chr(92) + '/')}</script>"
        "</body></html>"
    )
