#!/usr/bin/env bash
# Fails when git tracks a binary or a file over 1 MiB: build outputs and data
# dumps belong in .gitignore or in the cache, never in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue # deleted in the work tree, not yet committed
  size=$(stat -c %s "$f")
  if [ "$size" -gt "$limit" ]; then
    echo "tracked file over 1 MiB: $f ($size bytes)" >&2
    bad=1
  fi
  # git's own test for binary content: a NUL byte in the first 8000 bytes.
  if head -c 8000 "$f" | tr -d '\000' | cmp -s - <(head -c 8000 "$f"); then :; else
    echo "tracked binary file: $f" >&2
    bad=1
  fi
done < <(git ls-files -z)
exit "$bad"
