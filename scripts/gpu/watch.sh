#!/bin/bash
# Keep a GPU lease's call alive while scripts/gpu/lease.sh runs: wait until the chain
# ends or SECONDS pass, then copy RECORDS into the call's $OUT and show the chain's log.
# Usage (on the GPU machine): scripts/gpu/watch.sh RECORDS SECONDS
O=$1; END=$(( $(date +%s) + $2 ))
while pgrep -f "[l]ease.sh" > /dev/null && [ "$(date +%s)" -lt "$END" ]; do sleep 5; done
[ -n "${OUT:-}" ] && cp -r "$O" "$OUT/"
tail -n 25 "$O/chain.log" 2>/dev/null
pgrep -f "[l]ease.sh" > /dev/null && echo "chain still running" || echo "chain ended"
