#!/usr/bin/env bash
# bench-ab.sh: two Caddy builds side by side on the request paths of
# client_ip and throttle, end to end with wrk on loopback, in one run.
# Each configuration is served by both builds at once (one process each, same
# Caddyfile, own ports); every round measures A then B, then B then A in the
# next round, and the table gives the median of the per-round ratios A/B, so
# a machine whose load drifts skews both sides alike.
#
#   CADDY_BIN_B=/path/to/main/caddy integration/bench-ab.sh [seconds, default 3] [rounds, default 7]
#   CADDY_BIN=/path/to/caddy ...      # A; default: ./cmd/caddy built here
#
# Configurations (the limit is never hit; wrk's one caller is 127.0.0.1):
#   respond                  plain Caddy, the floor
#   client_ip                client_ip (X-Forwarded-For through a trusted edge, 3 hops) + respond
#   client_ip+throttle       the same, then throttle (memory store, one zone, headers on)
#   throttle charge_on       throttle (memory) with charge_on status 401, answered 200 (every charge given back)
#   throttle redis           throttle on a real redis-server
# Needs: go, wrk, redis-server, python3. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-3}
ROUNDS=${2:-7}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
[ -n "${CADDY_BIN_B:-}" ] || { echo "bench-ab: set CADDY_BIN_B to the build to compare with" >&2; exit 1; }
# shellcheck source=integration/bench-lib.sh
. integration/bench-lib.sh
bench_start bench-ab wrk redis-server python3 go

caddy_binary "$PWD" "$WORK/caddy-a"
cp "$CADDY_BIN_B" "$WORK/caddy-b"

wait_port() {
	for _ in $(seq 1 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench-ab: nothing listens on $1" >&2
	exit 1
}

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
wait_port "$redis_port"

names=("respond" "client_ip" "client_ip+throttle" "throttle charge_on" "throttle redis")
declare -A port
for side in a b; do
	for i in "${!names[@]}"; do port[$side$i]=$(free_port); done
	cat >"$WORK/Caddyfile-$side" <<CADDY
{
	admin off
	persist_config off
	auto_https off
	log default {
		level ERROR
	}
}
http://127.0.0.1:${port[${side}0]} {
	respond "ok"
}
http://127.0.0.1:${port[${side}1]} {
	client_ip {
		trusted_proxies 127.0.0.0/8 10.0.0.0/8
		hops 3
	}
	respond "ok"
}
http://127.0.0.1:${port[${side}2]} {
	client_ip {
		trusted_proxies 127.0.0.0/8 10.0.0.0/8
		hops 3
	}
	throttle {
		zone bench {
			rate 1000000/s
			burst 1000000
		}
	}
	respond "ok"
}
http://127.0.0.1:${port[${side}3]} {
	throttle {
		zone bench_charge {
			rate 1000000/s
			burst 1000000
			charge_on status 401
		}
	}
	respond "ok"
}
http://127.0.0.1:${port[${side}4]} {
	throttle {
		zone bench_redis_$side {
			rate 1000000/s
			burst 1000000
		}
		store redis {
			address 127.0.0.1:$redis_port
		}
	}
	respond "ok"
}
CADDY
	mkdir -p "$WORK/home-$side"
	HOME=$WORK/home-$side XDG_DATA_HOME=$WORK/home-$side/data XDG_CONFIG_HOME=$WORK/home-$side/config \
		"$WORK/caddy-$side" run --config "$WORK/Caddyfile-$side" --adapter caddyfile >"$WORK/caddy-$side.log" 2>&1 &
	PIDS+=($!)
done
for p in "${port[@]}"; do wait_port "$p"; done

# The client_ip rows carry a 3-hop chain through the trusted edge.
cat >"$WORK/xff.lua" <<'LUA'
wrk.headers["X-Forwarded-For"] = "203.0.113.7, 10.1.1.1, 10.2.2.2"
LUA
run() { # port -> req/s
	wrk_rps bench-ab -t"$THREADS" -c"$CONNS" -d"${DURATION}s" -s "$WORK/xff.lua" "http://127.0.0.1:$1/"
}
for p in "${port[@]}"; do wrk -t1 -c8 -d1s -s "$WORK/xff.lua" "http://127.0.0.1:$p/" >/dev/null; done

declare -A results
for round in $(seq 1 "$ROUNDS"); do
	order="a b"
	((round % 2 == 0)) && order="b a"
	for i in "${!names[@]}"; do
		for side in $order; do
			rps=$(run "${port[$side$i]}")
			results[$side$i]="${results[$side$i]:-} $rps"
			echo "round $round: ${names[$i]} $side: $rps req/s" >&2
		done
	done
done

ratios() { # key1 key2 -> per-round key1/key2
	per_round_ratios "${results[$1]}" "${results[$2]}"
}
printf '\nA = %s, B = %s\n' "${CADDY_BIN:-./cmd/caddy}" "$CADDY_BIN_B"
printf '%d rounds x %ss, wrk -t%s -c%s, %s cores, load average %s\n' "$ROUNDS" "$DURATION" "$THREADS" "$CONNS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %12s %12s  %s\n' configuration "A req/s" "B req/s" "A/B (median of per-round ratios)"
for i in "${!names[@]}"; do
	ab=$(median <<<"$(ratios "a$i" "b$i")")
	printf '%-22s %12.0f %12.0f  %.3f\n' "${names[$i]}" "$(median <<<"${results[a$i]}")" "$(median <<<"${results[b$i]}")" "$ab"
done
