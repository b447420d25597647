// The pipeline schedules dtrain runs, by the names parallel.pipeline.schedule takes.
#pragma once
#include <array>
#include <optional>
#include <string>

namespace dtrain {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZeroBubble };

inline constexpr std::array<std::pair<ScheduleKind, const char*>, 4> kScheduleNames{{
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved1F1B, "interleaved_1f1b"},
    {ScheduleKind::ZeroBubble, "zero_bubble"},
}};

inline std::string schedule_name(ScheduleKind kind) {
  for (const auto& [k, name] : kScheduleNames)
    if (k == kind) return name;
  return "?";
}

// nullopt for a name that is none of kScheduleNames'.
inline std::optional<ScheduleKind> schedule_kind(const std::string& name) {
  for (const auto& [k, n] : kScheduleNames)
    if (name == n) return k;
  return std::nullopt;
}

// "gpipe, 1f1b, interleaved_1f1b, zero_bubble": for errors.
inline std::string schedule_names() {
  std::string out;
  for (const auto& [k, n] : kScheduleNames) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace dtrain
