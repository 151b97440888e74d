// Where the checkout is, for tests that read its files (docs, protos, scripts).
#pragma once

#include <string>
#include <string_view>

namespace tensord::testing {

// `relative` (e.g. "docs/errors.md") under the source tree this test binary was built from.
std::string SourcePath(std::string_view relative);

}  // namespace tensord::testing
