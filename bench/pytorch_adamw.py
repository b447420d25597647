"""torch.optim.AdamW over the parameters bench/optimizer_step.cpp wrote (--shapes): the median time
of one step, per implementation (per-tensor: foreach=False; foreach; fused), weight decay on the
same tensors as dtrain's (two parameter groups). Prints one line per implementation."""
import json
import statistics
import sys
import time

import torch


def main() -> None:
    shapes_path, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if threads > 0:
        torch.set_num_threads(threads)
    entries = json.load(open(shapes_path))
    torch.manual_seed(1)
    params = [torch.randn(e["shape"], requires_grad=True) for e in entries]
    for p in params:
        p.grad = torch.randn_like(p)
    decay = [p for p, e in zip(params, entries) if e["decay"]]
    no_decay = [p for p, e in zip(params, entries) if not e["decay"]]
    for name, kwargs in (("per-tensor", {"foreach": False}), ("foreach", {"foreach": True}), ("fused", {"fused": True})):
        # Fresh groups for each: an optimizer writes its defaults (foreach, fused) into the group
        # dicts it is given, which would then override the next one's arguments.
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=1e-3, **kwargs)
        times = []
        for i in range(steps + 2):
            t0 = time.perf_counter()
            opt.step()
            if i >= 2:
                times.append((time.perf_counter() - t0) * 1e3)
        print(f"{name}: median AdamW step {statistics.median(times):.1f} ms ({torch.get_num_threads()} thread(s))")
        del opt


if __name__ == "__main__":
    main()
