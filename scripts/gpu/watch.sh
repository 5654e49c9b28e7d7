#!/bin/bash
# Keep a GPU lease's call alive while scripts/gpu/lease.sh runs: wait until the chain
# ends (its pid in RECORDS/chain.pid) or SECONDS pass, then pack RECORDS into the
# call's $OUT as one archive (a call brings back at most 8 files) and show the log.
# Usage (on the GPU machine): scripts/gpu/watch.sh RECORDS SECONDS
# (Not pgrep -f: the call's own command line names lease.sh, so it always matched.)
O=$1; END=$(( $(date +%s) + $2 ))
running() { [ -f "$O/chain.pid" ] && kill -0 "$(cat "$O/chain.pid")" 2> /dev/null; }
while running && [ "$(date +%s)" -lt "$END" ]; do sleep 3; done
[ -n "${OUT:-}" ] && tar -czf "$OUT/records.tgz" -C "$(dirname "$O")" "$(basename "$O")"
tail -n 25 "$O/chain.log" 2>/dev/null
running && echo "chain still running" || echo "chain ended"
