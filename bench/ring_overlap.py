"""How much of ring attention's traffic hides behind compute, from a run's trace.json (train.trace).

Ring attention posts each hop (a send to the next cp rank and a receive from the previous one, labelled
"ring attention k/v", "ring attention backward k/v" and "ring attention dk/dv") before the block it
computes meanwhile, and waits for it after. The trace has a slice per op, from its start to the return
of the wait that saw it done, with blocked_us: the time the compute thread spent in the op's start and
wait. Per rank, over the steps after the warm-up (a step begins at its "F" slice):

  exposed    E: the sum of blocked_us over the rank's ring ops (sends and receives): what the ring cost
             the compute thread.
  skew       the part of E spent before the peer had posted the matching op: for each receive, how long
             after this rank called wait (the slice's end less its blocked_us) the sending rank started
             the send it pairs with (the same label, the same occurrence), at most the receive's blocked
             time. That is waiting for the other rank's compute to reach the hop, not for bytes.
  transfer   X: the messages the rank received, times one message's transfer time: what a message costs
             when nothing hides it. By default the trace's own (transfer_time below: the last dk/dv
             hop, waited for at once, is such a message, of the same bytes on the same path under the
             same load); T_MSG_US gives another (bench/context_parallel.sh prints dtrain bench-comm's
             broadcast of the same bytes for reference, a collective on the caller's thread).
  in flight  the sum of the receives' slices, each from its post to the return of its wait: the time the
             ring's messages were outstanding, the compute thread computing for all of it but E.
  hidden     1 - (E - skew) / X, at least 0: the share of the transfer time the compute thread did not
             wait out. Where the waiting left after the skew exceeds the transfers themselves it is 0:
             the waits are then the copy threads' turn on the cores, not the bytes.

The hops are told apart (KINDS): the last dk/dv hop of each layer's backward cannot hide, so the
table has a row per kind beside the total.
Usage: ring_overlap.py TRACE_JSON [WARMUP_STEPS [T_MSG_US]]; as a module, ring_overlap(path, warmup,
t_msg_us) returns the per-rank figures and the transfer time used."""
import json
import re
import sys
from collections import defaultdict

RING = "ring attention"
# The hops by what runs while they are in flight: every hop but the last dk/dv one is posted before a
# block's compute; the last dk/dv hop brings a chunk's gradients home after the rank's last block and
# is waited for at once, so nothing can hide it.
KINDS = ("k/v, forward", "k/v, backward", "dk/dv, behind compute", "dk/dv, last hop", "all")


def kind_of(label, last_step):
    step = int(label.rsplit(" ", 1)[1])
    if label.startswith(RING + " backward k/v"):
        return "k/v, backward"
    if label.startswith(RING + " dk/dv"):
        return "dk/dv, last hop" if step == last_step else "dk/dv, behind compute"
    return "k/v, forward"


