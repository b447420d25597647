// One line of text drawn as a document scan would show it: FreeType rasterises DejaVu Sans
// (Debian's fonts-dejavu-core) with anti-aliasing onto a grey image. Each line's look comes from a
// seed: font size, margins, ink and paper grey levels, and a little pixel noise, so rendered lines
// differ in width and height as real documents do, and the same (text, seed) always gives the same
// pixels. Printable ASCII only: the OCR set keeps such lines (data/ocr_lines.h).
//
// Every glyph of every size a seed can pick is rasterised once, when the renderer is made; drawing
// then only copies coverage, so render() is cheap, const and safe to call from several threads.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/image_decode.h"

namespace dtrain {

constexpr const char* kDejaVuSansPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

// The look of one line, all in pixels or 8-bit grey levels.
struct LineStyle {
  int font_px = 0;                      // FreeType's pixel size (the em square)
  int margin_left = 0, margin_right = 0;
  int margin_top = 0, margin_bottom = 0;
  int ink = 0, paper = 255;             // the text's grey and the background's: ink < paper
  int noise = 0;                        // each pixel moves by a uniform amount in [-noise, noise]
};

// The style seed picks: font 16-24 px, side margins 2-16 px, top and bottom 1-6 px, ink 0-70,
// paper 185-255, noise 0-12.
LineStyle line_style(uint64_t seed);

class TextLineRenderer {
 public:
  // Throws std::runtime_error naming `font_path` (and the package that holds the default font) when
  // the font is missing or FreeType cannot read it.
  explicit TextLineRenderer(const std::string& font_path = kDejaVuSansPath);

  // A grey image of `text` in line_style(seed). Throws std::invalid_argument when `text` holds a
  // character outside printable ASCII.
  Image render(std::string_view text, uint64_t seed) const;
  // render(text, seed)'s size, without drawing.
  ImageSize measure(std::string_view text, uint64_t seed) const;

 private:
  static constexpr int kFirstChar = 0x20, kChars = 0x7f - 0x20;

  struct Glyph {
    int left = 0, top = 0;      // the bitmap's offset from the pen, top measured up from the baseline
    int width = 0, rows = 0;
    int advance = 0;            // how far the pen moves
    std::vector<uint8_t> coverage;  // rows x width, 0 (none) to 255 (full)
  };
  struct SizedFace {
    int ascent = 0, descent = 0;  // above and below the baseline
    std::array<Glyph, kChars> glyphs;
  };

  const SizedFace& face_for(const LineStyle& style) const;
  const Glyph& glyph(const SizedFace& face, char c) const;
  ImageSize size_of(std::string_view text, const LineStyle& style) const;

  std::vector<SizedFace> faces_;  // one per font size line_style can pick, smallest first
};

}  // namespace dtrain
