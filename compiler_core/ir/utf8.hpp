// Names and strings in a graph are UTF-8: they are printed, written to ONNX (whose strings are
// UTF-8) and handed to Python as str. Bytes that are not (a hostile graph file, a protobuf
// string field holding raw bytes) are refused where they enter the graph.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/error.hpp"

namespace esg::ir {

// The offset of the first byte that breaks UTF-8 (an overlong form, a surrogate, a code point
// beyond U+10FFFF, a cut sequence), or npos when `s` is valid.
inline size_t utf8_error_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return i;
    if (i + static_cast<size_t>(len) > s.size()) return i;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return i;
    i += static_cast<size_t>(len);
  }
  return std::string_view::npos;
}

inline void check_utf8(std::string_view s, const char* what) {
  const size_t at = utf8_error_at(s);
  if (at != std::string_view::npos)
    throw Error(ErrorCode::InvalidArgument, std::string(what) + " is not UTF-8 (byte " + std::to_string(at) + " of " +
                                                std::to_string(s.size()) + ")");
}

}  // namespace esg::ir
