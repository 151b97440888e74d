// Authentication of Tensord calls: a table of bearer tokens, each naming the tenant it
// authenticates, and the one function that turns a call (its metadata and, with
// --tenant-from-cert, its client certificate) into a tenant or an UNAUTHENTICATED or
// PERMISSION_DENIED error. Transport security (TLS, mTLS) is gRPC's and lives in server.cc;
// replacing the table while serving is TokenStore's (token_store.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/service/cert_tenant.h"

namespace grpc {
class ServerContext;
}  // namespace grpc

namespace tensord {

// The tenant of every caller of a server with neither --auth-tokens nor --tenant-from-cert.
inline constexpr char kAnonymousTenant[] = "anonymous";

// Tenant names of tokens and certificates alike: [A-Za-z0-9._-]+.
bool ValidTenantName(absl::string_view tenant);

// Tokens shorter than this are refused at start-up: a short token can be guessed.
inline constexpr size_t kMinTokenLength = 16;

class TokenTable {
 public:
  // The --auth-tokens file format: one "TOKEN TENANT" pair per line, separated by spaces or
  // tabs; blank lines and lines whose first non-blank character is '#' are ignored. Tokens are
  // printable ASCII without spaces, at least kMinTokenLength characters, unique; tenant names
  // are [A-Za-z0-9._-]+. Several tokens may name one tenant (rotation: add the new token,
  // move clients over, remove the old one; the server reloads the file without a restart, see
  // TokenStore). INVALID_ARGUMENT names the line (never the token) when the text breaks a rule
  // or holds no token at all.
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

// The tenant of a call. With `cert_field` kNone: kAnonymousTenant when `tokens` is null (a
// server without tokens), otherwise the tenant of the call's "authorization: Bearer <token>"
// metadata, or UNAUTHENTICATED (metadata cause = missing | malformed | unknown). With a
// certificate field: the tenant the client certificate names (CertTenant's errors), and with
// tokens as well the token's tenant must be the same one, or PERMISSION_DENIED (metadata
// token_tenant, cert_tenant, cert_field). No message holds the token.
absl::StatusOr<std::string> Authenticate(const TokenTable* tokens, CertTenantField cert_field,
                                         const grpc::ServerContext& context);

// Authenticate's agreement rule, testable without a call: the tenant when both name the same.
absl::StatusOr<std::string> AgreeingTenant(const std::string& token_tenant,
                                           const std::string& cert_tenant,
                                           CertTenantField cert_field);

// The same for a raw header value (null when the call carried none); Authenticate's core,
// testable without a call.
absl::StatusOr<std::string> AuthenticateHeader(const TokenTable& tokens,
                                               const std::string* authorization);

}  // namespace tensord
