// Fresh per-test directories under the system temp dir, unique per test process, removed when
// every test of the process passed (kept after a failure, to be looked at).
#pragma once
#include <string>

namespace dtrain::test {

// Creates (after removing any leftover) <tmp>/dtrain_test_<pid>/<name> and returns its path.
std::string scratch_dir(const std::string& name);

}  // namespace dtrain::test
