#include "tools/plan/plan_hardware.h"

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "common/printable.h"

namespace dtrain {

namespace {

struct GpuPeaks {
  double half, fp32;  // dense FLOP/s: bf16/fp16 tensor cores, plain fp32
  bool has_fp8;
};

const std::map<std::string, GpuPeaks>& gpu_table() {
  static const std::map<std::string, GpuPeaks> table = {
      {"A100", {312e12, 19.5e12, false}}, {"H100", {989e12, 67e12, true}}, {"H200", {989e12, 67e12, true}}, {"B200", {2250e12, 80e12, true}}};
  return table;
}

}  // namespace

std::vector<std::string> gpu_names() {
  std::vector<std::string> names;
  for (const auto& [name, peaks] : gpu_table()) names.push_back(name);
  return names;
}

double gpu_peak_flops(const std::string& gpu, at::ScalarType precision, bool fp8) {
  const auto it = gpu_table().find(gpu);
  if (it == gpu_table().end()) {
    std::string known;
    for (const auto& name : gpu_names()) known += (known.empty() ? "" : ", ") + name;
    throw std::invalid_argument("--gpu-type: '" + printable(gpu) + "' is not in the table (" + known + ")");
  }
  const GpuPeaks& p = it->second;
  if (fp8 && !p.has_fp8) throw std::invalid_argument("--fp8: the " + gpu + " has no fp8 tensor cores");
  if (fp8) return 2 * p.half;
  return precision == at::kFloat ? p.fp32 : p.half;
}

Links default_links(bool gpu) {
  if (gpu) return {{200e9, 10e-6}, {25e9, 20e-6}};
  return {{3e9, 10e-6}, {1.2e9, 50e-6}};
}

Link link_from_bench_comm(const std::string& path, const std::string& flag) {
  const std::string named = flag + " " + printable(path);
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(named + ": cannot be read");
  int ranks = 0;
  std::string op;
  // size (bytes) -> (time in µs, bus bandwidth in GB/s), for the all-reduce rows
  std::map<double, std::pair<double, double>> rows;
  for (std::string line; std::getline(in, line);) {
    const std::string header = "# dtrain bench-comm: ";
    if (line.rfind(header, 0) == 0) {
      ranks = std::atoi(line.c_str() + header.size());
      continue;
    }
    if (line.rfind("# ", 0) == 0) {
      op = line.substr(2);
      continue;
    }
    std::istringstream fields(line);
    double size = 0, count = 0, time_us = 0, algbw = 0, busbw = 0;
    if (op == "all_reduce" && fields >> size >> count >> time_us >> algbw >> busbw && size > 0 && time_us > 0 && busbw > 0)
      rows[size] = {time_us, busbw};
  }
  if (ranks < 2 || rows.empty())
    throw std::invalid_argument(named + ": no all_reduce rows of a `dtrain bench-comm` table over 2 or more ranks");
  const double steps = 2.0 * (ranks - 1);
  return {rows.rbegin()->second.second * 1e9, rows.begin()->second.first * 1e-6 / steps};
}

}  // namespace dtrain
