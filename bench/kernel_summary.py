"""Sums a LibTorch profiler trace (a run's profile-rank-N.json, written with train.profile_steps, or
torch.profiler's export_chrome_trace) by name: on a GPU the device's kernels, copies and sets, with
their share of the device's busy time and of the wall time the trace spans; without device events,
the host's ATen operators by self time (each operator's time less the operators it called, so that
the rows add up to the time spent).
Usage: python3 bench/kernel_summary.py TRACE.json [--top N] [--steps S] (S: the steps the trace
covers, for per-step times). Prints a table."""
import argparse
import collections
import json

DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def with_self_times(ops):
    """Each operator with "dur" replaced by its self time: its duration less that of the operators
    nested in it on the same thread."""
    out = []
    by_thread = collections.defaultdict(list)
    for e in ops:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for events in by_thread.values():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, time of its children]
        def close(entry):
            out.append(dict(entry[0], dur=entry[0]["dur"] - entry[1]))
        for e in events:
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]:
                close(stack.pop())
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0.0])
        while stack:
            close(stack.pop())
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--steps", type=int, default=1)
    a = p.parse_args()
    with open(a.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") in DEVICE_CATEGORIES]
    chosen = device or with_self_times([e for e in events if e.get("cat") == "cpu_op"])
    what = "device kernels, copies and sets" if device else "host ATen operators (self time)"
    span_us = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in chosen:
        by_name[e["name"]][0] += e["dur"]
        by_name[e["name"]][1] += 1
    busy = sum(t for t, _ in by_name.values())
    print(f"{what}: {busy / 1e3 / a.steps:.2f} ms per step busy of {span_us / 1e3 / a.steps:.2f} ms per step spanned "
          f"({100 * busy / span_us:.1f}%), {len(chosen)} events over {a.steps} step(s)")
    print(f"| {'ms/step':>8} | {'share':>6} | {'calls/step':>10} | name |")
    print(f"| {'-' * 8} | {'-' * 6} | {'-' * 10} | ---- |")
    for name, (t, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[: a.top]:
        print(f"| {t / 1e3 / a.steps:8.3f} | {100 * t / busy:5.1f}% | {n / a.steps:10.1f} | {name[:110]} |")


if __name__ == "__main__":
    main()
