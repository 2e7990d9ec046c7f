#!/usr/bin/env bash
# Installs what building and running Ordo needs on a fresh machine; sourced by demo.sh and
# test.sh. The cluster crate builds etcd-client (protoc) and `ordo cluster up` and the tests start
# private etcd members (etcd-server).
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  echo "installing rustup (cargo not found)" >&2
  apt-get update -qq && apt-get install -y -qq rustup >/dev/null || true
  rustup default stable
fi
ordo_missing=()
command -v protoc >/dev/null 2>&1 || ordo_missing+=(protobuf-compiler)
command -v etcd >/dev/null 2>&1 || ordo_missing+=(etcd-server)
if [ ${#ordo_missing[@]} -gt 0 ]; then
  echo "installing ${ordo_missing[*]}" >&2
  apt-get update -qq && apt-get install -y -qq "${ordo_missing[@]}" >/dev/null
fi
unset ordo_missing
