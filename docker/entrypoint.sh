#!/bin/sh
# Container entrypoint: runs tensord (with any flags given), or another command of the image
# such as `tensordctl demo`.
#
# Before starting tensord it checks the security-relevant variables: tensord reads one
# TENSORD_* variable per flag (`tensord --helpfull` names it), so a TLS or token variable that
# this build has no flag for would be ignored and the server would listen in the clear. It
# refuses to start instead. Other TENSORD_* variables it does not know (typos, say) only draw
# a warning.
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
    TENSORD_TLS_*|TENSORD_TOKENS_FILE|TENSORD_AUTH_*)
      unknown_fatal="${unknown_fatal} ${var}" ;;
    *)
      echo "tensord-entrypoint: warning: ${var} is set but tensord reads no such variable; ignored" >&2 ;;
  esac
done
if [ -n "$unknown_fatal" ]; then
  echo "tensord-entrypoint:${unknown_fatal} set, but this tensord build does not support" \
       "TLS or token authentication yet; refusing to serve without them (unset the variable" \
       "to serve insecurely on a trusted network)" >&2
  exit 78
fi
exec "$@"
