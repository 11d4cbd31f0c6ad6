#!/usr/bin/env bash
# Builds the local cluster's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok) once per pinned version set and prints the folder
# that holds them. The cache lives outside the work tree so fresh clones reuse it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kwok_version=v0.7.0
# The cache key covers every input that changes the binaries.
key=$( (cat "$here/tools/go.mod" "$here/tools/go.sum"; echo "kwok=$kwok_version"; go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${RESTART_CONTROLLER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/restart-controller}
out="$cache_root/cluster-bins/$key"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

is_complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$out/$b" ] || return 1; done
}
if is_complete; then echo "$out"; exit 0; fi

# Parallel callers (e.g. `go test` running several packages that each start a
# cluster) must not build into the same $out.tmp at once: the first one builds,
# the others wait for the lock and then find the cache complete.
mkdir -p "$cache_root/cluster-bins"
exec 9>"$cache_root/cluster-bins/.lock"
flock 9
if is_complete; then echo "$out"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
echo "building local cluster binaries into $out (first run only, a few minutes)" >&2
(
  cd "$here/tools"
  export CGO_ENABLED=0 GOFLAGS=-mod=mod
  go build -o "$out.tmp/etcd" ./etcd
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    go build -o "$out.tmp/$c" "k8s.io/kubernetes/cmd/$c"
  done
) >&2
GOBIN="$out.tmp" CGO_ENABLED=0 go install "sigs.k8s.io/kwok/cmd/kwok@$kwok_version" >&2
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
