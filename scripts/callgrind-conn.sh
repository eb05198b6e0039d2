#!/usr/bin/env bash
# Instructions per connection of the connection-rate workload (examples/conn_rate.rs:
# connect, 64-byte request, 64-byte response, the server closes first and keeps
# TIME-WAIT, which expires in the steady state measured), counted by callgrind.
#
# Runs the example under callgrind with two connection counts N1 < N2 and reports per
# connection, as (cost at N2 - cost at N1) / (N2 - N1), so set-up, calibration and
# warm-up cancel out: the server engine's loop turns (`conn::conn_server_turn`,
# collected alone) with the in-memory link left out, the link's share of those turns,
# the client's turns and the whole process (see scripts/callgrind-rr.sh); then the
# server engine's costliest functions per connection, by self and inclusive
# instructions.
#
# Usage: scripts/callgrind-conn.sh [N1 [N2 [C]]]   (defaults: 10000 40000 64)
# Output files stay in target/callgrind-conn/.
set -euo pipefail

cd "$(dirname "$0")/.."
. scripts/callgrind-lib.sh
n1=${1:-10000}
n2=${2:-40000}
c=${3:-64}
run_lengths "$n1" "$n2"
build_examples callgrind-conn conn_rate

show_stdout=1 turns_per_unit "C=$c connections in flight" connection "$examples/conn_rate" \
    "$out/c$c" conn::conn_server_turn conn::conn_client_turn "$c"
