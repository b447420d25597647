/* The machine's memory-copy bandwidth: the ceiling for any intra-node collective, since each byte
 * a collective moves between processes on one host is at least one copy through shared memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  size_t bytes = (argc > 1 ? atol(argv[1]) : 256) << 20;
  char* a = malloc(bytes);
  char* b = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double best = 1e30;
  for (int i = 0; i < 10; ++i) {
    double t0 = now();
    memcpy(b, a, bytes);
    double t = now() - t0;
    if (t < best) best = t;
  }
  printf("memcpy %zu MiB: %.2f GB/s (best of 10; check byte %d)\n", bytes >> 20, bytes / best / 1e9, b[bytes / 2]);
  free(a);
  free(b);
  return 0;
}
