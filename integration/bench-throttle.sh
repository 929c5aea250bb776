#!/usr/bin/env bash
# bench-throttle.sh: throttle's end-to-end cost, measured with wrk on
# loopback in one run, side by side:
#   caddy respond                      (baseline)
#   caddy throttle(memory) + respond   (limit never hit)
#   caddy throttle(redis)  + respond   (limit never hit, real redis-server)
#   nginx return 200                   (peer baseline)
#   nginx limit_req + return 200       (peer, limit never hit)
# Each configuration is measured ROUNDS times, interleaved; the table shows
# the median requests/s and, for each comparison, the median of the ratios
# taken within a round (paired, so a machine whose load drifts between
# rounds skews both sides alike). Usage (from the repository root):
#   integration/bench-throttle.sh [seconds per run, default 3] [rounds, default 7]
# Needs: go, wrk, nginx, redis-server, python3. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-3}
ROUNDS=${2:-7}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
for bin in go wrk nginx redis-server python3; do
	command -v "$bin" >/dev/null || { echo "bench-throttle: $bin not found" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=integration/bench-lib.sh
. integration/bench-lib.sh # from the repository root (cd above)
wait_port() {
	for _ in $(seq 1 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench-throttle: nothing listens on $1" >&2
	exit 1
}

echo "building caddy..." >&2
go build -o "$work/caddy" ./cmd/caddy

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)
wait_port "$redis_port"

p_plain=$(free_port); p_mem=$(free_port); p_redis=$(free_port)
p_nginx=$(free_port); p_nginx_lr=$(free_port)

# A limit that is never hit: wrk's one caller (127.0.0.1) stays far below it.
cat >"$work/Caddyfile" <<CADDY
{
	admin off
	persist_config off
	auto_https off
	log default {
		level ERROR
	}
}
http://127.0.0.1:$p_plain {
	respond "ok"
}
http://127.0.0.1:$p_mem {
	throttle {
		zone bench_mem {
			rate 1000000/s
			burst 1000000
		}
	}
	respond "ok"
}
http://127.0.0.1:$p_redis {
	throttle {
		zone bench_redis {
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
HOME=$work XDG_DATA_HOME=$work/data XDG_CONFIG_HOME=$work/config \
	"$work/caddy" run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy.log" 2>&1 &
pids+=($!)

mkdir -p "$work/nginx/logs"
cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log error;
events { worker_connections 4096; }
http {
	access_log off;
	limit_req_zone \$binary_remote_addr zone=bench:10m rate=1000000r/s;
	server {
		listen 127.0.0.1:$p_nginx;
		location / { default_type text/plain; return 200 "ok"; }
	}
	server {
		listen 127.0.0.1:$p_nginx_lr;
		location / {
			limit_req zone=bench burst=1000000 nodelay;
			default_type text/plain;
			return 200 "ok";
		}
	}
}
NGINX
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' >"$work/nginx.log" 2>&1 &
pids+=($!)

for p in $p_plain $p_mem $p_redis $p_nginx $p_nginx_lr; do wait_port "$p"; done
# Warm up (connections, Redis script cache, Go heap).
for p in $p_plain $p_mem $p_redis $p_nginx $p_nginx_lr; do wrk -t1 -c8 -d1s "http://127.0.0.1:$p/" >/dev/null; done

names=("caddy respond" "caddy throttle memory" "caddy throttle redis" "nginx return" "nginx limit_req")
ports=("$p_plain" "$p_mem" "$p_redis" "$p_nginx" "$p_nginx_lr")
declare -A results
for round in $(seq 1 "$ROUNDS"); do
	for i in "${!ports[@]}"; do
		out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:${ports[$i]}/")
		rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
		non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
		if [[ -n "$non2xx" ]]; then
			echo "bench-throttle: ${names[$i]} answered $non2xx non-2xx responses: the limit was hit" >&2
			exit 1
		fi
		results[$i]="${results[$i]:-} $rps"
		echo "round $round: ${names[$i]}: $rps req/s" >&2
	done
done

# ratios A B: per-round A/B, space separated.
ratios() {
	paste <(tr ' ' '\n' <<<"${results[$1]}" | grep -v '^$') <(tr ' ' '\n' <<<"${results[$2]}" | grep -v '^$') |
		awk '{printf "%s ", $1/$2}'
}
mem_vs_plain=$(median <<<"$(ratios 1 0)")
redis_vs_mem=$(median <<<"$(ratios 2 1)")
redis_vs_plain=$(median <<<"$(ratios 2 0)")
lr_vs_nginx=$(median <<<"$(ratios 4 3)")
printf '\n%d rounds x %ss, wrk -t%s -c%s, %s cores, load average %s\n' "$ROUNDS" "$DURATION" "$THREADS" "$CONNS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-24s %12s  %s\n' configuration "req/s (med)" "median of per-round ratios"
for i in "${!names[@]}"; do
	case $i in
	0) rel="baseline" ;;
	1) rel=$(awk -v r="$mem_vs_plain" 'BEGIN {printf "%.3f x caddy respond (overhead %.1f%%)", r, (1-r)*100}') ;;
	2) rel=$(awk -v r="$redis_vs_mem" -v p="$redis_vs_plain" 'BEGIN {printf "%.3f x memory store (%.3f x caddy respond)", r, p}') ;;
	3) rel="baseline (peer)" ;;
	4) rel=$(awk -v r="$lr_vs_nginx" 'BEGIN {printf "%.3f x nginx return (overhead %.1f%%)", r, (1-r)*100}') ;;
	esac
	printf '%-24s %12.0f  %s\n' "${names[$i]}" "$(median <<<"${results[$i]}")" "$rel"
done
