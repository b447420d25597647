/* The OpenMPI peer of `dtrain bench-comm`: the same collectives over the same size sweep, printed in
 * the same nccl-tests-style table (size, count, time, algbw, busbw, wrong), so the two can be read
 * side by side. Built and run by bench/comm.sh. float32, sum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double bus_factor(const char* op, int n) {
  if (!strcmp(op, "all_reduce")) return 2.0 * (n - 1) / n;
  if (!strcmp(op, "broadcast")) return 1.0;
  return (double)(n - 1) / n; /* all_gather, reduce_scatter */
}

/* Sizes follow nccl-tests: `count` is the full vector (the gathered output of all_gather, the input of
 * reduce_scatter); each rank contributes or keeps count/n of it there. */
static void fill(const char* op, float* in, float* out, long count, int rank) {
  for (long i = 0; i < count; ++i) in[i] = (float)(rank + 1);
  for (long i = 0; i < count; ++i) out[i] = !strcmp(op, "broadcast") && rank == 0 ? 7.0f : 0.0f;
}

static void collective(const char* op, float* in, float* out, long count, int n) {
  int chunk = (int)(count / n);
  if (!strcmp(op, "all_reduce")) MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else if (!strcmp(op, "all_gather")) MPI_Allgather(in, chunk, MPI_FLOAT, out, chunk, MPI_FLOAT, MPI_COMM_WORLD);
  else if (!strcmp(op, "reduce_scatter")) MPI_Reduce_scatter_block(in, out, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  else MPI_Bcast(out, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

/* Elements that differ from the closed form of the result. */
static long wrong(const char* op, const float* out, long count, int n) {
  long bad = 0, chunk = count / n;
  float sum = (float)(n * (n + 1) / 2);
  if (!strcmp(op, "all_reduce")) for (long i = 0; i < count; ++i) bad += out[i] != sum;
  else if (!strcmp(op, "all_gather")) for (long i = 0; i < count; ++i) bad += out[i] != (float)(i / chunk + 1);
  else if (!strcmp(op, "reduce_scatter")) for (long i = 0; i < chunk; ++i) bad += out[i] != sum;
  else for (long i = 0; i < count; ++i) bad += out[i] != 7.0f;
  return bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long min_bytes = argc > 1 ? atol(argv[1]) : 1024, max_bytes = argc > 2 ? atol(argv[2]) : 64L << 20;
  int iters = argc > 3 ? atoi(argv[3]) : 20, warmup = 3;
  const char* ops[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
  float* in = malloc(max_bytes);
  float* out = malloc(max_bytes);
  if (rank == 0) printf("# OpenMPI, %d ranks, float32 sum\n", n);
  for (int o = 0; o < 4; ++o) {
    if (rank == 0)
      printf("# %s\n%12s %12s %10s %10s %10s %8s\n", ops[o], "size(B)", "count", "time(us)", "algbw(GB/s)",
             "busbw(GB/s)", "wrong");
    for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      long count = bytes / 4 / n * n;
      long bad = 0;
      double total = 0;
      for (int i = 0; i < warmup + iters; ++i) {
        fill(ops[o], in, out, count, rank);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        collective(ops[o], in, out, count, n);
        if (i >= warmup) total += MPI_Wtime() - t0;
        bad += wrong(ops[o], out, count, n);
      }
      double t = total / iters, slowest;
      long all_wrong;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(&bad, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      double algbw = count * 4.0 / slowest / 1e9;
      if (rank == 0)
        printf("%12ld %12ld %10.1f %10.3f %10.3f %8ld\n", count * 4, count, slowest * 1e6, algbw,
               algbw * bus_factor(ops[o], n), all_wrong);
    }
  }
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
