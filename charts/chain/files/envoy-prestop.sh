#!/bin/bash
# Envoy's preStop hook (the chart mounts it from the Envoy ConfigMap; tests/envoy runs this very file against
# a real Envoy). Usage: envoy-prestop.sh ADMIN_PORT EJECT_SECONDS DRAIN_SECONDS
#
#  1. POST /healthcheck/fail: the health listener (/healthz, the readiness probe and any external load
#     balancer's check) answers 503 from now on, so nothing new is routed here;
#  2. wait EJECT_SECONDS while Endpoints, kube-proxy and load balancers take the pod out;
#  3. POST /drain_listeners?graceful: HTTP/2 connections get a GOAWAY, HTTP/1.1 responses `Connection: close`,
#     so clients reconnect elsewhere at their next request; open streams keep flowing;
#  4. wait until no request is active on the gRPC listener, at most DRAIN_SECONDS. Then the kubelet sends
#     SIGTERM and Envoy exits; a stream still open ends as UNAVAILABLE (connection closed after the GOAWAY),
#     which clients retry elsewhere, resuming after the last event id they saw.
# The admin interface listens on 127.0.0.1 only, so this runs inside the container (bash's /dev/tcp: the
# Envoy image has no curl).
set -u
admin_port=$1 eject=$2 drain=$3

admin() {
  exec 3<>"/dev/tcp/127.0.0.1/${admin_port}" || return 1
  printf '%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 0\r\n\r\n' "$1" "$2" >&3
  tr -d '\r' <&3
  exec 3<&-
}

active_requests() {
  admin GET '/stats?filter=downstream_rq_active' | sed -n 's/^http\.grpc\.downstream_rq_active: //p'
}

admin POST /healthcheck/fail >/dev/null
sleep "$eject"
admin POST '/drain_listeners?graceful' >/dev/null
deadline=$((SECONDS + drain))
while [ "$SECONDS" -lt "$deadline" ]; do
  active=$(active_requests)
  [ "${active:-0}" -eq 0 ] && break
  sleep 1
done
exit 0
