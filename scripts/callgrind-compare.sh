#!/usr/bin/env bash
# Server instructions per request of the 64-byte request/response workload, Rusty's
# server beside smoltcp's, counted by callgrind.
#
# Both runs have the same Rusty client engine on the same in-memory link; only the
# server differs: examples/request_response.rs (Rusty's engine, loop turn
# `rr::server_turn`) and examples/smoltcp_rr.rs (one smoltcp Interface with a socket
# per connection, loop turn `smoltcp_server_turn`; the options both run with are in its
# doc comment). Each server's turns are collected alone (--toggle-collect) in runs of
# N1 and N2 requests, and the cost per request is the difference over N2 - N1, so set-up
# (engines, handshakes, warm-up) cancels out. Both servers reach the link through
# `OutOfLine` (benches/support/common.rs), and both counts leave its functions out
# (`link_toggles` in callgrind-lib.sh): the figures are the two stacks' own work. The
# table gives both per K and smoltcp's cost over Rusty's; then each server's costliest
# functions per request at the largest K.
#
# BURST (default 32, the engines' `rx_burst`) is how many frames every end takes from
# the link per loop turn, so how many requests one turn of a server can serve. smoltcp
# walks all its sockets at least twice a turn (egress, and the application looking for
# data), so its cost per request at large K falls as BURST grows; Rusty's hardly moves.
#
# Usage: [BURST=B] scripts/callgrind-compare.sh [N1 [N2 [K...]]]
#        (defaults: 2000 22000 1 100 1000 10000; each run at K serves 2K more, see
#        below; smoltcp at K=10,000 takes minutes)
# Output files stay in target/callgrind-compare/.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
n1=${1:-2000}
n2=${2:-22000}
b=${BURST:-32}
shift $(($# < 2 ? $# : 2))
ks=("$@")
[ ${#ks[@]} -gt 0 ] || ks=(1 100 1000 10000)
run_lengths "$n1" "$n2"
build_examples callgrind-compare request_response smoltcp_rr

# Both runs at K connections serve 2K requests more than N1 and N2, so that every
# connection has been served twice (its first rings taken from the allocator) before
# the shorter run ends: otherwise, at K = 10,000, allocations that happen once per
# connection fall between the two runs and pass for a cost per request (about 190
# instructions of `calloc` for Rusty at N = 2,000 and 22,000). Both servers get the
# same run lengths.
lengths() {
    echo "$((n1 + 2 * $1)) $((n2 + 2 * $1))"
}

rows=()
for k in "${ks[@]}"; do
    read -r k1 k2 < <(lengths "$k")
    for n in "$k1" "$k2"; do
        echo "callgrind: N=$n K=$k B=$b" >&2
        callgrind "$examples/request_response" "$out/rusty.b$b.k$k.n$n.out" \
            --toggle-collect='*rr::server_turn*' "${link_toggles[@]}" -- "$n" "$k" memory "$b"
        callgrind "$examples/smoltcp_rr" "$out/smoltcp.b$b.k$k.n$n.out" \
            --toggle-collect='*smoltcp_server_turn*' "${link_toggles[@]}" -- "$n" "$k" "$b"
    done
    # Per request served between the runs (see `served` in callgrind-lib.sh), each
    # server's own count.
    rs=$(served_between "$out/rusty.b$b.k$k.n$k1.out" "$out/rusty.b$b.k$k.n$k2.out")
    ss=$(served_between "$out/smoltcp.b$b.k$k.n$k1.out" "$out/smoltcp.b$b.k$k.n$k2.out")
    rusty=$(per_unit "$out/rusty.b$b.k$k.n$k1.out" "$out/rusty.b$b.k$k.n$k2.out" "$rs")
    smoltcp=$(per_unit "$out/smoltcp.b$b.k$k.n$k1.out" "$out/smoltcp.b$b.k$k.n$k2.out" "$ss")
    rows+=("$k $k1 $k2 $rs $rusty $smoltcp")
done

echo
echo "== server instructions per request served (the link left out), burst $b frames a turn =="
printf '%8s %16s %8s %12s %12s %15s\n' K "N1 / N2" "served*" Rusty smoltcp smoltcp/Rusty
for row in "${rows[@]}"; do
    echo "$row"
done | awk '{ printf "%8d %16s %8d %12.1f %12.1f %15.2f\n", $1, $2 " / " $3, $4, $5, $6, $6 / $5 }'
echo "* requests Rusty's server answered between the runs; each server's figure is per request it answered"

k=${ks[${#ks[@]} - 1]}
read -r k1 k2 < <(lengths "$k")
top_tables "Rusty server path, K=$k" "$out/rusty.b$b.k$k.n$k1.out" "$out/rusty.b$b.k$k.n$k2.out" \
    "$(served_between "$out/rusty.b$b.k$k.n$k1.out" "$out/rusty.b$b.k$k.n$k2.out")" request 'rr::server_turn$'
top_tables "smoltcp server path, K=$k" "$out/smoltcp.b$b.k$k.n$k1.out" "$out/smoltcp.b$b.k$k.n$k2.out" \
    "$(served_between "$out/smoltcp.b$b.k$k.n$k1.out" "$out/smoltcp.b$b.k$k.n$k2.out")" request 'smoltcp_server_turn$'
