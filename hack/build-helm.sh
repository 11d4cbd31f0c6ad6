#!/usr/bin/env bash
# Builds helm from its Go module (no download of a prebuilt binary) once per
# pinned version and prints the binary's path. Like build-cluster-bins.sh, the
# cache lives outside the work tree, so fresh clones reuse it; the first run
# takes a few minutes.
set -euo pipefail

helm_version=v3.22.0
# helm's own Makefile stamps these; without them `helm version` says "dev" and
# lint/template assume Kubernetes 1.20. 1.37 matches helm v3.22's client-go v0.37.
k8s_major=1
k8s_minor=37
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=$k8s_major -X $pkg.k8sVersionMinor=$k8s_minor"
done

# The cache key covers every input that changes the binary.
key=$( (echo "helm=$helm_version"; echo "$ldflags"; go env GOVERSION) | sha256sum | cut -c1-16)
cache_root=${RESTART_CONTROLLER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/restart-controller}
out="$cache_root/helm/$key"
if [ -x "$out/helm" ]; then echo "$out/helm"; exit 0; fi

# Parallel callers (several test packages) wait for the first build.
mkdir -p "$cache_root/helm"
exec 9>"$cache_root/helm/.lock"
flock 9
if [ -x "$out/helm" ]; then echo "$out/helm"; exit 0; fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
echo "building helm $helm_version into $out (first run only, a few minutes)" >&2
GOBIN="$out.tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath -ldflags "$ldflags" \
  "helm.sh/helm/v3/cmd/helm@$helm_version" >&2
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out/helm"
