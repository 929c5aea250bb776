#!/usr/bin/env bash
# bench-throttle-ab.sh: throttle's end-to-end cost in two Caddy builds (A =
# CADDY_BIN, B = CADDY_BIN_B) side by side, in issue 27's configuration:
# client_ip (X-Forwarded-For through a trusted edge, 3 hops) + respond, and
# the same with throttle (one zone, memory store, headers on), with
# headers off, and with the store on a real redis-server; wrk's callers are
# random addresses (a new key almost every request; the limit is never hit).
#
#   CADDY_BIN_B=/path/to/main/caddy integration/bench-throttle-ab.sh [seconds, default 3] [rounds, default 7]
#   CADDY_BIN=/path/to/caddy ...   # A; default: ./cmd/caddy built here
#
# Every round measures each row on A then B (B then A the next round). For
# each run it records requests/s and the CPU the Caddy process (and, for
# the Redis row, redis-server) used per request, from /proc: on a machine
# shared with other jobs, requests/s follows how much of the cores Caddy
# was given, CPU per request much less so. The table gives medians and the
# median of per-round ratios: A/B, and within each build each throttle row
# against client_ip (redis against memory), as requests/s and as the CPU a
# request costs (the ratio a CPU-bound Caddy would see; for Redis the
# redis-server's CPU counts with Caddy's).
# Needs: go, wrk, redis-server, curl, python3. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-3}
ROUNDS=${2:-7}
[ -n "${CADDY_BIN_B:-}" ] || { echo "bench-throttle-ab: set CADDY_BIN_B to the build to compare with" >&2; exit 1; }
# shellcheck source=integration/bench-lib.sh
. integration/bench-lib.sh
bench_start bench-throttle-ab wrk redis-server curl python3 go
caddy_binary "$PWD" "$WORK/caddy-a"
cp "$CADDY_BIN_B" "$WORK/caddy-b"

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
redis_pid=$!

names=(client_ip throttle throttle_noheaders throttle_redis)
clientip=$'\tclient_ip {\n\t\ttrusted_proxies 127.0.0.0/8 10.0.0.0/8\n\t\thops 3\n\t}'
zone() { printf '\t\tzone %s {\n\t\t\trate 1000000/s\n\t\t\tburst 1000000\n\t\t}\n' "$1"; }
declare -A port caddy_pid
for side in a b; do
	for i in "${!names[@]}"; do port[$side$i]=$(free_port); done
	site() { printf 'http://127.0.0.1:%s {\n%s\n%s\trespond "ok"\n}\n' "${port[$side$1]}" "$clientip" "$2"; }
	{
		caddy_global off "$WORK/data-$side" | sed 's/^}$/\tlog default {\n\t\tlevel ERROR\n\t}\n}/'
		site 0 ""
		site 1 $'\tthrottle {\n'"$(zone "bench_$side")"$'\n\t}\n'
		site 2 $'\tthrottle {\n'"$(zone "bench_noheaders_$side")"$'\n\t\theaders off\n\t}\n'
		site 3 $'\tthrottle {\n'"$(zone "bench_redis_$side")"$'\n\t\tstore redis {\n\t\t\taddress 127.0.0.1:'"$redis_port"$'\n\t\t}\n\t}\n'
	} >"$WORK/Caddyfile-$side"
	mkdir -p "$WORK/home-$side"
	HOME=$WORK/home-$side XDG_DATA_HOME=$WORK/home-$side/data XDG_CONFIG_HOME=$WORK/home-$side/config \
		"$WORK/caddy-$side" run --config "$WORK/Caddyfile-$side" --adapter caddyfile >"$WORK/caddy-$side.log" 2>&1 &
	PIDS+=($!)
	caddy_pid[$side]=$!
done
wait_ready / "${port[@]}"

cat >"$WORK/callers.lua" <<'LUA'
math.randomseed(os.time())
request = function()
	local ip = math.random(1, 223) .. "." .. math.random(0, 255) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254)
	wrk.headers["X-Forwarded-For"] = ip .. ", 10.1.1.1, 10.2.2.2"
	return wrk.format(nil)
end
LUA
for side in a b; do
	# Each row must answer as configured: RateLimit but with headers off,
	# and the Redis row must have asked Redis (on_error allow would hide a
	# store that never connected).
	for i in "${!names[@]}"; do
		hdr=$(curl -fs -o /dev/null -D - -H 'X-Forwarded-For: 192.0.2.1, 10.1.1.1, 10.2.2.2' "http://127.0.0.1:${port[$side$i]}/" | tr -d '\r')
		want=1
		[[ $i == 0 || $i == 2 ]] && want=0
		if [[ $(grep -ci '^ratelimit:' <<<"$hdr") != "$want" ]]; then
			echo "bench-throttle-ab: ${names[$i]} on $side: RateLimit field count is not $want" >&2
			exit 1
		fi
	done
	wrk -t1 -c8 -d1s -s "$WORK/callers.lua" "http://127.0.0.1:${port[${side}3]}/" >/dev/null
