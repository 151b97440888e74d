// The server's log: one line per event, JSON (for collectors) or plain text (for people), on
// stderr. Events are RPCs (request_log.h writes those), lifecycle (start, session expiry,
// shutdown) and credential reloads. Secrets and tensor values are never passed in; values that
// come from a request are shortened (quoted_value.h) by the caller, as errors do.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };
enum class LogFormat { kJson, kText };

// "debug", "info", "warning", "error", "off"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);
absl::string_view LogLevelName(LogLevel level);

// One field of a line. It refers to its key and text rather than copying them: fields are
// made in the argument list of Write, so what they point to lives until the line is written.
// The key is an identifier of the code ([a-z_]+), written as it is; the value may be anything.
struct LogField {
  LogField(absl::string_view k, absl::string_view v) : key(k), value(v) {}
  LogField(absl::string_view k, const char* v) : key(k), value(absl::string_view(v)) {}
  LogField(absl::string_view k, int64_t v) : key(k), value(v) {}
  LogField(absl::string_view k, int v) : key(k), value(int64_t{v}) {}
  LogField(absl::string_view k, uint64_t v) : key(k), value(static_cast<int64_t>(v)) {}
  LogField(absl::string_view k, double v) : key(k), value(v) {}
  LogField(absl::string_view k, bool v) : key(k), value(v) {}

  absl::string_view key;
  std::variant<absl::string_view, int64_t, double, bool> value;
};

class ServerLog {
 public:
  // Writes to `out` (not owned; stderr when null).
  explicit ServerLog(LogLevel level = LogLevel::kInfo, LogFormat format = LogFormat::kJson,
                     std::FILE* out = nullptr);

  void Configure(LogLevel level, LogFormat format);
  // Where lines go from now on (not owned; stderr when null). Tests read their server's lines.
  void set_output(std::FILE* out) { out_.store(out); }
  bool Enabled(LogLevel level) const;
  // One line: {"ts":"2026-12-02T05:16:13.123Z","level":"info","event":"rpc",...fields} in
  // JSON, `2026-12-02T05:16:13.123Z info rpc key=value ...` in text (values with spaces or
  // quotes are quoted). Empty string fields are left out. Lines are written whole even when
  // several threads log at once.
  void Write(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields);

  // The line Write would print, without the time stamp's variability (for tests).
  static std::string Render(LogFormat format, absl::string_view timestamp, LogLevel level,
                            absl::string_view event, std::initializer_list<LogField> fields);
  // The same into `line` (cleared first), whose buffer a caller can keep between lines.
  static void RenderInto(std::string& line, LogFormat format, absl::string_view timestamp,
                         LogLevel level, absl::string_view event,
                         std::initializer_list<LogField> fields);

 private:
  std::atomic<std::FILE*> out_;
  // Atomics, not a mutex: every RPC asks Enabled, and the settings change only at start-up.
  std::atomic<LogLevel> level_;
  std::atomic<LogFormat> format_;
};

// The process's log on stderr, configured by main.cc (--log-level, --log-format). Library users
// and tests that never configure it get info-level JSON.
ServerLog& DefaultLog();

}  // namespace tensord
