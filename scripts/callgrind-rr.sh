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
#
# Usage: scripts/callgrind-rr.sh [N1 [N2 [K...]]]   (defaults: 20000 120000 1 32)
# Output files stay in target/callgrind-rr/ for callgrind_annotate or KCachegrind.
set -euo pipefail
export LC_ALL=C

cd "$(dirname "$0")/.."
n1=${1:-20000}
n2=${2:-120000}
shift $(($# < 2 ? $# : 2))
ks=("$@")
[ ${#ks[@]} -gt 0 ] || ks=(1 32)
if [ "$n2" -le "$n1" ]; then
    echo "N2 ($n2) must be larger than N1 ($n1)" >&2
    exit 2
fi
top=15
out=target/callgrind-rr
mkdir -p "$out"

cargo build --release --example request_response
bin=target/release/examples/request_response

# callgrind <output file> <extra valgrind args...> -- <program args...>
callgrind() {
    local file=$1
    shift
    local vg=()
    while [ "$1" != "--" ]; do
        vg+=("$1")
        shift
    done
    shift
    valgrind --tool=callgrind --callgrind-out-file="$file" "${vg[@]}" "$bin" "$@" \
        >"$file.stdout" 2>"$file.valgrind"
}

# Total instructions recorded in a callgrind output file.
totals() {
    awk '/^totals:/ { print $2; exit }' "$1"
}

# "<instructions> <function>" per function of a profile, inclusive or self, with the
# source file and object stripped. Callgrind splits a function into one entry per source
# file its inlined code came from: self costs of those entries add up, while each entry's
# inclusive cost already covers the calls made from the whole function, so inclusive
# takes the largest.
functions() {
    local file=$1 inclusive=$2
    callgrind_annotate --inclusive="$inclusive" --threshold=100 --auto=no "$file" 2>/dev/null |
        awk -v inclusive="$inclusive" '
            /PROGRAM TOTALS/ { next }
            /^ *[0-9][0-9,]* / {
                n = $1; gsub(",", "", n); n += 0
                line = $0
                sub(/^ *[0-9,]+ +\([ 0-9.]+%\) +/, "", line)
                sub(/ \[[^]]*\]$/, "", line)
                i = index(line, ":")
                if (i > 0) line = substr(line, i + 1)
                if (inclusive == "yes") { if (n > cost[line]) cost[line] = n }
                else cost[line] += n
            }
            END { for (f in cost) print cost[f], f }'
}

# Top functions per request: the difference of two profiles divided by the request count,
# with the share of `whole` (the server's instructions between the two runs). Entries
# costing as much as `whole` (server_turn itself and the runtime frames above it) are
# left out.
per_request_top() {
    local small=$1 large=$2 inclusive=$3 dn=$4 whole=$5
    join -t $'\t' -a 2 -e 0 -o 0,1.2,2.2 \
        <(functions "$small" "$inclusive" | awk '{ n = $1; sub(/^[0-9]+ /, ""); print $0 "\t" n }' | sort -t $'\t' -k1,1) \
        <(functions "$large" "$inclusive" | awk '{ n = $1; sub(/^[0-9]+ /, ""); print $0 "\t" n }' | sort -t $'\t' -k1,1) |
        awk -F '\t' -v dn="$dn" -v whole="$whole" '
            $1 !~ /rr::server_turn$/ && $3 - $2 < whole { printf "%9.1f %6.2f%%  %s\n", ($3 - $2) / dn, 100 * ($3 - $2) / whole, $1 }' |
        sort -g -r | awk -v top="$top" 'NR <= top'  # (head would SIGPIPE sort under pipefail)
}

dn=$((n2 - n1))
for k in "${ks[@]}"; do
    for n in "$n1" "$n2"; do
        echo "callgrind: N=$n K=$k" >&2
        callgrind "$out/all.k$k.n$n.out" -- "$n" "$k"
        callgrind "$out/server.k$k.n$n.out" --toggle-collect='*rr::server_turn*' -- "$n" "$k"
        callgrind "$out/client.k$k.n$n.out" --toggle-collect='*rr::client_turn*' -- "$n" "$k"
    done
    all1=$out/all.k$k.n$n1.out
    all2=$out/all.k$k.n$n2.out
    srv1=$out/server.k$k.n$n1.out
    srv2=$out/server.k$k.n$n2.out
    total=$(($(totals "$all2") - $(totals "$all1")))
    server=$(($(totals "$srv2") - $(totals "$srv1")))
    client=$(($(totals "$out/client.k$k.n$n2.out") - $(totals "$out/client.k$k.n$n1.out")))
    echo
    echo "== K=$k connections, N=$n1 and N=$n2 requests: instructions per request =="
    awk -v t="$total" -v s="$server" -v c="$client" -v dn="$dn" 'BEGIN {
        printf "total (client + server + link): %8.1f\n", t / dn
        printf "server engine (server_turn):    %8.1f\n", s / dn
        printf "client engine (client_turn):    %8.1f\n", c / dn
        printf "outside both turns:             %8.1f\n", (t - s - c) / dn
    }'
    echo
    echo "-- server path, top $top functions by self instructions per request (share of server) --"
    per_request_top "$srv1" "$srv2" no "$dn" "$server"
    echo
    echo "-- server path, top $top functions by inclusive instructions per request (share of server) --"
    per_request_top "$srv1" "$srv2" yes "$dn" "$server"
done
