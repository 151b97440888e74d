#include "tests/support/source_path.h"

// The source directory is a definition of this one file only: a compile definition that every
// test file saw would make each of them a different compilation per checkout path, and the
// compiler cache could not share them between clones.
namespace tensord::testing {

std::string SourcePath(std::string_view relative) {
  return std::string(TENSORD_SOURCE_DIR) + "/" + std::string(relative);
}

}  // namespace tensord::testing
