#!/bin/sh
# Makes a throw-away PKI for tests and local trials of tensord's TLS (docs/security.md):
#   ca.pem/ca.key              a CA
#   server.pem/server.key      a server certificate for localhost and 127.0.0.1, signed by the CA
#   client.pem/client.key      a client certificate (CN=tensord-client), signed by the CA
#   rogue-ca.pem, rogue-client.pem/rogue-client.key
#                              a second CA and a client certificate it signed, which a server
#                              trusting only ca.pem must refuse
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
ca rogue-ca "/CN=rogue test CA"
leaf rogue-client "/CN=rogue-client" rogue-ca "extendedKeyUsage=clientAuth"
rm -f ./*.srl
# The servers and clients of a test run as this user; the keys stay private to it.
chmod 600 ./*.key
chmod 644 ./*.pem
