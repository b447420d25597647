"""What cuBLAS takes from PyTorch's CUDA caching allocator for its workspaces: the MiB allocated after
each first use of a GEMM path (cuBLAS, cuBLASLt with a bias or a GELU epilogue, a second thread, an
autograd backward). PyTorch keeps a cuBLAS handle, with its workspace, per thread, and a thread that
ends hands its handle back for the next one: here autograd's device thread reuses the second
thread's. In a training run the rank's thread and autograd's both live, so there are two (small
models measured 72-93 MiB above their estimate without them on an H200), and dtrain's memory
estimate counts two on a GPU (src/tools/estimate/memory_estimate.cpp).
Usage: python3 bench/cublas_workspace.py (on a machine with a CUDA GPU). Prints one line per path."""
import threading

import torch


def mib():
    return torch.cuda.memory_allocated() / 2**20


def main():
    a = torch.randn(1024, 1024, device="cuda")
    b = torch.randn(1024, 1024, device="cuda")
    bias = torch.randn(1024, device="cuda")
    paths = [("fp32 mm on the main thread", lambda: torch.mm(a, b)),
             ("bf16 mm", lambda: torch.mm(a.bfloat16(), b.bfloat16())),
             ("addmm with bias (cuBLASLt)", lambda: torch.addmm(bias, a, b)),
             ("addmm + GELU epilogue", lambda: torch._addmm_activation(bias, a, b, use_gelu=True))]
    for name, run in paths:
        base = mib()
        run()
        torch.cuda.synchronize()
        print(f"{name}: +{mib() - base:.2f} MiB")
    base = mib()
    thread = threading.Thread(target=lambda: (torch.mm(a, b), torch.cuda.synchronize()))
    thread.start()
    thread.join()
    print(f"fp32 mm on a second thread: +{mib() - base:.2f} MiB")
    x = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    base = mib()
    torch.mm(x, b).sum().backward()
    torch.cuda.synchronize()
    print(f"mm backward (autograd's device thread), less x.grad: +{mib() - base - x.grad.numel() * 4 / 2**20:.2f} MiB")
    print(f"total allocated {mib():.2f} MiB")


if __name__ == "__main__":
    main()
