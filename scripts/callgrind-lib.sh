# Helpers of the callgrind scripts (callgrind-rr.sh, callgrind-compare.sh,
# callgrind-conn.sh): sourced, not run. Each script measures a cost "per unit" (a
# request, a connection) as the difference of two runs of different lengths N1 < N2
# divided by N2 - N1, so that set-up and process start cancel out.

export LC_ALL=C
# Rows of the per-function tables.
top=${top:-15}

# callgrind <program> <output file> <extra valgrind args...> -- <program args...>
callgrind() {
    local bin=$1 file=$2
    shift 2
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

# The requests the server answered in a run of request_response or smoltcp_rr, from
# the "served S" the program printed (callgrind's <output file>.stdout). A run of N
# requests stops after the client turn in which the N-th response arrives, which may
# hold up to a burst more, so two runs N1 and N2 can be more than N2 - N1 requests
# apart (20,480 at 10,000 connections and 4,096 frames a turn, N = 42,000 and 62,000).
served() {
    awk '{ for (i = 1; i < NF; i++) if ($i == "served") { print $(i + 1); exit } }' "$1.stdout"
}

# The requests served between two runs (their callgrind output files, shorter first).
served_between() {
    local a b
    a=$(served "$1")
    b=$(served "$2")
    if [ -z "$a" ] || [ -z "$b" ] || [ "$b" -le "$a" ]; then
        echo "callgrind-lib: no 'served' count in $1.stdout or $2.stdout (did the run fail?)" >&2
        exit 1
    fi
    echo $((b - a))
}

# (totals of <large> - totals of <small>) / <units>, to one decimal.
per_unit() {
    awk -v a="$(totals "$1")" -v b="$(totals "$2")" -v dn="$3" 'BEGIN { printf "%.1f", (b - a) / dn }'
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
            END { for (f in cost) printf "%.0f %s\n", cost[f], f }'
}

# Top functions per unit: the difference of two profiles divided by the unit count,
# with the share of `whole` (the collected instructions between the two runs). By
# inclusive cost the turn function (`turn`, an awk regex on the name) and the entries
# costing as much as `whole` (the runtime frames above it) are left out; by self cost
# the turn function stays, as the home of the code inlined into it.
per_unit_top() {
    local small=$1 large=$2 inclusive=$3 dn=$4 whole=$5 turn=$6
    join -t $'\t' -a 2 -e 0 -o 0,1.2,2.2 \
        <(functions "$small" "$inclusive" | awk '{ n = $1; sub(/^[0-9]+ /, ""); print $0 "\t" n }' | sort -t $'\t' -k1,1) \
        <(functions "$large" "$inclusive" | awk '{ n = $1; sub(/^[0-9]+ /, ""); print $0 "\t" n }' | sort -t $'\t' -k1,1) |
        awk -F '\t' -v dn="$dn" -v whole="$whole" -v turn="$turn" -v inclusive="$inclusive" '
            (inclusive == "no" || $1 !~ turn) && $3 - $2 < whole { printf "%9.1f %6.2f%%  %s\n", ($3 - $2) / dn, 100 * ($3 - $2) / whole, $1 }' |
        sort -g -r | awk -v top="$top" 'NR <= top'  # (head would SIGPIPE sort under pipefail)
}

# The top functions of a turn function's path per unit, by self and by inclusive cost:
# top_tables <label> <small> <large> <units> <unit name> <turn regex>
top_tables() {
    local label=$1 small=$2 large=$3 dn=$4 unit=$5 turn=$6
    local whole=$(($(totals "$large") - $(totals "$small")))
    echo
    echo "-- $label, top $top functions by self instructions per $unit (share of the path) --"
    per_unit_top "$small" "$large" no "$dn" "$whole" "$turn"
    echo
    echo "-- $label, top $top functions by inclusive instructions per $unit (share of the path) --"
    per_unit_top "$small" "$large" yes "$dn" "$whole" "$turn"
}

# The link's own functions: the servers of the workloads reach their link through
# `OutOfLine` (benches/support/common.rs), whose calls are never inlined. Toggling
# collection on them inside a toggled turn function leaves the link out of the turn's
# count (collection goes off on entering one and back on when it returns); on their own
# they collect the link alone. No client reaches its link through them.
link_toggles=(--toggle-collect='*::OutOfLine<D> as *' --toggle-collect='*::OutOfLineRx<F> as *'
    --toggle-collect='*::OutOfLineTx<F> as *')

# Four runs of <program> with <program args...>: the whole process into
# <prefix>.all.out; the server's and the client's loop turns alone (--toggle-collect on
# the two turn functions) into <prefix>.server.out and <prefix>.client.out; and the
# server's turns without the link's functions (the engine's own work) into
# <prefix>.engine.out.
# profile_turns <program> <prefix> <server turn> <client turn> <program args...>
profile_turns() {
    local bin=$1 prefix=$2 server=$3 client=$4
    shift 4
    callgrind "$bin" "$prefix.all.out" -- "$@"
    callgrind "$bin" "$prefix.server.out" --toggle-collect="*$server*" -- "$@"
    callgrind "$bin" "$prefix.client.out" --toggle-collect="*$client*" -- "$@"
    callgrind "$bin" "$prefix.engine.out" --toggle-collect="*$server*" "${link_toggles[@]}" -- "$@"
}

# From two profile_turns runs (<prefix1> shorter, <units> apart): the whole process,
# the server's turns and the client's turns per unit, then the server path's top
# functions.
# report_turns <unit name> <units> <prefix1> <prefix2> <server turn>
report_turns() {
    local unit=$1 dn=$2 a=$3 b=$4 server=$5
    local total=$(($(totals "$b.all.out") - $(totals "$a.all.out")))
    local server_cost=$(($(totals "$b.server.out") - $(totals "$a.server.out")))
    local client=$(($(totals "$b.client.out") - $(totals "$a.client.out")))
    local engine=$(($(totals "$b.engine.out") - $(totals "$a.engine.out")))
    awk -v t="$total" -v s="$server_cost" -v e="$engine" -v c="$client" -v dn="$dn" -v unit="$unit" 'BEGIN {
        printf "instructions per %s\n", unit
        printf "server engine (its turns, link left out): %8.1f\n", e / dn
        printf "the link (inside the server turns):      %8.1f\n", (s - e) / dn
        printf "client (its turns, engine and link):      %8.1f\n", c / dn
        printf "outside both turns:                       %8.1f\n", (t - s - c) / dn
        printf "total (the whole process):                %8.1f\n", t / dn
    }'
    top_tables "server engine" "$a.engine.out" "$b.engine.out" "$dn" "$unit" "$server\$"
}

