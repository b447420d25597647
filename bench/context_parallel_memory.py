"""The longest sequence that trains within a memory cap per rank, under context parallelism, and the
activation memory per rank beside the count under dtrain's assumptions. bench/context_parallel_memory.sh
runs it; it runs build/dtrain itself (bench/llama_bench.json, micro-batch 1, 2 steps, one thread per
rank, parallel.cp ranks) and prints the tables.

The search, per layout: a short run (512 tokens per rank) for the baseline, then model.seq_len doubles
from 1,024 tokens per rank until a run goes over the cap; the bracket is then narrowed to one unit
(2·cp·64 tokens) by probes inside it, each placed where the line through the two longest passing runs'
peak RSS meets the cap (peak RSS is linear in the sequence: no s² term with fused attention), at most
the bracket's midpoint after a probe that failed. A run passes when it finishes and every rank's peak
RSS, as its "done:" line reports it, is within the cap. A run is stopped as soon as the resident size of
any of its ranks, read from /proc every 0.2 s, goes over the cap: it has failed, and the search need
not wait for its steps.

Activations per rank at the longest sequence s, as bench/tensor_parallel_memory.sh measures them: the
peak RSS there less the short run's, scaled by s / (s - s_short) to all s tokens, is what grows with the
sequence: the activations kept for backward and what backward holds besides at its peak. Two more runs
(recompute), at the same two lengths with full activation checkpointing, which keeps each block's input
only and at its peak holds backward's working set and one recomputed block, tell them apart: kept =
growth - growth with recompute + the blocks' inputs (L·h·s/cp elements) + one block (the count's). The
count, per rank, in bytes (src/model/activation_bytes.h): 4·(s/cp)·[L·(6h + 2·kv + a + 4f) + 2h + V]
for L layers of width h, a heads, kv = n_kv_head·head_dim, SwiGLU width f, vocabulary V; and with
what dtrain's Llama block keeps besides, 3h more per layer: each RMSNorm, composed of ATen ops, keeps
its normalised input for the weight's gradient (h, twice), and attention's output is kept twice, as
the kernel's output for its own backward and as its [B, T, h] copy, the o projection's input (h).
Usage: context_parallel_memory.py search OUT CAP_MIB [LAYOUT...]   (OUT/probes.json; layouts: cp1
         cp2_ring cp4_ring cp2_ulysses, the default all)
       context_parallel_memory.py recompute OUT    (OUT/recompute.json: the two runs per layout searched)
       context_parallel_memory.py table OUT CAP_MIB"""
import json
import os
import re
import signal
import subprocess
import sys
import time

CONFIG = "bench/llama_bench.json"
LAYOUTS = (("cp1", 1, "ring"), ("cp2_ring", 2, "ring"), ("cp4_ring", 4, "ring"), ("cp2_ulysses", 2, "ulysses"))
LABELS = {"cp1": "cp 1", "cp2_ring": "cp 2, ring", "cp4_ring": "cp 4, ring", "cp2_ulysses": "cp 2, Ulysses"}
SHORT_PER_RANK, FIRST_PER_RANK = 512, 1024
MiB = 2**20


