#include "server/service/cert_tenant.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"
#include "server/core/status.h"
#include "server/service/auth.h"

namespace tensord {
namespace {

constexpr char kTenantSegment[] = "tenant";

absl::Status Unauthenticated(CertTenantField field, absl::string_view what, absl::string_view cause,
                             Metadata extra = {}) {
  extra["cause"] = std::string(cause);
  extra["cert_field"] = std::string(CertTenantFieldName(field));
  return Error(Reason::kUnauthenticated, absl::StrCat("auth: ", what), std::move(extra));
}

std::vector<std::string> Values(const grpc::AuthContext& auth, const char* property) {
  std::vector<std::string> out;
  for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
    out.emplace_back(value.data(), value.size());
  }
  return out;
}

}  // namespace

absl::string_view CertTenantFieldName(CertTenantField field) {
  switch (field) {
    case CertTenantField::kSanUri:
      return "san-uri";
    case CertTenantField::kCn:
      return "cn";
    case CertTenantField::kNone:
      break;
  }
  return "none";
}

bool AbslParseFlag(absl::string_view text, CertTenantField* field, std::string* error) {
  for (CertTenantField f :
       {CertTenantField::kNone, CertTenantField::kSanUri, CertTenantField::kCn}) {
    if (text == CertTenantFieldName(f)) {
      *field = f;
      return true;
    }
  }
  *error = "must be none, san-uri or cn";
  return false;
}

std::string AbslUnparseFlag(CertTenantField field) {
  return std::string(CertTenantFieldName(field));
}

std::string TenantFromUri(absl::string_view uri) {
  const size_t scheme_end = uri.find("://");
  if (scheme_end == absl::string_view::npos || scheme_end == 0) return "";
  // A query or fragment would make "the last segment" depend on how the URI is parsed.
  if (uri.find_first_of("?#") != absl::string_view::npos) return "";
  std::vector<absl::string_view> segments = absl::StrSplit(uri.substr(scheme_end + 3), '/');
  if (segments.size() < 2) return "";
  const absl::string_view name = segments.back();
  if (name.empty() || segments[segments.size() - 2] != kTenantSegment) return "";
  return std::string(name);
}

absl::StatusOr<std::string> CertTenantFromValues(CertTenantField field,
                                                 const std::vector<std::string>& values) {
  if (field == CertTenantField::kCn) {
    if (values.empty()) {
      return Unauthenticated(field, "the client certificate has no subject CN to name a tenant",
                             "certificate_no_tenant");
    }
    if (!ValidTenantName(values.front())) {
      return Unauthenticated(field,
                             absl::StrCat("the client certificate's CN '", values.front(),
                                          "' is not a tenant name ([A-Za-z0-9._-]+)"),
                             "certificate_bad_tenant", {{"cert_value", values.front()}});
    }
    return values.front();
  }
  std::string tenant;
  for (const std::string& uri : values) {
    const std::string name = TenantFromUri(uri);
    if (name.empty()) continue;
    if (!ValidTenantName(name)) {
      return Unauthenticated(field,
                             absl::StrCat("the client certificate's URI '", uri,
                                          "' names a tenant that is not [A-Za-z0-9._-]+"),
                             "certificate_bad_tenant", {{"cert_value", uri}});
    }
    // Two tenants in one certificate: refuse rather than pick one.
    if (!tenant.empty() && tenant != name) {
      return Unauthenticated(field,
                             absl::StrCat("the client certificate's URIs name two tenants, '",
                                          tenant, "' and '", name, "'"),
                             "certificate_ambiguous");
    }
    tenant = name;
  }
  if (tenant.empty()) {
    return Unauthenticated(field,
                           absl::StrCat("the client certificate has no URI SAN of the form "
                                        "<scheme>://.../tenant/<name> (it has ",
                                        values.size(), " URI SAN(s))"),
                           "certificate_no_tenant");
  }
  return tenant;
}

absl::StatusOr<std::string> CertTenant(CertTenantField field, const grpc::AuthContext& auth) {
  // Mutual TLS refuses the handshake without a verified certificate, so this is a defence
  // against a server configured otherwise, not a path clients normally reach.
  if (auth.FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME).empty()) {
    return Unauthenticated(field,
                           "this server takes tenants from client certificates; the call "
                           "came without one",
                           "certificate_missing");
  }
  return CertTenantFromValues(
      field, Values(auth, field == CertTenantField::kCn ? GRPC_X509_CN_PROPERTY_NAME
                                                        : GRPC_PEER_URI_PROPERTY_NAME));
}

}  // namespace tensord
