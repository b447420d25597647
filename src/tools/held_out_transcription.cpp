#include "tools/held_out_transcription.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "common/printable.h"
#include "data/vlm_dataset.h"

namespace dtrain {

namespace {

// UTF-8 decoded loosely: a sequence that is not well formed gives its first byte as one unit.
std::vector<uint32_t> units_of(const std::string& text) {
  std::vector<uint32_t> units;
  for (size_t i = 0; i < text.size();) {
    const auto b = uint8_t(text[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool whole = len > 0 && i + len <= text.size();
    for (size_t k = 1; whole && k < len; ++k) whole = (uint8_t(text[i + k]) & 0xC0) == 0x80;
    if (!whole) {
      units.push_back(0x110000u + b);  // outside Unicode: never equal to a decoded code point
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (uint8_t(text[i + k]) & 0x3F);
    units.push_back(cp);
    i += len;
  }
  return units;
}

std::string accuracy_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * fraction);
  return buf;
}

}  // namespace

int64_t code_points(const std::string& text) { return int64_t(units_of(text).size()); }

int64_t edit_distance(const std::string& truth, const std::string& got) {
  const std::vector<uint32_t> a = units_of(truth), b = units_of(got);
  std::vector<int64_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = int64_t(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int64_t diagonal = row[0];
    row[0] = int64_t(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int64_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

TranscriptionScore transcribe_held_out(ImageTranscriber& transcriber, Tokenizer* tokenizer, int64_t count,
                                       const SamplingOptions& options, std::ostream& out) {
  const std::unique_ptr<VlmDataset> data = load_vlm_dataset(transcriber.data_source(), transcriber.data_options(), tokenizer);
  const int64_t held_out = data->size(Split::Validation);
  if (held_out == 0)
    throw std::runtime_error("data.source \"" + printable(transcriber.data_source()) + "\" holds no held-out sample (data.val_fraction is 0)");
  const int64_t n = std::min(count, held_out);
  out << "held-out samples of " << data->description() << "\n";
  TranscriptionScore total;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t index = k * held_out / n;  // spread over the split, the same ones every time
    const VlmSample& sample = data->sample(Split::Validation, index);
    ImageBatch image;
    if (sample.image != ImageOrigin::None)
      image = ImageBatch{data->patches(Split::Validation, index), at::tensor({sample.grid.height, sample.grid.width}, at::kLong).view({1, 2})};
    const std::vector<int32_t> prompt(sample.tokens.begin(), sample.tokens.begin() + ptrdiff_t(sample.prompt_tokens));
    const std::string got = transcriber.transcribe(image, prompt, options);
    const int64_t errors = edit_distance(sample.text, got), characters = code_points(sample.text);
    total.samples++;
    total.characters += characters;
    total.errors += errors;
    out << "  truth: " << printable(sample.text, 1000) << "\n  model: " << printable(got, 1000) << "\n         "
        << accuracy_percent(characters > 0 ? 1.0 - double(errors) / double(characters) : 0.0) << " (" << errors << " edits)\n";
  }
  out << "character accuracy: " << accuracy_percent(total.accuracy()) << " over " << total.samples << " held-out samples (" << total.errors
      << " edits in " << total.characters << " characters)\n";
  return total;
}

}  // namespace dtrain
