"""The GEMM rates behind dtrain's 16-bit path choice (docs/training.md, "Mixed precision"): ATen's
fp32, bf16 and fp16 GEMMs, and bf16/fp16 operands widened to fp32 first, at the benchmark model's
largest layer (tokens of a micro-batch x d_model -> 4 d_model), with THREADS threads. Prints a table
of GFLOP/s, best of 5 windows of 0.3 s each.
Usage: .venv/bin/python bench/gemm_dtypes.py [THREADS]"""
import sys
import time

import torch


def rate(fn, flops):
    fn()
    best = 0.0
    for _ in range(5):
        start, runs = time.perf_counter(), 0
        while time.perf_counter() - start < 0.3:
            fn()
            runs += 1
        best = max(best, flops * runs / (time.perf_counter() - start))
    return best / 1e9


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.set_num_threads(threads)
    m, k, n = 8 * 256, 384, 4 * 384
    x, w = torch.randn(m, k), torch.randn(n, k)
    flops = 2 * m * k * n
    rows = [("fp32", rate(lambda: torch.nn.functional.linear(x, w), flops))]
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        x16, w16 = x.to(dtype), w.to(dtype)
        rows.append((f"{name} native", rate(lambda: torch.nn.functional.linear(x16, w16), flops)))
        rows.append((f"{name} widened to fp32 (dtrain's path here)",
                     rate(lambda: torch.nn.functional.linear(x16.float(), w16.float()).to(dtype), flops)))
    print(f"GEMM {m}x{k} . {k}x{n}, {threads} thread(s), torch {torch.__version__}, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}")
    print("| operands | GFLOP/s | vs fp32 |")
    print("|---|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r:.1f} | {r / rows[0][1]:.2f}x |")


if __name__ == "__main__":
    main()
