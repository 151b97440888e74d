// Bearer-token authentication of Tensord calls: a table of tokens, each naming the tenant it
// authenticates, and the one function that turns a call's metadata into a tenant or an
// UNAUTHENTICATED error. Transport security (TLS, mTLS) is gRPC's and lives in server.cc.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerContext;
}  // namespace grpc

namespace tensord {

// The tenant of every caller of a server without --auth-tokens.
inline constexpr char kAnonymousTenant[] = "anonymous";

// Tokens shorter than this are refused at start-up: a short token can be guessed.
inline constexpr size_t kMinTokenLength = 16;

class TokenTable {
 public:
  // The --auth-tokens file format: one "TOKEN TENANT" pair per line, separated by spaces or
  // tabs; blank lines and lines whose first non-blank character is '#' are ignored. Tokens are
  // printable ASCII without spaces, at least kMinTokenLength characters, unique; tenant names
  // are [A-Za-z0-9._-]+. Several tokens may name one tenant (rotation: add the new token,
  // move clients over, remove the old one, restart). INVALID_ARGUMENT names the line (never
  // the token) when the text breaks a rule or holds no token at all.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);
  // Reads and parses the file at `path`.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The tenant `token` authenticates, or empty. Compares against every entry in time that
  // depends only on the table, never on how much of a guess matched.
  std::string Lookup(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;  // (token, tenant)
};

// The tenant of a call: kAnonymousTenant when `tokens` is null (a server without tokens),
// otherwise the tenant of the call's "authorization: Bearer <token>" metadata, or
// UNAUTHENTICATED (metadata cause = missing | malformed | unknown) whose message never holds
// the token.
absl::StatusOr<std::string> Authenticate(const TokenTable* tokens,
                                         const grpc::ServerContext& context);

// The same for a raw header value (null when the call carried none); Authenticate's core,
// testable without a call.
absl::StatusOr<std::string> AuthenticateHeader(const TokenTable& tokens,
                                               const std::string* authorization);

}  // namespace tensord
