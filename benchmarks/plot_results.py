"""Plots of a ``scale.py`` results file (matplotlib PNG) for the documentation.

- ``throughput.png``: sessions/s vs concurrent sessions (log x), ours and the floors;
- ``p99.png``: p99 session latency vs concurrent sessions;
- ``cpu.png``: client CPU per call by scenario, ours against the floor (ratios on the bars).

Usage::

    python benchmarks/plot_results.py results.json [--out docs/assets/bench]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

IMPLS = {"engine": "simplellmfunc", "floor": "raw httpx", "floor-limited": "raw httpx + limiter"}


def _caption(results: dict[str, Any]) -> str:
    m = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    return f"{m['cpu']}, {m['cores']} cores, Python {m['python']}; {versions}; {m['date']}"


def _sweep_plot(results: dict[str, Any], key: str, label: str, scale: float, path: Path) -> None:
    sweep = results["sweep"]
    sizes = sorted(sweep, key=int)
    fig, ax = plt.subplots(figsize=(7, 4))
    for impl, name in IMPLS.items():
        present = [n for n in sizes if impl in sweep[n]]
        values = [sweep[n][impl][key] * scale for n in present]
        ax.plot([int(n) for n in present], values, marker="o", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("concurrent 3-step sessions in one process")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.text(0.01, 0.01, _caption(results), fontsize=6)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _cpu_plot(results: dict[str, Any], path: Path) -> None:
    seq = results["sequential"]
    kinds = list(seq)
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    for offset, impl in ((-width / 2, "floor"), (width / 2, "engine")):
        values = [seq[k][impl]["cpu"] * 1e6 for k in kinds]
        bars = ax.bar([i + offset for i in range(len(kinds))], values, width, label=IMPLS[impl])
        if impl == "engine":
            ratios = [seq[k]["engine"]["cpu"] / seq[k]["floor"]["cpu"] for k in kinds]
            ax.bar_label(bars, [f"{r:.2f}x" for r in ratios], fontsize=8)
    ax.set_xticks(range(len(kinds)), kinds)
    ax.set_ylabel("client CPU per call (µs)")
    ax.legend()
    fig.text(0.01, 0.01, _caption(results), fontsize=6)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    """Write the PNGs into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if results.get("sweep"):
        paths += [out / "throughput.png", out / "p99.png"]
        _sweep_plot(results, "rate", "sessions/s", 1.0, paths[0])
        _sweep_plot(results, "p99", "p99 session latency (ms)", 1e3, paths[1])
    if results.get("sequential"):
        paths.append(out / "cpu.png")
        _cpu_plot(results, paths[-1])
    return paths


def markdown(results: dict[str, Any]) -> str:
    """The figures as Markdown tables (what the documentation shows beside the plots)."""
    m = results["machine"]
    lines = [
        f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores, load average"
        f" {m['load_average'][0]:.1f} at the start), Python {m['python']}, "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        + ".",
        "",
        "| sequential | floor CPU µs/call | ours | ratio | floor ms/call | ours | ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, r in results["sequential"].items():
        f, e = r["floor"], r["engine"]
        lines.append(
            f"| {kind} | {f['cpu'] * 1e6:.0f} | {e['cpu'] * 1e6:.0f} | {e['cpu'] / f['cpu']:.2f}x"
            f" | {f['wall'] * 1e3:.1f} | {e['wall'] * 1e3:.1f} | {e['wall'] / f['wall']:.2f}x |"
        )
    lines += [
        "",
        "| N sessions | client | sessions/s | p99 ms | CPU µs/session | KB/live session | errors |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, r in sorted(results["sweep"].items(), key=lambda item: int(item[0])):
        for impl, x in r.items():
            lines.append(
                f"| {n} | {IMPLS[impl]} | {x['rate']:.0f} | {x['p99'] * 1e3:.0f}"
                f" | {x['cpu'] * 1e6:.0f} | {x['rss_kb']:.1f} | {x['errors']:.0f} |"
            )
    lines += ["", "| ratio to the floor | value |", "|---|---|"]
    lines += [f"| `{k}` | {v:.2f}x |" for k, v in results["ratios"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=Path("docs/assets/bench"))
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.results.read_text())))
        return
    for path in plot(json.loads(args.results.read_text()), args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
