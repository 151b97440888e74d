// Tenants from mutual-TLS client certificates (--tenant-from-cert): which certificate field
// names the tenant, how a tenant is read from a SAN URI, and the lookup on a call's
// grpc::AuthContext. The certificate was already verified against --tls-client-ca during the
// handshake; this only reads the identity the CA vouched for.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class AuthContext;
}  // namespace grpc

namespace tensord {

// The certificate field that names a call's tenant.
enum class CertTenantField {
  kNone,    // certificates authenticate the connection only; the tenant comes from tokens
  kSanUri,  // a URI subject alternative name of the form TenantFromUri accepts
  kCn,      // the subject common name, a tenant name as it stands
};

// "none", "san-uri", "cn": the flag's spelling, also used in error metadata (cert_field).
absl::string_view CertTenantFieldName(CertTenantField field);

// absl flag support, so --tenant-from-cert and TENSORD_TENANT_FROM_CERT refuse other values.
bool AbslParseFlag(absl::string_view text, CertTenantField* field, std::string* error);
std::string AbslUnparseFlag(CertTenantField field);

// The tenant segment of a URI of the tenant form: a scheme ("x://"), no query or fragment, and
// last two '/'-separated segments "tenant" and a non-empty name. So SPIFFE IDs such as
// spiffe://example.org/tenant/alice or spiffe://example.org/ns/prod/tenant/alice, and
// tensord://tenant/alice, all name "alice". Empty for a URI of another form (a certificate may
// carry other identity URIs; those are ignored). The name is returned as it stands: whether it
// is a valid tenant name is the caller's check.
std::string TenantFromUri(absl::string_view uri);

// The tenant of a client certificate given the chosen field's values (its URI SANs for kSanUri,
// its subject CN for kCn), or UNAUTHENTICATED with metadata cert_field and cause =
//   certificate_no_tenant   no CN, or no URI SAN of the tenant form
//   certificate_bad_tenant  the CN or the URI's name is not [A-Za-z0-9._-]+ (cert_value names it)
//   certificate_ambiguous   URI SANs naming different tenants
// `field` must not be kNone.
absl::StatusOr<std::string> CertTenantFromValues(CertTenantField field,
                                                 const std::vector<std::string>& values);

// The same read from a call's authentication context (the peer_uri or x509_common_name
// properties gRPC fills from the verified certificate); cause = certificate_missing when the
// call came without a client certificate.
absl::StatusOr<std::string> CertTenant(CertTenantField field, const grpc::AuthContext& auth);

}  // namespace tensord
