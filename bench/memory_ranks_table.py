#!/usr/bin/env python3
"""Each rank's estimated and measured peak memory, from the memory record of runs' metrics.jsonl.

Usage: bench/memory_ranks_table.py LAYOUT=RUN_DIR [LAYOUT=RUN_DIR ...]

A run writes {"step": N, "memory": {"ranks": [...]}} at its end (docs/training.md, "Memory
estimate"): per rank the estimate for its own config and the measured peak (on a GPU the caching
allocator's, on the CPU build the counting allocator's). Ranks with equal figures (the data-parallel
ranks of one layout) print once, others rank by rank ("rank 0 / rank 1"). A run that wrote
no record (it failed) or has no estimate says so in its row.
"""
import json
import sys

MiB = 1 << 20


def memory_record(run_dir):
    try:
        with open(f"{run_dir}/metrics.jsonl") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except OSError:
        return None
    found = [r["memory"] for r in records if "memory" in r]
    return found[-1] if found else None


def joined(ranks, text):
    """Each rank's `text`, joined by " / "; once when every rank's is the same."""
    values = [text(r) for r in ranks]
    return values[0] if len(set(values)) == 1 else " / ".join(values)


def main():
    print("| layout | estimated | measured | error |")
    print("| --- | --- | --- | --- |")
    for arg in sys.argv[1:]:
        layout, run_dir = arg.split("=", 1)
        memory = memory_record(run_dir)
        if memory is None:
            print(f"| {layout} | the run wrote no memory record | | |")
            continue
        ranks = memory["ranks"]
        measured = joined(ranks, lambda r: f"{r.get('measured_peak_bytes', 0) / MiB:.1f} MiB")
        if not all("estimated_bytes" in r for r in ranks):
            print(f"| {layout} | {memory.get('estimate', 'no estimate')} | {measured} | |")
            continue
        same = len({(r["estimated_bytes"], r["measured_peak_bytes"]) for r in ranks}) == 1
        shown = ranks[:1] if same else ranks
        estimated = joined(shown, lambda r: f"{r['estimated_bytes'] / MiB:.1f} MiB")
        measured = joined(shown, lambda r: f"{r['measured_peak_bytes'] / MiB:.1f} MiB")
        error = " / ".join(f"{100 * r['error']:+.1f}%" for r in shown)
        print(f"| {layout} | {estimated} | {measured} | {error} |")


if __name__ == "__main__":
    main()