def ring_overlap(path, warmup=0, t_msg_us=None):
    """Per rank, per hop kind (KINDS): steps, messages_received, in_flight_ms, exposed_ms, skew_ms,
    transfer_ms and hidden (None without messages), over the steps after `warmup`; and the message
    transfer time used (t_msg_us, or the trace's own: see transfer_time)."""
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    starts = defaultdict(list)  # per rank, the steps' "F" slices' starts
    for e in events:
        if e.get("cat") == "compute" and e["name"] == "F":
            starts[e["pid"]].append(e["ts"])
    ops = defaultdict(list)
    for e in sorted(events, key=lambda e: e["ts"]):
        if e.get("cat") == "comm" and e.get("args", {}).get("label", "").startswith(RING):
            ops[e["pid"]].append(e)
    last_step = max((int(e["args"]["label"].rsplit(" ", 1)[1]) for evs in ops.values() for e in evs
                     if e["args"]["label"].startswith(RING + " dk/dv")), default=-1)
    # The n-th send of a label from rank p to rank r pairs with the n-th receive of it on r from p.
    sends = {}
    for pid, evs in ops.items():
        count = defaultdict(int)
        for e in evs:
            m = re.match(r"send->(\d+) ", e["name"])
            if m:
                key = (pid, int(m.group(1)), e["args"]["label"])
                sends[key + (count[key],)] = e
                count[key] += 1
    timed = []  # (rank, kind, receive?, blocked, skew, in flight) of each op after the warm-up
    for pid in sorted(ops):
        begin = sorted(starts[pid])[warmup] if len(starts[pid]) > warmup else float("inf")
        count = defaultdict(int)
        for e in ops[pid]:
            m = re.match(r"recv<-(\d+) ", e["name"])
            key = (int(m.group(1)), pid, e["args"]["label"]) if m else None
            n = count[key] if m else 0
            if m:
                count[key] += 1
            if e["ts"] < begin:
                continue
            blocked, skew = e["args"]["blocked_us"], 0.0
            send = sends.get(key + (n,)) if m else None
            if send is not None:
                skew = min(max(send["ts"] - (e["ts"] + e["dur"] - blocked), 0.0), blocked)
            timed.append((pid, kind_of(e["args"]["label"], last_step), bool(m), blocked, skew, e["dur"]))
    if t_msg_us is None:
        t_msg_us = transfer_time(timed)
    result = {}
    for pid in sorted(ops):
        result[pid] = {}
        for k in KINDS:
            mine = [op for op in timed if op[0] == pid and k in (op[1], "all")]
            received = sum(1 for op in mine if op[2])
            exposed, skew = sum(op[3] for op in mine), sum(op[4] for op in mine)
            transfer = received * t_msg_us
            result[pid][k] = {"steps": len(starts[pid]) - warmup, "messages_received": received,
                              "in_flight_ms": sum(op[5] for op in mine if op[2]) / 1e3, "exposed_ms": exposed / 1e3,
                              "skew_ms": skew / 1e3, "transfer_ms": transfer / 1e3,
                              "hidden": max(0.0, 1 - (exposed - skew) / transfer) if transfer else None}
    return result, t_msg_us


def transfer_time(timed):
    """One message's transfer time from the trace itself: the median, over the receives of the last
    dk/dv hop (waited for as soon as it is posted, nothing computed meanwhile), of the time blocked
    after the sender had posted (blocked less skew). The same bytes on the same path, under the same
    load, with nothing hiding them; 0 where the trace has no such hop (cp 1)."""
    last = sorted(op[3] - op[4] for op in timed if op[1] == "dk/dv, last hop" and op[2])
    return last[len(last) // 2] if last else 0.0


def table(ranks):
    """Markdown rows, one per hop kind, each cell rank 0/rank 1/..., per timed step."""
    def cells(kind, value, fmt="{:.1f}"):
        return "/".join(fmt.format(value(r[kind]) / max(r[kind]["steps"], 1)) for r in ranks.values())

    rows = ["| hops | messages received | in flight (ms) | exposed E (ms) | of which skew (ms) | E less skew (ms) | "
            "transfer X (ms) | hidden |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in KINDS:
        hidden = "/".join("n/a" if r[k]["hidden"] is None else f"{100 * r[k]['hidden']:.0f}%" for r in ranks.values())
        rows.append(f"| {k} | {cells(k, lambda r: r['messages_received'], '{:.0f}')} | {cells(k, lambda r: r['in_flight_ms'])} | "
                    f"{cells(k, lambda r: r['exposed_ms'])} | {cells(k, lambda r: r['skew_ms'])} | "
                    f"{cells(k, lambda r: r['exposed_ms'] - r['skew_ms'])} | {cells(k, lambda r: r['transfer_ms'])} | {hidden} |")
    return rows


def main():
    path = sys.argv[1]
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    ranks, t_msg = ring_overlap(path, warmup, float(sys.argv[3]) if len(sys.argv) > 3 else None)
    print(f"per timed step, rank 0/rank 1/...; one message's transfer time {t_msg:.0f} us")
    print("\n".join(table(ranks)))


if __name__ == "__main__":
    main()
