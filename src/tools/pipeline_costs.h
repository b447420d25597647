// The per-action costs `dtrain pipeline show` times a schedule with: the defaults (F 1, B 2, W 1),
// what a previous run's trace measured, and what --costs says, in that order.
#pragma once
#include <string>
#include <vector>

#include "parallel/pipeline/pipeline_simulator.h"

namespace dtrain {

// `base` with the entries of "F=1,B=2,W=1" (F, B, I, W, comm; I sets B to I + W, and a B given
// without W or I gets W = B/2, the defaults' share) in their place.
// Throws std::invalid_argument naming --costs and the entry at fault.
PipelineCosts parse_costs(const std::string& text, PipelineCosts base);

struct TraceCosts {
  PipelineCosts costs;  // in microseconds
  std::string how;      // where each cost came from, for the printout
  // The same means per chunk (args.chunk), chunk c at index c; empty where the slices carry no chunk
  // numbers, skip one, or leave a chunk without F and B (or I and W).
  std::vector<PipelineCosts> chunks;
};
// The mean duration of the compute slices named F, B, I and W in a Chrome trace ("ph": "X", "cat":
// "compute", "dur" in microseconds), as a dtrain run with train.trace writes it, over all chunks and
// per chunk. B is the mean B, or without B the mean I + the mean W; W the mean W, or without it half
// of B (the default costs' share). Throws std::invalid_argument naming --trace and the file.
TraceCosts trace_costs(const std::string& path);

}  // namespace dtrain