# profile_turns at both run lengths (the program's first argument: N1, then N2; the
# rest follow), into <prefix>.n<N>, then report_turns under the heading <title>.
# turns_per_unit <title> <unit name> <program> <prefix> <server turn> <client turn> <more args...>
turns_per_unit() {
    local title=$1 unit=$2 bin=$3 prefix=$4 server=$5 client=$6 n
    shift 6
    for n in "$n1" "$n2"; do
        echo "callgrind: $title, N=$n" >&2
        profile_turns "$bin" "$prefix.n$n" "$server" "$client" "$n" "$@"
    done
    echo
    # Requests: per request the server answered between the runs (see `served`).
    local units=$dn note=
    if [ "$unit" = request ]; then
        units=$(served_between "$prefix.n$n1.server.out" "$prefix.n$n2.server.out")
        note=" ($units served between them; every row per request served)"
    fi
    echo "== $title, N=$n1 and N=$n2 ${unit}s$note =="
    [ -z "${show_stdout:-}" ] || cat "$prefix.n$n2.all.out.stdout"
    report_turns "$unit" "$units" "$prefix.n$n1" "$prefix.n$n2" "$server"
}

# Check the two run lengths (N2 > N1) and set `dn`, the units between them.
run_lengths() {
    if [ "$2" -le "$1" ]; then
        echo "N2 ($2) must be larger than N1 ($1)" >&2
        exit 2
    fi
    dn=$(($2 - $1))
}

# Build the named examples in release and make target/<dir> for the output files; sets
# `out` (that folder) and `examples` (where the programs are).
# build_examples <dir> <example...>
build_examples() {
    out=target/$1
    shift
    mkdir -p "$out"
    cargo build --release "${@/#/--example=}"
    examples=${CARGO_TARGET_DIR:-target}/release/examples
}
