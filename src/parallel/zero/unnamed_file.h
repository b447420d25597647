// The files NVMe offload keeps state in: unnamed (O_TMPFILE, or created and unlinked at once where
// the file system lacks it), so the kernel frees them however the process ends, a kill included,
// and nothing is ever left in nvme_path; their blocks reserved at once, so a full disk shows at
// start rather than in the middle of a step.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

// A read-write descriptor of `bytes` zeroed bytes in directory `dir`. Throws std::invalid_argument
// saying what is wrong with `dir` (missing, not a directory, not writable, no room).
int make_unnamed_file(const std::string& dir, int64_t bytes);

// Throws as make_unnamed_file does when `dir` cannot hold such files at all (missing, not a
// directory, not writable), before anything knows how large they will be.
void check_unnamed_file_dir(const std::string& dir);

}  // namespace dtrain
