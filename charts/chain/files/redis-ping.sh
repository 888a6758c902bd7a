# Redis readiness: PING answers PONG. $1 the port, $2 the CA file ('' = plaintext), $3 the password file
# ('' = no password). The password goes through REDISCLI_AUTH in this shell only, never the pod's environment.
set -eu
if [ -n "$3" ]; then REDISCLI_AUTH=$(cat "$3"); export REDISCLI_AUTH; fi
if [ -n "$2" ]; then
  reply=$(redis-cli --tls --cacert "$2" -h localhost -p "$1" ping)
else
  reply=$(redis-cli -h localhost -p "$1" ping)
fi
[ "$reply" = "PONG" ]
