#!/usr/bin/env bash
# Instructions per request of the 64-byte request/response workload (the one the
# `request_response` benchmark times), counted by callgrind.
#
# Builds examples/request_response.rs in release and runs it under callgrind with two
# request counts N1 < N2, for each connection count K. Every cost is reported per request
# as (cost at N2 - cost at N1) / (N2 - N1), so set-up (engines, handshakes, warm-up) and
# process start cancel out:
#   - total:  every instruction of the process (client + server + link);
#   - server: the server engine's loop turns, `rr::server_turn`, inclusive (collected
#             alone with --toggle-collect; includes the link's receive/transmit and the
#             release of received frames, which run inside the server's turn);
#   - client: the same for the client engine's loop turns, `rr::client_turn`.
# Then the server path's 15 costliest functions per request, by self and by inclusive
# instructions (functions are merged across the files their inlined code came from).
# scripts/callgrind-compare.sh sets the server's figure beside smoltcp's.
#
# Usage: scripts/callgrind-rr.sh [N1 [N2 [K...]]]   (defaults: 20000 120000 1 32)
# Output files stay in target/callgrind-rr/ for callgrind_annotate or KCachegrind.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
n1=${1:-20000}
n2=${2:-120000}
shift $(($# < 2 ? $# : 2))
ks=("$@")
[ ${#ks[@]} -gt 0 ] || ks=(1 32)
run_lengths "$n1" "$n2"
build_examples callgrind-rr request_response

for k in "${ks[@]}"; do
    turns_per_unit "K=$k connections" request "$examples/request_response" "$out/k$k" \
        rr::server_turn rr::client_turn "$k"
done
