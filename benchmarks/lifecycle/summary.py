"""Summarize lifecycle.jsonl (from run.sh) as a Markdown table: construction (first, later),
close, optimizers alive, RSS over the cycles, Manager cycles."""

from __future__ import annotations

import json
import statistics
import sys


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    outcomes = {r["outcome"]["probe"]: r["outcome"] for r in rows if "outcome" in r}
    by = {p: [r for r in rows if r.get("probe") == p] for p in outcomes}

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1e3:.2f} ms (median of {len(values)})"

    lines = ["| measure | value |", "|---|---|"]
    c = by.get("construction", [])
    if c:
        first = next(r["create_s"] for r in c if r["kind"] == "first")
        lines.append(f"| first construction | {first * 1e3:.1f} ms |")
        for kind, label in (("beside_first", "while another is open"), ("alone", "with none open")):
            sel = [r for r in c if r["kind"] == kind]
            lines.append(f"| later construction, {label} | {ms([r['create_s'] for r in sel])} |")
            lines.append(f"| close(), {label} | {ms([r['close_s'] for r in sel])} |")
    for probe in ("optimizers-alive", "managers-alive"):
        if probe in outcomes:
            o = outcomes[probe]
            alive = max((r.get("alive", 0) for r in by[probe]), default=0)
            lines.append(f"| {probe} (asked {o['n']}) | {alive} reached, rc {o['rc']} |")
    for probe in ("optimizer-cycles", "manager-cycles"):
        if probe in outcomes:
            o = outcomes[probe]
            sel = [r for r in by[probe] if r.get("i", -1) >= 0]
            if sel:
                rss = f"RSS {sel[0]['rss_mib']:.1f} -> {sel[-1]['rss_mib']:.1f} MiB"
                a, b = sel[0], sel[-1]
                extra = f", fds {a['fds']} -> {b['fds']}, threads {a['threads']} -> {b['threads']}"
                done = sel[-1]["i"] + 1
            else:
                rss, extra, done = "no samples", "", 0
            lines.append(
                f"| {probe} (asked {o['n']}) | {done} done, rc {o['rc']}, {o['wall_s']} s; {rss}{extra} |"
            )
    for r in by.get("object-cycles", []):
        lines.append(
            f"| {r['kind']} create/destroy x{r['n']} | {r['us_per_cycle']} us each, RSS "
            f"{r['rss_before_mib']} -> {r['rss_after_mib']} MiB ({r['kib_per_cycle']} KiB/cycle), "
            f"{r['rss_after_trim_mib']} after malloc_trim |"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
