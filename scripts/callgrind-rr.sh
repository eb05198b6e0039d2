#!/usr/bin/env bash
# Instructions per request of the 64-byte request/response workload (the one the
# `request_response` benchmark times), counted by callgrind.
#
# Builds examples/request_response.rs in release and runs it under callgrind with two
# request counts N1 < N2, for each connection count K. Every cost is reported per request
# as (cost at N2 - cost at N1) / (N2 - N1), so set-up (engines, handshakes, warm-up) and
# process start cancel out:
#   - server engine: the server engine's loop turns, `rr::server_turn`, with the link
#             left out (the server reaches the in-memory link through `OutOfLine`, whose
#             functions collection skips: see `link_toggles` in callgrind-lib.sh). This
#             is the figure that measures the stack; the link is a test double;
#   - the link: the link's functions called inside the server's turns (receive,
#             transmit, buffers, the release of received frames);
#   - client: the client engine's loop turns, `rr::client_turn`, its link included;
#   - total:  every instruction of the process.
# Then the server engine's 15 costliest functions per request, by self and by inclusive
# instructions (functions are merged across the files their inlined code came from).
# scripts/callgrind-compare.sh sets the server's figure beside smoltcp's.
#
# Usage: scripts/callgrind-rr.sh [--ipv6] [N1 [N2 [K...]]]   (defaults: 20000 120000 1 32;
# --ipv6 runs the connections over IPv6)
# Output files stay in target/callgrind-rr/ for callgrind_annotate or KCachegrind.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
family=ipv4
if [ "${1:-}" = --ipv6 ]; then
    family=ipv6
    shift
fi
n1=${1:-20000}
n2=${2:-120000}
shift $(($# < 2 ? $# : 2))
ks=("$@")
[ ${#ks[@]} -gt 0 ] || ks=(1 32)
run_lengths "$n1" "$n2"
build_examples callgrind-rr request_response

for k in "${ks[@]}"; do
    turns_per_unit "K=$k connections, $family" request "$examples/request_response" \
        "$out/$family.k$k" rr::server_turn rr::client_turn "$k" memory - "$family"
done
