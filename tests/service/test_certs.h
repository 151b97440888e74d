// Throw-away certificates for the TLS tests (scripts/make-test-certs.sh: a CA, a server
// certificate for localhost and 127.0.0.1, a client certificate, a rogue CA and client).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/source_path.h"

namespace tensord::service_test {

// Makes the certificates in a new directory of this process's own (ctest runs each test as its
// own process, several at once) and returns it; empty when that failed.
inline std::string MakeTestCerts(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name + ".XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return "";
  const std::string command = absl::StrCat(
      "sh ", tensord::testing::SourcePath("scripts/make-test-certs.sh"), " ", dir, " >/dev/null");
  return std::system(command.c_str()) == 0 ? dir : "";
}

inline void RemoveTestCerts(const std::string& dir) {
  std::error_code ignored;  // a leftover temporary directory is not a test failure
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace tensord::service_test
