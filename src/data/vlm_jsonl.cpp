#include "data/vlm_jsonl.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>

#include "common/printable.h"
#include "common/regular_file.h"

namespace dtrain {

namespace {

using nlohmann::json;

// nlohmann's message without its prefix ("[json.exception.parse_error.101] parse error at line 1,
// column 5: "), whose line is always 1 here and would read as the file's.
std::string parse_problem(const json::parse_error& e) {
  const std::string what = e.what();
  const size_t column = what.find("column ");
  const size_t colon = what.find(": ", column == std::string::npos ? 0 : column);
  return (colon == std::string::npos ? what : what.substr(colon + 2)) + " (at byte " + std::to_string(e.byte) + ")";
}

// "a number", "an array", "null": what a JSON value is, for messages.
std::string kind_of(const json& value) {
  const std::string kind = value.type_name();
  if (value.is_null()) return kind;
  return (kind[0] == 'a' || kind[0] == 'o' ? "an " : "a ") + kind;
}

// The string at `key`, or `fallback` when the key is absent; throws when it is not a string.
std::string string_at(const json& object, const char* key, const std::string& fallback) {
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (!it->is_string()) throw std::runtime_error(std::string("\"") + key + "\" is " + kind_of(*it) + ", not a string");
  return it->get<std::string>();
}

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

VlmSample parse_sample(const std::string& line, const std::filesystem::path& folder, const VlmDataOptions& options,
                       Tokenizer* tokenizer) {
  json object;
  try {
    object = json::parse(line);
  } catch (const json::parse_error& e) {
    throw std::runtime_error("is not JSON: " + parse_problem(e));
  }
  if (!object.is_object())
    throw std::runtime_error("is " + kind_of(object) + ", not an object {\"image\", \"prompt\", \"text\"}");
  if (!object.contains("text")) throw std::runtime_error("has no \"text\" (the text the model must produce)");
  VlmSample sample;
  sample.text = string_at(object, "text", "");
  const std::string prompt = string_at(object, "prompt", "");
  ImageSize size;
  if (object.contains("image")) {
    const std::string image = string_at(object, "image", "");
    if (image.empty()) throw std::runtime_error("\"image\" is empty; leave the key out for a sample without an image");
    sample.image = ImageOrigin::File;
    sample.image_path = (folder / image).string();
    const Image decoded = load_image_file(sample.image_path, options.max_image_pixels);
    size = {decoded.width, decoded.height};
  }
  place_sample(sample, size, prompt, options, tokenizer);
  return sample;
}

}  // namespace

SampleSet read_vlm_jsonl(const std::string& path, const VlmDataOptions& options, Tokenizer* tokenizer) {
  const std::string file = printable(path);
  FileContents contents = read_regular_file(path);
  if (!contents.problem.empty()) throw std::runtime_error("data.source: vlm file '" + file + "' " + contents.problem);
  // Image paths are relative to the jsonl's folder; `folder / absolute` is the absolute path.
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  SampleSet set;
  int64_t images = 0, line_number = 0;
  size_t start = 0;
  while (start < contents.bytes.size()) {
    size_t end = contents.bytes.find('\n', start);
    if (end == std::string::npos) end = contents.bytes.size();
    const std::string line = contents.bytes.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (is_blank(line)) continue;
    const std::string origin = file + " line " + std::to_string(line_number);
    try {
      set.samples.push_back(parse_sample(line, folder, options, tokenizer));
      set.samples.back().origin = origin;
      images += set.samples.back().image == ImageOrigin::None ? 0 : 1;
    } catch (const std::runtime_error& e) {
      const std::string problem = origin + ": " + e.what();
      if (!options.skip_bad_samples)
        throw std::runtime_error("data.source: " + problem + " (data.skip_bad_samples: true skips such samples)");
      if (set.skipped++ == 0) set.first_skipped = problem;
    }
  }
  set.description = "vlm file " + file + " (" + std::to_string(set.samples.size()) + " samples, " + std::to_string(images) +
                    " with an image)";
  return set;
}

}  // namespace dtrain
