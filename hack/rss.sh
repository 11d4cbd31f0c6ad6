#!/usr/bin/env bash
# rss.sh SECONDS COMMAND [ARGS...]: runs COMMAND for SECONDS, then prints its
# peak RSS (VmHWM) and what the resident pages are, file-backed (the
# binary's own pages, mostly) against anonymous (heap, stacks), from
# /proc/PID/status and /proc/PID/smaps_rollup; then stops it with SIGTERM.
# Compare only binaries of the same age: a binary file just written maps
# more of itself than the same bytes later (build both, then measure both).
set -euo pipefail
secs=$1; shift
"$@" >/dev/null 2>&1 &
pid=$!
sleep "$secs"
if ! kill -0 "$pid" 2>/dev/null; then
  echo "rss.sh: $1 exited before ${secs}s" >&2; exit 1
fi
hwm=$(awk '/^VmHWM:/{print $2}' /proc/$pid/status)
file=$(awk '/^Pss_File:/{print $2}' /proc/$pid/smaps_rollup)
anon=$(awk '/^Pss_Anon:/{print $2}' /proc/$pid/smaps_rollup)
kill "$pid"; wait "$pid" 2>/dev/null || true
printf '%s: VmHWM %.1f MiB, Pss_File %.1f MiB, Pss_Anon %.1f MiB\n' "$(basename "$1")" \
  "$(echo "$hwm/1024" | bc -l)" "$(echo "$file/1024" | bc -l)" "$(echo "$anon/1024" | bc -l)"
