#include "server/service/auth.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/server_context.h"
#include "server/core/status.h"

namespace tensord {
namespace {

constexpr char kHeader[] = "authorization";
constexpr char kScheme[] = "bearer ";

bool ValidToken(absl::string_view token) {
  for (char c : token) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return false;
  }
  return !token.empty();
}

// Equality whose running time depends on `secret`'s length only: every byte of it is visited
// whatever `guess` holds, so timing does not tell how long a matching prefix was.
bool ConstantTimeEquals(absl::string_view secret, absl::string_view guess) {
  unsigned char diff = secret.size() == guess.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char g = i < guess.size() ? static_cast<unsigned char>(guess[i]) : 0;
    diff |= static_cast<unsigned char>(secret[i]) ^ g;
  }
  return diff == 0;
}

absl::Status Unauthenticated(absl::string_view what, absl::string_view cause) {
  return Error(Reason::kUnauthenticated, absl::StrCat("auth: ", what),
               {{"cause", std::string(cause)}});
}

// The tenant of the call's bearer token.
absl::StatusOr<std::string> TokenTenant(const TokenTable& tokens,
                                        const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto range = metadata.equal_range(kHeader);
  if (range.first == range.second) return AuthenticateHeader(tokens, nullptr);
  if (std::next(range.first) != range.second) {
    // Which of two tokens would count is ambiguous; refuse rather than pick one.
    return Unauthenticated("the call carried more than one authorization metadata entry",
                           "malformed");
  }
  const std::string header(range.first->second.data(), range.first->second.size());
  return AuthenticateHeader(tokens, &header);
}

}  // namespace

bool ValidTenantName(absl::string_view tenant) {
  for (char c : tenant) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return !tenant.empty();
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  std::set<std::string> seen;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    // Messages name the line, never its token: start-up logs are often collected widely.
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth: ", source, " line ", line_number, ": ", what));
    };
    if (fields.size() != 2) {
      return bad(absl::StrCat("expected 'TOKEN TENANT', got ", fields.size(), " fields"));
    }
    if (!ValidToken(fields[0])) return bad("the token holds a non-printable character");
    if (fields[0].size() < kMinTokenLength) {
      return bad(absl::StrCat("the token has ", fields[0].size(), " characters, fewer than ",
                              kMinTokenLength, " (e.g. `openssl rand -hex 32` makes one)"));
    }
    if (!ValidTenantName(fields[1])) {
      return bad(absl::StrCat("tenant '", fields[1], "' is not [A-Za-z0-9._-]+"));
    }
    if (!seen.insert(std::string(fields[0])).second) {
      return bad("the token appears on an earlier line too");
    }
    table.entries_.emplace_back(std::string(fields[0]), std::string(fields[1]));
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth: ", source,
                     " holds no token; every call would be refused (format: 'TOKEN TENANT' "
                     "per line, '#' comments)"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth: the token file ", path, " is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth: cannot read the token file ", path, " (missing or not readable)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

std::string TokenTable::Lookup(absl::string_view token) const {
  std::string tenant;
  // No early exit: the time taken does not depend on which entry (if any) matched.
  for (const auto& [known, owner] : entries_) {
    if (ConstantTimeEquals(known, token)) tenant = owner;
  }
  return tenant;
}

absl::StatusOr<std::string> AuthenticateHeader(const TokenTable& tokens,
                                               const std::string* authorization) {
  if (authorization == nullptr) {
    return Unauthenticated(
        "this server requires a bearer token; the call carried no 'authorization: Bearer "
        "<token>' metadata",
        "missing");
  }
  absl::string_view value = absl::StripAsciiWhitespace(*authorization);
  // The scheme name is case-insensitive (RFC 6750 / RFC 7235).
  if (value.size() <= sizeof(kScheme) - 1 ||
      !absl::StartsWithIgnoreCase(value, absl::string_view(kScheme, sizeof(kScheme) - 1))) {
    return Unauthenticated("the authorization metadata is not of the form 'Bearer <token>'",
                           "malformed");
  }
  value.remove_prefix(sizeof(kScheme) - 1);
  value = absl::StripLeadingAsciiWhitespace(value);
  std::string tenant = tokens.Lookup(value);
  if (tenant.empty()) {
    return Unauthenticated("the bearer token is not one this server accepts", "unknown");
  }
  return tenant;
}

absl::StatusOr<std::string> AgreeingTenant(const std::string& token_tenant,
                                           const std::string& cert_tenant,
                                           CertTenantField cert_field) {
  if (token_tenant == cert_tenant) return token_tenant;
  // Neither credential is trusted over the other: a stolen token must not lend its tenant to
  // another tenant's certificate, nor the reverse.
  return Error(Reason::kPermissionDenied,
               absl::StrCat("auth: the bearer token names tenant '", token_tenant,
                            "' but the client certificate (", CertTenantFieldName(cert_field),
                            ") names tenant '", cert_tenant, "'; both must name the same one"),
               {{"token_tenant", token_tenant},
                {"cert_tenant", cert_tenant},
                {"cert_field", std::string(CertTenantFieldName(cert_field))}});
}

absl::StatusOr<std::string> Authenticate(const TokenTable* tokens, CertTenantField cert_field,
                                         const grpc::ServerContext& context) {
  if (cert_field == CertTenantField::kNone) {
    if (tokens == nullptr) return std::string(kAnonymousTenant);
    return TokenTenant(*tokens, context);
  }
  std::string cert_tenant;
  ASSIGN_OR_RETURN(cert_tenant, CertTenant(cert_field, *context.auth_context()));
  if (tokens == nullptr) return cert_tenant;
  std::string token_tenant;
  ASSIGN_OR_RETURN(token_tenant, TokenTenant(*tokens, context));
  return AgreeingTenant(token_tenant, cert_tenant, cert_field);
}

}  // namespace tensord
