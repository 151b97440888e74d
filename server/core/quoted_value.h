// How an error quotes a value that a request carried (a session id, an op, attribute or device
// name, an attribute value): whole when short, otherwise cut to a prefix that states the full
// length. A status longer than the 8 KiB of metadata gRPC clients accept by default is dropped
// by the client, details and all; so Error and WithMetadata (status.h) shorten every metadata
// value this way, in the metadata and wherever the message quotes it, and the service caps the
// message itself (service/grpc_status.cc).
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace tensord {

inline constexpr size_t kMaxQuotedBytes = 128;

// `value` itself when it has at most kMaxQuotedBytes bytes, otherwise its first bytes (never
// half a UTF-8 character) and its full length, "abcd...(5000 bytes)", in kMaxQuotedBytes.
std::string Shortened(absl::string_view value);

// The longest prefix of `text` of at most `max_bytes` bytes that ends on a UTF-8 character
// boundary.
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

}  // namespace tensord
