#include "data/text_line_renderer.h"

#include <ft2build.h>
#include FT_FREETYPE_H

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "common/hash64.h"
#include "common/printable.h"
#include "common/regular_file.h"

namespace dtrain {

namespace {

constexpr int kMinFontPx = 16, kMaxFontPx = 24;

// Draws from one seed's stream, each in [lo, hi].
class SeededDraws {
 public:
  explicit SeededDraws(uint64_t seed) : state_(seed) {}
  int in(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }
  uint64_t next() { return state_ = splitmix64(state_); }

 private:
  uint64_t state_;
};

struct FreeTypeLibrary {
  FT_Library library = nullptr;
  FT_Face face = nullptr;
  ~FreeTypeLibrary() {
    if (face) FT_Done_Face(face);
    if (library) FT_Done_FreeType(library);
  }
};

}  // namespace

LineStyle line_style(uint64_t seed) {
  SeededDraws draw(seed);
  LineStyle style;
  style.font_px = draw.in(kMinFontPx, kMaxFontPx);
  style.margin_left = draw.in(2, 16);
  style.margin_right = draw.in(2, 16);
  style.margin_top = draw.in(1, 6);
  style.margin_bottom = draw.in(1, 6);
  style.ink = draw.in(0, 70);
  style.paper = draw.in(185, 255);
  style.noise = draw.in(0, 12);
  return style;
}

TextLineRenderer::TextLineRenderer(const std::string& font_path) {
  const std::string font = "font '" + printable(font_path) + "'";
  const std::string install = font_path == kDejaVuSansPath ? " (Debian's fonts-dejavu-core holds it; scripts/setup.sh installs it)" : "";
  if (const std::string problem = regular_file_problem(font_path); !problem.empty())
    throw std::runtime_error(font + " " + problem + install);
  FreeTypeLibrary ft;
  if (FT_Init_FreeType(&ft.library) != 0) throw std::runtime_error("FreeType cannot start, so " + font + " cannot be rendered");
  if (const FT_Error e = FT_New_Face(ft.library, font_path.c_str(), 0, &ft.face); e != 0)
    throw std::runtime_error(font + " cannot be read by FreeType (error " + std::to_string(e) + ")" + install);
  for (int px = kMinFontPx; px <= kMaxFontPx; ++px) {
    if (FT_Set_Pixel_Sizes(ft.face, 0, FT_UInt(px)) != 0)
      throw std::runtime_error(font + " has no " + std::to_string(px) + " px size");
    SizedFace sized;
    sized.ascent = int((ft.face->size->metrics.ascender + 63) >> 6);
    sized.descent = int((-ft.face->size->metrics.descender + 63) >> 6);
    for (int i = 0; i < kChars; ++i) {
      if (FT_Load_Char(ft.face, FT_ULong(kFirstChar + i), FT_LOAD_RENDER) != 0)
        throw std::runtime_error(font + " cannot render '" + char(kFirstChar + i) + "'");
      const FT_GlyphSlot slot = ft.face->glyph;
      Glyph& g = sized.glyphs[size_t(i)];
      g.left = slot->bitmap_left;
      g.top = slot->bitmap_top;
      g.width = int(slot->bitmap.width);
      g.rows = int(slot->bitmap.rows);
      g.advance = int((slot->advance.x + 32) >> 6);
      g.coverage.resize(size_t(g.width) * size_t(g.rows));
      for (int r = 0; r < g.rows; ++r)
        std::copy_n(slot->bitmap.buffer + ptrdiff_t(r) * slot->bitmap.pitch, g.width, g.coverage.data() + size_t(r) * size_t(g.width));
    }
    faces_.push_back(std::move(sized));
  }
}

const TextLineRenderer::SizedFace& TextLineRenderer::face_for(const LineStyle& style) const {
  return faces_[size_t(style.font_px - kMinFontPx)];
}

const TextLineRenderer::Glyph& TextLineRenderer::glyph(const SizedFace& face, char c) const {
  const int i = static_cast<unsigned char>(c) - kFirstChar;
  if (i < 0 || i >= kChars)
    throw std::invalid_argument("the text line renderer draws printable ASCII only; got byte " +
                                std::to_string(static_cast<unsigned char>(c)));
  return face.glyphs[size_t(i)];
}

ImageSize TextLineRenderer::size_of(std::string_view text, const LineStyle& style) const {
  const SizedFace& face = face_for(style);
  int advance = 0;
  for (const char c : text) advance += glyph(face, c).advance;
  return {style.margin_left + advance + style.margin_right, style.margin_top + face.ascent + face.descent + style.margin_bottom};
}

ImageSize TextLineRenderer::measure(std::string_view text, uint64_t seed) const { return size_of(text, line_style(seed)); }

Image TextLineRenderer::render(std::string_view text, uint64_t seed) const {
  const LineStyle style = line_style(seed);
  const SizedFace& face = face_for(style);
  const ImageSize size = size_of(text, style);
  // Coverage first, so that overlapping glyphs (a kerned pair's edges) add up instead of overwriting.
  std::vector<int> coverage(size_t(size.pixels()), 0);
  const int baseline = style.margin_top + face.ascent;
  int pen = style.margin_left;
  for (const char c : text) {
    const Glyph& g = glyph(face, c);
    for (int r = 0; r < g.rows; ++r) {
      const int y = baseline - g.top + r;
      if (y < 0 || y >= size.height) continue;
      for (int col = 0; col < g.width; ++col) {
        const int x = pen + g.left + col;
        if (x >= 0 && x < size.width) coverage[size_t(y) * size_t(size.width) + size_t(x)] += g.coverage[size_t(r) * size_t(g.width) + size_t(col)];
      }
    }
    pen += g.advance;
  }
  Image image{size.width, size.height, 1, std::vector<uint8_t>(coverage.size())};
  SeededDraws noise(splitmix64(seed ^ 0x6e6f697365ULL));  // a stream apart from the style's
  for (size_t i = 0; i < coverage.size(); ++i) {
    const int ink = std::min(coverage[i], 255);
    const int grey = style.paper - ink * (style.paper - style.ink) / 255 + (style.noise ? noise.in(-style.noise, style.noise) : 0);
    image.pixels[i] = uint8_t(std::clamp(grey, 0, 255));
  }
  return image;
}

}  // namespace dtrain