def descendants(pid):
    """The ids of every process below `pid`, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Probe:
    def __init__(self, seq, passed, peak, wall, note):
        self.seq, self.passed, self.peak, self.wall, self.note = seq, passed, peak, wall, note


def probe(out, name, cp, impl, seq, cap, recompute=False):
    """One run of `seq` tokens: passed, each rank's peak RSS (MiB) and why it failed, if it did."""
    run_dir = f"{out}/{name}_s{seq}{'_recompute' if recompute else ''}"
    cmd = ["build/dtrain", "run", "--nproc-per-node", str(cp), "--no-sample", "--config", CONFIG,
           "--set", "train.threads=1", "--set", "train.steps=2", "--set", f"model.seq_len={seq}",
           "--set", f"parallel.cp={cp}", "--set", f"parallel.context.impl={impl}", "--set", f"train.run_dir={run_dir}",
           "--set", f"train.activation_checkpointing={'full' if recompute else 'none'}"]
    start = time.time()
    with open(f"{run_dir}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        over = None
        while proc.poll() is None:
            worst = max((rss_mib(p) for p in descendants(proc.pid)), default=0.0)
            if worst > cap:
                over = worst
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                break
            time.sleep(0.2)
    wall = time.time() - start
    if over is not None:
        return Probe(seq, False, None, wall, f"stopped: a rank reached {over:.0f} MiB")
    peaks = []
    for r in range(cp):
        try:
            m = re.search(r"done:.*peak RSS (\d+) MiB", open(f"{run_dir}/rank-{r}.log").read())
        except OSError:
            m = None
        if not m:
            return Probe(seq, False, None, wall, f"exit status {proc.returncode}, no done: line from rank {r} (see {run_dir}.log)")
        peaks.append(int(m.group(1)))
    passed = max(peaks) <= cap
    return Probe(seq, passed, peaks, wall, "" if passed else "over the cap")


def say(name, p):
    print(f"  {name} seq {p.seq}: {'pass' if p.passed else 'fail'} {'/'.join(map(str, p.peak)) if p.peak else ''} MiB "
          f"{p.note} ({p.wall:.0f} s)", file=sys.stderr, flush=True)


def search(out, name, cp, impl, cap):
    unit = 2 * cp * 64
    probes = []

    def run(seq):
        p = probe(out, name, cp, impl, seq, cap)
        say(name, p)
        probes.append(p)
        return p

    base = run(SHORT_PER_RANK * cp)
    if not base.passed:
        return probes, None, None
    lo, seq = base, FIRST_PER_RANK * cp
    while True:
        p = run(seq)
        if not p.passed:
            break
        lo, seq = p, 2 * seq
    hi, last_failed = seq, True
    while hi - lo.seq > unit:
        passes = sorted((q for q in probes if q.passed), key=lambda q: q.seq)[-2:]
        if len(passes) < 2:
            guess = (lo.seq + hi) / 2
        else:
            (s1, r1), (s2, r2) = ((q.seq, max(q.peak)) for q in passes)
            guess = s2 + (cap - r2) * (s2 - s1) / max(r2 - r1, 1e-9)
        if last_failed:
            guess = min(guess, (lo.seq + hi) / 2)
        target = min(max(int(guess) // unit * unit, lo.seq + unit), hi - unit)
        p = run(target)
        if p.passed:
            lo, last_failed = p, False
        else:
            hi, last_failed = target, True
    return probes, base, lo


def model_shape():
    m = json.load(open(CONFIG))["model"]
    h, a = m["d_model"], m["n_head"]
    kv = m["n_kv_head"] * (h // a)
    f = (8 * h // 3 + 63) // 64 * 64  # SwiGLU's width: 8/3·h rounded up to 64 (model.d_ff auto)
    return m["n_layer"], h, a, kv, f, m["vocab_size"]


def counted_mib(seq, cp, besides=0):
    """The count per rank, in MiB; `besides` more elements per token and layer."""
    L, h, a, kv, f, V = model_shape()
    return 4 * (seq / cp) * (L * (6 * h + 2 * kv + a + 4 * f + besides) + 2 * h + V) / MiB


def searched(out):
    """Per layout searched: (probes, the short run, the longest passing run or None)."""
    results = {}
    for name, probes in json.load(open(f"{out}/probes.json")).items():
        probes = [Probe(**p) for p in probes]
        passing = [p for p in probes if p.passed]
        results[name] = (probes, probes[0] if probes and probes[0].passed else None,
                         max(passing, key=lambda p: p.seq) if passing else None)
    return results


def run_search(out, cap, chosen):
    unknown = set(chosen) - {name for name, _, _ in LAYOUTS}
    if unknown:
        raise SystemExit(f"unknown layout(s) {', '.join(sorted(unknown))}: expected {', '.join(n for n, _, _ in LAYOUTS)}")
    results = {}
    for name, cp, impl in LAYOUTS:
        if name in chosen:
            print(f"{LABELS[name]}: searching under {cap} MiB per rank", file=sys.stderr, flush=True)
            results[name] = search(out, name, cp, impl, cap)[0]
    json.dump({n: [vars(p) for p in probes] for n, probes in results.items()}, open(f"{out}/probes.json", "w"), indent=1)


def run_recompute(out):
    runs = {}
    for name, cp, impl in LAYOUTS:
        probes, base, best = searched(out).get(name, ([], None, None))
        if not best or best is base:
            continue
        print(f"{LABELS[name]}: full activation checkpointing at {base.seq} and {best.seq} tokens", file=sys.stderr, flush=True)
        runs[name] = []
        for seq in (base.seq, best.seq):
            p = probe(out, name, cp, impl, seq, float("inf"), recompute=True)
            say(name, p)
            runs[name].append(vars(p))
    json.dump(runs, open(f"{out}/recompute.json", "w"), indent=1)


def print_tables(out, cap):
    results = searched(out)
    try:
        recomputed = {n: [Probe(**p) for p in r] for n, r in json.load(open(f"{out}/recompute.json")).items()}
    except FileNotFoundError:
        recomputed = {}
    layouts = [l for l in LAYOUTS if l[0] in results]
    L, h, a, kv, f, V = model_shape()
    print(f"cap {cap} MiB peak RSS per rank; Llama {L} layers, h={h}, a={a}, kv width {kv}, f={f}, V={V}; micro-batch 1, fp32, 2 steps")
    print("| layout | longest sequence (tokens) | tokens per rank | peak RSS per rank there (MiB) | first failing probe | "
          "vs cp 1 | per doubling of cp | runs (wall s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    longest = {n: (r[2].seq if r[2] else None) for n, r in results.items()}
    previous = {"cp2_ring": "cp1", "cp4_ring": "cp2_ring", "cp2_ulysses": "cp1"}
    for name, cp, impl in layouts:
        probes, base, best = results[name]
        if not best:
            print(f"| {LABELS[name]} | no run within the cap | | | | | | {len(probes)} |")
            continue
        failing = min((p.seq for p in probes if not p.passed and p.seq > best.seq), default=None)
        vs1 = f"{best.seq / longest['cp1']:.2f}x" if longest.get("cp1") else ""
        prev = previous.get(name)
        per = f"{best.seq / longest[prev]:.2f}x" if prev and longest.get(prev) else ""
        print(f"| {LABELS[name]} | {best.seq:,} | {best.seq // cp:,} | {'/'.join(map(str, best.peak))} | "
              f"{failing or ''} | {vs1} | {per} | {len(probes)} ({sum(p.wall for p in probes):.0f}) |")

    print()
    print("activations per rank at the longest sequence s, MiB, rank 0/rank 1/...: what grows from the short run to s, "
          "scaled to all s tokens; with full recompute; the activations kept")
    print("| layout | s (short run) | peak RSS short / s | grows with the sequence | grows, with full recompute | "
          "activations kept | count under dtrain's assumptions | with what the block keeps besides (+3h) | kept / count | "
          "kept / count +3h | grows / count |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, cp, impl in layouts:
        probes, base, best = results[name]
        if not best or best is base:
            continue
        scale = best.seq / (best.seq - base.seq)
        grows = [(y - x) * scale for x, y in zip(base.peak, best.peak)]
        count, count_besides = counted_mib(best.seq, cp), counted_mib(best.seq, cp, besides=3 * h)
        kept_cell, again_cell, ratio_cell, ratio_besides_cell = "", "", "", ""
        again = recomputed.get(name)
        if again and all(p.peak for p in again):
            again_grows = [(y - x) * scale for x, y in zip(again[0].peak, again[1].peak)]
            inputs = 4 * L * h * best.seq / cp / MiB  # what full recompute keeps: each block's input
            one_block = (count - 4 * (best.seq / cp) * (2 * h + V) / MiB) / L
            kept = [g - r + inputs + one_block for g, r in zip(grows, again_grows)]
            again_cell = "/".join(f"{x:.0f}" for x in again_grows)
            kept_cell = "/".join(f"{x:.0f}" for x in kept)
            ratio_cell = "/".join(f"{x / count:.2f}" for x in kept)
            ratio_besides_cell = "/".join(f"{x / count_besides:.2f}" for x in kept)
        print(f"| {LABELS[name]} | {best.seq:,} ({base.seq:,}) | {'/'.join(map(str, base.peak))} / {'/'.join(map(str, best.peak))} | "
              f"{'/'.join(f'{x:.0f}' for x in grows)} | {again_cell} | {kept_cell} | {count:.0f} | {count_besides:.0f} | {ratio_cell} | "
              f"{ratio_besides_cell} | "
              f"{'/'.join(f'{x / count:.2f}' for x in grows)} |")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("search", "recompute", "table"):
        raise SystemExit(__doc__)
    command, out = sys.argv[1], sys.argv[2]
    if command == "search":
        run_search(out, int(sys.argv[3]), sys.argv[4:] or [name for name, _, _ in LAYOUTS])
    elif command == "recompute":
        run_recompute(out)
    else:
        print_tables(out, int(sys.argv[3]))


if __name__ == "__main__":
    main()