done
for p in "${port[@]}"; do wrk -t1 -c8 -d1s -s "$WORK/callers.lua" "http://127.0.0.1:$p/" >/dev/null; done # warm up
scripts=$(redis-cli -p "$redis_port" INFO commandstats 2>/dev/null | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_eval(sha)?:/ {n += $3} END {print n + 0}')
if [[ $scripts == 0 ]]; then
	echo "bench-throttle-ab: the Redis rows ran no script" >&2
	exit 1
fi

tck=$(getconf CLK_TCK)
out="$WORK/results.txt"
: >"$out"
for round in $(seq 1 "$ROUNDS"); do
	order="a b"
	((round % 2 == 0)) && order="b a"
	for i in "${!names[@]}"; do
		for side in $order; do
			c0=$(cpu_ticks "${caddy_pid[$side]}")
			r0=$(cpu_ticks "$redis_pid")
			res=$(wrk -t2 -c64 -d"${DURATION}s" -s "$WORK/callers.lua" "http://127.0.0.1:${port[$side$i]}/")
			c1=$(cpu_ticks "${caddy_pid[$side]}")
			r1=$(cpu_ticks "$redis_pid")
			if grep -q 'Non-2xx\|Socket errors' <<<"$res"; then
				echo "bench-throttle-ab: ${names[$i]} on $side: $(grep -E 'Non-2xx|Socket errors' <<<"$res")" >&2
				exit 1
			fi
			n=$(awk '/requests in/ {print $1}' <<<"$res")
			rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$res")
			echo "$round $side $i $rps $(((c1 - c0))) $(((r1 - r0))) $n" >>"$out"
		done
	done
	echo "round $round: $(awk -v r="$round" '$1 == r {printf "%s%s %.0f  ", $2, $3, $4}' "$out")" >&2
done

python3 - "$out" "$tck" "${CADDY_BIN:-./cmd/caddy (built here)}" "$CADDY_BIN_B" "$ROUNDS" "$DURATION" "$(cut -d' ' -f1-3 /proc/loadavg)" "${names[@]}" <<'PY'
import statistics, sys
path, tck, a_name, b_name, rounds, dur, load, *names = sys.argv[1:]
tck = float(tck)
runs = {}
for line in open(path):
    rnd, side, i, rps, cticks, rticks, n = line.split()
    cpu = float(cticks) / tck * 1e6 / int(n)        # Caddy µs per request
    rcpu = float(rticks) / tck * 1e6 / int(n)       # redis-server µs per request
    runs[(int(rnd), side, int(i))] = (float(rps), cpu, rcpu)
R = sorted({k[0] for k in runs})
med = statistics.median
def ratio(f, k1, k2):
    return med(f(runs[(r,) + k1]) / f(runs[(r,) + k2]) for r in R)
rps = lambda v: v[0]
inv_cpu = lambda v: 1 / (v[1] + (v[2] if v[2] > 0 else 0))
print(f"\nA = {a_name}\nB = {b_name}")
print(f"{rounds} rounds x {dur}s, wrk -t2 -c64, random callers, load average {load}")
print("| row | A req/s | B req/s | A/B req/s | A µs CPU/req | B µs CPU/req | A/B by CPU | against | A req/s ratio | B req/s ratio | A by CPU | B by CPU |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
base = {1: 0, 2: 1, 3: 1}
for i, n in enumerate(names):
    a = [runs[(r, "a", i)] for r in R]
    b = [runs[(r, "b", i)] for r in R]
    cpu = lambda v: v[1] + v[2]
    cells = [n, f"{med(x[0] for x in a):.0f}", f"{med(x[0] for x in b):.0f}",
             f"{ratio(rps, ('a', i), ('b', i)):.3f}",
             f"{med(cpu(x) for x in a):.1f}", f"{med(cpu(x) for x in b):.1f}",
             f"{ratio(inv_cpu, ('a', i), ('b', i)):.3f}"]
    if i in base:
        j = base[i]
        cells += [names[j], f"{ratio(rps, ('a', i), ('a', j)):.3f}", f"{ratio(rps, ('b', i), ('b', j)):.3f}",
                  f"{ratio(inv_cpu, ('a', i), ('a', j)):.3f}", f"{ratio(inv_cpu, ('b', i), ('b', j)):.3f}"]
    else:
        cells += [""] * 5
    print("| " + " | ".join(cells) + " |")
print("(µs CPU/req: Caddy's, plus redis-server's on the Redis row; 'by CPU': the inverse ratio of CPU per request)")
PY
