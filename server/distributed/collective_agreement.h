// Before any data of a collective moves, every rank of the group states what it is about to
// run (op, attributes, dtype, shape) or why it refuses (an autodiff tensor whose context is not
// enabled, a device the group cannot use, ...). Every rank receives every statement and derives
// the same decision from them: run, or fail the same way everywhere. That is what makes a
// refusal on one rank a typed error on all of them, leaves the group in step for the next
// collective, and turns mismatched calls into COLLECTIVE_MISMATCH instead of corrupted data.
// Device-neutral: any communication library sends the encoded statements.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/dtype.h"
#include "server/core/shape.h"
#include "server/core/status.h"

namespace tensord::distributed {

// Every statement travels in this many bytes, so a receiver posts its buffers in advance.
inline constexpr size_t kStatementBytes = 2048;

struct CollectiveStatement {
  std::string op;
  std::string attrs;  // the attributes every rank must agree on, canonical ("op=sum")
  std::string device;
  // What moves the data on this rank: "gloo" (host memory) or the device's library ("nccl");
  // every rank must say the same.
  std::string library;
  // Whether this rank needs a new communicator of its device's library for the call (it has
  // none for its device yet): every rank then makes one.
  bool new_communicator = false;
  DType dtype = DType::kF32;
  Shape shape;
  // Why this rank refuses the call (kUnspecified: it does not), with its message and metadata
  // (the metadata's keys and values are shortened to fit).
  Reason refusal = Reason::kUnspecified;
  std::string message;
  Metadata metadata;
};

// The statement of a rank that refuses with `status` (not OK).
CollectiveStatement Refusal(const std::string& op, const std::string& device,
                            const absl::Status& status);

// A fixed-size encoding; long strings are cut to fit. Decode refuses anything Encode did not
// produce (INTERNAL: the peer speaks another version).
std::string Encode(const CollectiveStatement& statement);
absl::StatusOr<CollectiveStatement> Decode(absl::string_view bytes);

// The decision of `rank` over every rank's statement (indexed by rank). OK: run. Otherwise the
// error this rank reports: the refusal of the lowest refusing rank, with its reason (so
// AUTODIFF_CONTEXT_NOT_ENABLED on one rank is AUTODIFF_CONTEXT_NOT_ENABLED on all) and metadata
// naming that rank, or COLLECTIVE_MISMATCH naming the first rank whose call (or library: a
// rank moving host memory while another moves its device's) differs from rank 0's. A rank that
// refused itself reports its own error, not this one.
absl::Status Agree(int rank, const std::string& group,
                   const std::vector<CollectiveStatement>& statements);

}  // namespace tensord::distributed
