#!/bin/sh
# Container entrypoint: runs tensord (with any flags given), or another command of the image
# such as `tensordctl demo`.
#
# Before starting tensord it checks the TENSORD_* variables against the ones tensord reads
# (one per flag; `tensord --helpfull` names each): TENSORD_TLS_CERT, TENSORD_TLS_KEY,
# TENSORD_TLS_CLIENT_CA, TENSORD_AUTH_TOKENS(_POLL_INTERVAL) and TENSORD_TENANT_FROM_CERT pass
# through to tensord like every known variable (docs/security.md). An unknown variable that looks security-related (a misspelt
# TENSORD_TLS_CRT, say) would be ignored and leave the server less protected than intended, so
# the entrypoint refuses to start instead; other unknown variables only draw a warning.
# TENSORD_TOKEN is tensordctl's (the bearer token of the health check and of client commands).
set -eu

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  set -- tensord "$@"
fi
if [ "$1" != "tensord" ]; then
  exec "$@"
fi

flags=$(tensord --helpfull 2>&1 || true)
unknown_fatal=""
for var in $(env | sed -n 's/^\(TENSORD_[A-Z0-9_]*\)=.*/\1/p'); do
  # Known when a flag's help names it: "... (env TENSORD_X)".
  if printf '%s\n' "$flags" | grep -Eq -- "(^|[^A-Z0-9_])${var}([^A-Z0-9_]|\$)"; then
    continue
  fi
  case "$var" in
    TENSORD_TOKEN)
      continue ;;
    TENSORD_TLS_*|TENSORD_TOKEN*|TENSORD_AUTH*|TENSORD_TENANT*)
      unknown_fatal="${unknown_fatal} ${var}" ;;
    *)
      echo "tensord-entrypoint: warning: ${var} is set but tensord reads no such variable; ignored" >&2 ;;
  esac
done
if [ -n "$unknown_fatal" ]; then
  echo "tensord-entrypoint:${unknown_fatal} set, but tensord reads no such variable; refusing" \
       "to serve less protected than intended. Its security variables are TENSORD_TLS_CERT," \
       "TENSORD_TLS_KEY, TENSORD_TLS_CLIENT_CA, TENSORD_AUTH_TOKENS," \
       "TENSORD_AUTH_TOKENS_POLL_INTERVAL and TENSORD_TENANT_FROM_CERT (docs/security.md)" >&2
  exit 78
fi
exec "$@"
