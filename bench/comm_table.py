"""Reads what bench/comm.sh left in its output directory and prints, per rank count, the bus
bandwidth of every op and size for dtrain on shared memory, dtrain on Gloo and OpenMPI, with the
ratios the goals are stated in, and the latency of a 4 KiB all-reduce."""
import math
import re
import sys


def parse(path):
    """{op: {bytes: (time_us, busbw)}} from nccl-tests style tables (several passes may follow each other)."""
    table, op = {}, None
    for line in open(path):
        m = re.match(r"# (\w+)$", line.strip())
        if m:
            op = m.group(1)
            table.setdefault(op, {})
            continue
        cols = line.split()
        if op and len(cols) >= 5 and cols[0].isdigit():
            table[op][int(cols[0])] = (float(cols[2]), float(cols[4]))
    return table


class BusBandwidth:
    """The bus bandwidth (bytes/s) of an op at any size, from a parse()d table: log-interpolated
    between the nearest measured sizes, held at the ends."""

    def __init__(self, table):
        self.table = {op: sorted((size, busbw * 1e9) for size, (_, busbw) in sizes.items()) for op, sizes in table.items()}

    def busbw(self, op, size):
        points = self.table[op]
        if size <= points[0][0]:
            return points[0][1]
        for (s0, b0), (s1, b1) in zip(points, points[1:]):
            if size <= s1:
                f = math.log(size / s0) / math.log(s1 / s0)
                return math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0)))
        return points[-1][1]


def main():
    out, counts = sys.argv[1], sys.argv[2:]
    print(open(f"{out}/memcpy.txt").read().strip())
    for n in counts:
        shm, gloo, mpi = (parse(f"{out}/{name}-{n}.txt") for name in ("dtrain-auto", "dtrain-gloo", "openmpi"))
        print(f"\n{n} ranks, bus bandwidth in GB/s")
        print("| op | size | dtrain shm | dtrain Gloo | OpenMPI | shm / OpenMPI | shm / Gloo |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for op in shm:
            for size in sorted(shm[op]):
                if size < 65536 or size not in mpi.get(op, {}) or size not in gloo.get(op, {}):
                    continue
                s, g, m = shm[op][size][1], gloo[op][size][1], mpi[op][size][1]
                label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
                print(f"| {op} | {label} | {s:.2f} | {g:.2f} | {m:.2f} | {s / m:.2f}x | {s / g:.1f}x |")
        lat = {name: t["all_reduce"].get(4096, (float("nan"),))[0] for name, t in (("shm", shm), ("gloo", gloo), ("mpi", mpi))}
        print(f"\n4 KiB all-reduce, {n} ranks: dtrain shm {lat['shm']:.1f} us, dtrain Gloo {lat['gloo']:.1f} us, "
              f"OpenMPI {lat['mpi']:.1f} us")


if __name__ == "__main__":
    main()
