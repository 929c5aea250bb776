#!/usr/bin/env bash
# bench-earlyhints.sh: what early_hints costs the requests that get no hint,
# end to end with wrk against one Caddy, the handler off beside on, in one
# run. Every round measures off then on, the next round on then off, and the
# table gives the median of the per-round ratios on/off, so a machine whose
# load drifts skews both sides alike.
#
#   integration/bench-earlyhints.sh [seconds, default 3] [rounds, default 7]
#   CADDY_BIN=/path/to/caddy ...      # default: ./cmd/caddy built here
#
# Rows (wrk speaks HTTP/1.1, so the early_hints sites have http1 on):
#   asset        a script GET (no Sec-Fetch-Mode: navigate), answered text/javascript
#   navigation   a navigation (Sec-Fetch-Mode: navigate) to a page nothing was
#                learned for, answered per-user (text/html with Set-Cookie):
#                the handler looks the page up, sends no 103, learns nothing
# Needs: go, wrk, curl, python3. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-3}
ROUNDS=${2:-7}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
# shellcheck source=integration/bench-lib.sh
. integration/bench-lib.sh
bench_start bench-earlyhints wrk curl python3 go

caddy_binary "$PWD" "$WORK/caddy"

names=(asset navigation)
declare -A port
for key in asset-off asset-on navigation-off navigation-on; do port[$key]=$(free_port); done
site() { # port early_hints(0|1) content-type set-cookie(0|1)
	printf 'http://127.0.0.1:%s {\n' "$1"
	[ "$2" = 1 ] && printf '\tearly_hints {\n\t\thttp1 on\n\t}\n'
	printf '\theader Content-Type %s\n' "$3"
	[ "$4" = 1 ] && printf '\theader Set-Cookie "s=1; HttpOnly"\n'
	printf '\trespond "ok"\n}\n'
}
{
	caddy_global off "$WORK/storage"
	site "${port[asset-off]}" 0 text/javascript 0
	site "${port[asset-on]}" 1 text/javascript 0
	site "${port[navigation-off]}" 0 text/html 1
	site "${port[navigation-on]}" 1 text/html 1
} >"$WORK/Caddyfile"
# Keep Caddy's log quiet: an access log is not configured, errors only.
sed -i 's/^\tauto_https off$/\tauto_https off\n\tlog default {\n\t\tlevel ERROR\n\t}/' "$WORK/Caddyfile"
mkdir -p "$WORK/home"
HOME=$WORK/home XDG_DATA_HOME=$WORK/home/data XDG_CONFIG_HOME=$WORK/home/config \
	"$WORK/caddy" run --config "$WORK/Caddyfile" --adapter caddyfile >"$WORK/caddy.log" 2>&1 &
PIDS+=($!)
wait_ready / "${port[@]}"

cat >"$WORK/navigation.lua" <<'LUA'
wrk.headers["Sec-Fetch-Mode"] = "navigate"
LUA
cat >"$WORK/asset.lua" <<'LUA'
wrk.headers["Sec-Fetch-Mode"] = "no-cors"
LUA
run() { # name port -> req/s
	wrk_rps bench-earlyhints -t"$THREADS" -c"$CONNS" -d"${DURATION}s" -s "$WORK/$1.lua" "http://127.0.0.1:$2/page"
}
# The navigation site over HTTP/1.1 must send no 103 (nothing learned).
if curl -sv -H 'Sec-Fetch-Mode: navigate' "http://127.0.0.1:${port[navigation-on]}/page" 2>&1 | grep -q '< HTTP/1.1 103'; then
	echo "bench-earlyhints: the navigation row got a 103: it must measure a request that gets no hint" >&2
	exit 1
fi
for key in "${!port[@]}"; do wrk -t1 -c8 -d1s -s "$WORK/${key%-*}.lua" "http://127.0.0.1:${port[$key]}/page" >/dev/null; done

declare -A results
for round in $(seq 1 "$ROUNDS"); do
	order="off on"
	((round % 2 == 0)) && order="on off"
	for name in "${names[@]}"; do
		for side in $order; do
			rps=$(run "$name" "${port[$name-$side]}")
			results[$name-$side]="${results[$name-$side]:-} $rps"
			echo "round $round: $name $side: $rps req/s" >&2
		done
	done
done

ratios() { # key1 key2 -> per-round key1/key2
	per_round_ratios "${results[$1]}" "${results[$2]}"
}
printf '\n%d rounds x %ss, wrk -t%s -c%s, %s cores, load average %s\n' "$ROUNDS" "$DURATION" "$THREADS" "$CONNS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-12s %12s %12s  %-34s %s\n' request "off req/s" "on req/s" "on/off (median of per-round ratios)" "per-round ratios"
for name in "${names[@]}"; do
	printf '%-12s %12.0f %12.0f  %-34.3f %s\n' "$name" "$(median <<<"${results[$name-off]}")" "$(median <<<"${results[$name-on]}")" \
		"$(median <<<"$(ratios "$name-on" "$name-off")")" "$(ratios "$name-on" "$name-off")"
done
