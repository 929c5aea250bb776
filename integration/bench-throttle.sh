#!/usr/bin/env bash
# bench-throttle.sh: throttle's end-to-end cost, measured with wrk on
# loopback in one run, side by side:
#   caddy respond                      (baseline)
#   caddy throttle(memory) + respond   (limit never hit)
#   caddy throttle(redis)  + respond   (limit never hit, real redis-server)
#   caddy throttle(redis cluster)      (3-master Redis Cluster on loopback)
#   caddy throttle(redis tls)          (TLS-only redis-server, store's tls { ca })
#   nginx return 200                   (peer baseline)
#   nginx limit_req + return 200       (peer, limit never hit)
# Each configuration is measured ROUNDS times, interleaved; the table shows
# the median requests/s and, for each comparison, the median of the ratios
# taken within a round (paired, so a machine whose load drifts between
# rounds skews both sides alike). Usage (from the repository root):
#   integration/bench-throttle.sh [seconds per run, default 3] [rounds, default 7]
# Needs: go, wrk, nginx, redis-server, redis-cli, openssl, python3
# (Debian: redis-server, redis-tools, openssl). Not part of `go test`.
# wrk's one caller here is one key; for issue 27's configuration (client_ip,
# random callers, headers on and off) in two builds side by side, with the
# CPU each request costs, see integration/bench-throttle-ab.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-3}
ROUNDS=${2:-7}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
for bin in go wrk nginx redis-server redis-cli openssl python3; do
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

# A 3-master Redis Cluster: each node its own port and bus port, slots split
# in three, joined by CLUSTER MEET (with the bus port: not port+10000 here);
# bounded wait for cluster_state:ok. ADDSLOTSRANGE and --cluster-port: Redis 7.
cluster_ports=()
cluster_bus=()
for n in 1 2 3; do
	cp=$(free_port)
	bp=$(free_port)
	cluster_ports+=("$cp")
	cluster_bus+=("$bp")
	redis-server --port "$cp" --cluster-port "$bp" --bind 127.0.0.1 --cluster-enabled yes \
		--cluster-config-file "$work/cluster-$n.conf" --dir "$work" --save '' --appendonly no \
		--daemonize no >"$work/redis-cluster-$n.log" 2>&1 &
	pids+=($!)
done
for cp in "${cluster_ports[@]}"; do wait_port "$cp"; done
ranges=("0 5460" "5461 10922" "10923 16383")
for n in 0 1 2; do
	# shellcheck disable=SC2086 # the range is two words
	redis-cli -h 127.0.0.1 -p "${cluster_ports[$n]}" CLUSTER ADDSLOTSRANGE ${ranges[$n]} >/dev/null
done
for n in 1 2; do
	redis-cli -h 127.0.0.1 -p "${cluster_ports[0]}" CLUSTER MEET 127.0.0.1 "${cluster_ports[$n]}" "${cluster_bus[$n]}" >/dev/null
done
cluster_ok() {
	local cp
	for cp in "${cluster_ports[@]}"; do
		redis-cli -h 127.0.0.1 -p "$cp" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
	done
}
for try in $(seq 1 300); do
	cluster_ok && break
	if [[ $try == 300 ]]; then
		echo "bench-throttle: the Redis Cluster is not ok after 30s" >&2
		exit 1
	fi
	sleep 0.1
done

# A TLS-only redis-server, its certificate (IP 127.0.0.1) signed by a CA made here.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=bench-throttle CA' \
	-keyout "$work/ca-key.pem" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj '/CN=127.0.0.1' \
	-keyout "$work/redis-key.pem" -out "$work/redis.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/redis-ext.cnf"
openssl x509 -req -in "$work/redis.csr" -CA "$work/ca.pem" -CAkey "$work/ca-key.pem" \
	-CAcreateserial -days 2 -extfile "$work/redis-ext.cnf" -out "$work/redis.pem" 2>/dev/null
