#include "server/service/server_log.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tensord {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one.
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t n = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 0;
  if (lead >= 0xF5 || n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  // Overlong three- and four-byte forms, surrogates and code points above U+10FFFF.
  if (n == 3 && lead == 0xE0 && byte(i + 1) < 0xA0) return 0;
  if (n == 3 && lead == 0xED && byte(i + 1) >= 0xA0) return 0;
  if (n == 4 && lead == 0xF0 && byte(i + 1) < 0x90) return 0;
  if (n == 4 && lead == 0xF4 && byte(i + 1) >= 0x90) return 0;
  return n;
}

// The bytes a JSON string holds as they are: printable ASCII but the quote and the backslash.
constexpr std::array<bool, 256> kPlainJson = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x7F; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

// A JSON string body: a request's bytes may be anything, the line must stay valid JSON, so
// control characters are escaped and bytes that are not UTF-8 become U+FFFD.
void AppendJsonString(std::string& out, absl::string_view text) {
  out += '"';
  for (size_t i = 0; i < text.size();) {
    // Printable ASCII other than the quote and the backslash goes in as it is, a run at once.
    size_t plain = i;
    while (plain < text.size() && kPlainJson[static_cast<unsigned char>(text[plain])]) ++plain;
    out.append(text.data() + i, plain - i);
    i = plain;
    if (i == text.size()) break;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c == '\n') {
        out += "\\n";
      } else {
        absl::StrAppendFormat(&out, "\\u%04x", c);
      }
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  out += '"';
}

// Plain text: bare when the value is one printable word, JSON-quoted otherwise, so a line
// still splits on spaces into key=value pairs.
void AppendTextValue(std::string& out, absl::string_view text) {
  bool bare = !text.empty();
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F || c == '"' || c == '=') bare = false;
  }
  if (bare) {
    out.append(text.data(), text.size());
  } else {
    AppendJsonString(out, text);
  }
}

// As printf's "%.6g" (absl's six-digit formatting, without printf's parsing); null when not
// finite (JSON has no NaN or infinity).
void AppendNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
  } else {
    absl::StrAppend(&out, v);
  }
}

// `now` as "2026-12-02T05:16:13.123Z", in a buffer of the calling thread: the part to the
// second is formatted once per second, the milliseconds written into it.
absl::string_view ThreadTimestamp(absl::Time now) {
  thread_local int64_t stamped = std::numeric_limits<int64_t>::min();
  thread_local std::string text;
  const int64_t ms = absl::ToUnixMillis(now);  // rounded down, as %E3S truncates
  const int64_t second = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  if (second != stamped) {
    text = absl::FormatTime("%Y-%m-%dT%H:%M:%S.000Z", absl::FromUnixSeconds(second),
                            absl::UTCTimeZone());
    stamped = second;
  }
  const int64_t milli = ms - second * 1000;
  char* digits = text.data() + text.size() - 4;  // the three after the point
  digits[0] = static_cast<char>('0' + milli / 100);
  digits[1] = static_cast<char>('0' + milli / 10 % 10);
  digits[2] = static_cast<char>('0' + milli % 10);
  return text;
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  if (lower == "off" || lower == "none") return LogLevel::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("log level must be one of debug, info, warning, error, off; got '", name, "'"));
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "json") return LogFormat::kJson;
  if (lower == "text") return LogFormat::kText;
  return absl::InvalidArgumentError(
      absl::StrCat("log format must be json or text; got '", name, "'"));
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      break;
  }
  return "off";
}

ServerLog::ServerLog(LogLevel level, LogFormat format, std::FILE* out)
    : out_(out), level_(level), format_(format) {}

void ServerLog::Configure(LogLevel level, LogFormat format) {
  level_.store(level);
  format_.store(format);
}

bool ServerLog::Enabled(LogLevel level) const {
  return level != LogLevel::kOff && level >= level_.load(std::memory_order_relaxed);
}

std::string ServerLog::Render(LogFormat format, absl::string_view timestamp, LogLevel level,
                              absl::string_view event, std::initializer_list<LogField> fields) {
  std::string line;
  RenderInto(line, format, timestamp, level, event, fields);
  return line;
}

void ServerLog::RenderInto(std::string& line, LogFormat format, absl::string_view timestamp,
                           LogLevel level, absl::string_view event,
                           std::initializer_list<LogField> fields) {
  line.clear();
  line.reserve(256);
  const bool json = format == LogFormat::kJson;
  if (json) {
    line += "{\"ts\":";
    AppendJsonString(line, timestamp);
    line += ",\"level\":";
    AppendJsonString(line, LogLevelName(level));
    line += ",\"event\":";
    AppendJsonString(line, event);
  } else {
    absl::StrAppend(&line, timestamp, " ", LogLevelName(level), " ", event);
  }
  for (const LogField& f : fields) {
    const auto* s = std::get_if<absl::string_view>(&f.value);
    if (s != nullptr && s->empty()) continue;
    if (json) {
      // Keys are the code's own identifiers (LogField), never a request's bytes: no escaping.
      line += ",\"";
      line.append(f.key.data(), f.key.size());
      line += "\":";
    } else {
      absl::StrAppend(&line, " ", f.key, "=");
    }
    if (s != nullptr) {
      json ? AppendJsonString(line, *s) : AppendTextValue(line, *s);
    } else if (const auto* i = std::get_if<int64_t>(&f.value)) {
      absl::StrAppend(&line, *i);
    } else if (const auto* d = std::get_if<double>(&f.value)) {
      AppendNumber(line, *d);
    } else {
      line += std::get<bool>(f.value) ? "true" : "false";
    }
  }
  if (json) line += '}';
  line += '\n';
}

void ServerLog::Write(LogLevel level, absl::string_view event,
                      std::initializer_list<LogField> fields) {
  if (!Enabled(level)) return;
  const LogFormat format = format_.load(std::memory_order_relaxed);
  thread_local std::string line;  // a thread's buffer, reused from line to line
  RenderInto(line, format, ThreadTimestamp(absl::Now()), level, event, fields);
  std::FILE* out = out_.load();
  if (out == nullptr) out = stderr;
  // One fwrite per line under the stream's own lock: lines of concurrent calls never mix.
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

ServerLog& DefaultLog() {
  static ServerLog* log = new ServerLog();  // never destroyed: calls may log during exit
  return *log;
}

}  // namespace tensord
