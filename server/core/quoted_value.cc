#include "server/core/quoted_value.h"

#include "absl/strings/str_cat.h"

namespace tensord {

absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back off continuation bytes (10xxxxxx) so the cut falls before a character's first byte.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

std::string Shortened(absl::string_view value) {
  if (value.size() <= kMaxQuotedBytes) return std::string(value);
  // The whole form fits kMaxQuotedBytes, so shortening a shortened value changes nothing.
  const std::string suffix = absl::StrCat("...(", value.size(), " bytes)");
  return absl::StrCat(Utf8Prefix(value, kMaxQuotedBytes - suffix.size()), suffix);
}

}  // namespace tensord
