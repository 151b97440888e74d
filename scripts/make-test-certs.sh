#!/bin/sh
# Makes a throw-away PKI for tests and local trials of tensord's TLS (docs/security.md):
#   ca.pem/ca.key              a CA
#   server.pem/server.key      a server certificate for localhost and 127.0.0.1, signed by the CA
#   client.pem/client.key      a client certificate (CN=tensord-client), signed by the CA
#   rogue-ca.pem, rogue-client.pem/rogue-client.key
#                              a second CA and a client certificate it signed, which a server
#                              trusting only ca.pem must refuse
# Client certificates for tenants from certificates (--tenant-from-cert), all signed by the CA:
#   alice-uri.pem/.key         SAN URI spiffe://tensord.test/tenant/alice (CN=tensord-alice)
#   bob-uri.pem/.key           SAN URI tensord://tenant/bob and a non-tenant URI (CN=bob-svc)
#   carol-cn.pem/.key          CN=carol, no SAN
#   bad-cn.pem/.key            CN="not a tenant" (spaces), SAN URI spiffe://tensord.test/tenant/b@d
#   two-tenants.pem/.key       SAN URIs naming tenants alice and bob
# Valid for 2 days, EC P-256 keys. Never use these for a real deployment: the keys sit in a
# plain directory. Usage: make-test-certs.sh DIR
set -eu
dir=${1:?usage: make-test-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() {  # ca NAME SUBJECT
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

leaf() {  # leaf NAME SUBJECT CA EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "$2"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

ca ca "/CN=tensord test CA"
leaf server "/CN=localhost" ca \
  "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client "/CN=tensord-client" ca "extendedKeyUsage=clientAuth"
leaf alice-uri "/CN=tensord-alice" ca \
  "subjectAltName=URI:spiffe://tensord.test/tenant/alice
extendedKeyUsage=clientAuth"
leaf bob-uri "/CN=bob-svc" ca \
  "subjectAltName=URI:spiffe://tensord.test/ns/batch/sa/bob-svc,URI:tensord://tenant/bob
extendedKeyUsage=clientAuth"
leaf carol-cn "/CN=carol" ca "extendedKeyUsage=clientAuth"
leaf bad-cn "/CN=not a tenant" ca \
  "subjectAltName=URI:spiffe://tensord.test/tenant/b@d
extendedKeyUsage=clientAuth"
leaf two-tenants "/CN=two-tenants" ca \
  "subjectAltName=URI:spiffe://tensord.test/tenant/alice,URI:spiffe://tensord.test/tenant/bob
extendedKeyUsage=clientAuth"
ca rogue-ca "/CN=rogue test CA"
leaf rogue-client "/CN=rogue-client" rogue-ca "extendedKeyUsage=clientAuth"
rm -f ./*.srl
# The servers and clients of a test run as this user; the keys stay private to it.
chmod 600 ./*.key
chmod 644 ./*.pem