redis_tls_port=$(free_port)
redis-server --port 0 --tls-port "$redis_tls_port" --bind 127.0.0.1 \
	--tls-cert-file "$work/redis.pem" --tls-key-file "$work/redis-key.pem" \
	--tls-ca-cert-file "$work/ca.pem" --tls-auth-clients no \
	--save '' --appendonly no --daemonize no >"$work/redis-tls.log" 2>&1 &
pids+=($!)
wait_port "$redis_tls_port"

p_plain=$(free_port); p_mem=$(free_port); p_redis=$(free_port)
p_cluster=$(free_port); p_tls=$(free_port)
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
http://127.0.0.1:$p_cluster {
	throttle {
		zone bench_cluster {
			rate 1000000/s
			burst 1000000
		}
		store redis {
			address 127.0.0.1:${cluster_ports[0]}
		}
	}
	respond "ok"
}
http://127.0.0.1:$p_tls {
	throttle {
		zone bench_tls {
			rate 1000000/s
			burst 1000000
		}
		store redis {
			address 127.0.0.1:$redis_tls_port
			tls {
				ca $work/ca.pem
			}
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

names=("caddy respond" "caddy throttle memory" "caddy throttle redis" "caddy throttle redis cluster"
	"caddy throttle redis tls" "nginx return" "nginx limit_req")
ports=("$p_plain" "$p_mem" "$p_redis" "$p_cluster" "$p_tls" "$p_nginx" "$p_nginx_lr")
for p in "${ports[@]}"; do wait_port "$p"; done
# Warm up (connections, Redis script cache, Go heap).
for p in "${ports[@]}"; do wrk -t1 -c8 -d1s "http://127.0.0.1:$p/" >/dev/null; done

# The stores allow on errors (on_error allow), so a store that cannot connect
# would be measured as no store at all: each must have run the script.
script_calls() { # redis-cli arguments...
	redis-cli "$@" INFO commandstats | tr -d '\r' |
		awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ {n += $3} END {print n + 0}'
}
check_store() { # name calls
	if [[ $2 == 0 ]]; then
		echo "bench-throttle: the $1 store ran no script; caddy's log:" >&2
		tail -5 "$work/caddy.log" >&2
		exit 1
	fi
}
check_store "redis" "$(script_calls -h 127.0.0.1 -p "$redis_port")"
calls=0
for cp in "${cluster_ports[@]}"; do calls=$((calls + $(script_calls -h 127.0.0.1 -p "$cp"))); done
check_store "redis cluster" "$calls"
check_store "redis tls" "$(script_calls --tls --cacert "$work/ca.pem" -h 127.0.0.1 -p "$redis_tls_port")"

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
cluster_vs_redis=$(median <<<"$(ratios 3 2)")
tls_vs_redis=$(median <<<"$(ratios 4 2)")
lr_vs_nginx=$(median <<<"$(ratios 6 5)")
printf '\n%d rounds x %ss, wrk -t%s -c%s, %s cores, load average %s\n' "$ROUNDS" "$DURATION" "$THREADS" "$CONNS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-30s %12s  %s\n' configuration "req/s (med)" "median of per-round ratios"
for i in "${!names[@]}"; do
	case $i in
	0) rel="baseline" ;;
	1) rel=$(awk -v r="$mem_vs_plain" 'BEGIN {printf "%.3f x caddy respond (overhead %.1f%%)", r, (1-r)*100}') ;;
	2) rel=$(awk -v r="$redis_vs_mem" -v p="$redis_vs_plain" 'BEGIN {printf "%.3f x memory store (%.3f x caddy respond)", r, p}') ;;
	3) rel=$(awk -v r="$cluster_vs_redis" 'BEGIN {printf "%.3f x redis single (redis cluster / redis single)", r}') ;;
	4) rel=$(awk -v r="$tls_vs_redis" 'BEGIN {printf "%.3f x redis plain (redis tls / redis plain)", r}') ;;
	5) rel="baseline (peer)" ;;
	6) rel=$(awk -v r="$lr_vs_nginx" 'BEGIN {printf "%.3f x nginx return (overhead %.1f%%)", r, (1-r)*100}') ;;
	esac
	printf '%-30s %12.0f  %s\n' "${names[$i]}" "$(median <<<"${results[$i]}")" "$rel"
done
