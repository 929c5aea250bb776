#!/usr/bin/env bash
# bench-compare.sh: two Caddy builds (A = CADDY_BIN, B = CADDY_BIN_B) side
# by side on the end-to-end paths of all five modules, with wrk on loopback,
# in one run: what a change costs (or saves) the day it is written.
#
#   CADDY_BIN_B=/path/to/main/caddy integration/bench-compare.sh [seconds, default 3] [rounds, default 5]
#   CADDY_BIN=/path/to/caddy ...        # A; default: ./cmd/caddy built here
#   ONLY='substitute|plain' ...         # only the configurations whose name matches (grep -E)
#
# Each build runs in its own process with the same Caddyfile on its own
# ports. Every round measures each configuration on A then B (B then A in
# the next round), so a machine whose load drifts skews both sides alike;
# the table gives median requests/s and the median of the per-round ratios:
# A/B (the change), and, within A and within B, each module against the
# configuration it is added to (throttle / client_ip, substitute /
# reverse_proxy, redis / memory).
#
# Configurations:
#   respond           plain Caddy, the floor for the rows below it
#   client_ip         client_ip (X-Forwarded-For through a trusted edge, 3 hops) + respond
#   throttle          client_ip + throttle (memory store, one zone, headers on) + respond
#   throttle_redis    the same with the store on a real redis-server
#   reverse_proxy     reverse_proxy to nginx serving the 1 MB rustdoc page
#                     (substitute/internal/engine/testdata/rustc-book.html)
#   substitute        the same with the 10 rules of bench-substitute.sh
#   substitute_gzip   the same, the origin answering gzip (the client asks gzip, gets identity)
#   encode_br         file_server + encode br (quality 5), jquery.min.js
#   dictionary        file_server + encode br + dictionary: dcz against the
#                     previous version of jquery.min.js (a committed
#                     file with edits stands for it), every request compressed
#   throttle_noheaders  throttle as above with headers off (against throttle:
#                     what the RateLimit fields and their HMAC cost)
# The callers of the small-response rows are random addresses (a new
# throttle key almost every request; the limit is never hit).
# Needs: go, wrk, nginx, redis-server, curl, python3. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-3}
ROUNDS=${2:-5}
ONLY=${ONLY:-.}
[ -n "${CADDY_BIN_B:-}" ] || { echo "bench-compare: set CADDY_BIN_B to the build to compare with" >&2; exit 1; }
# shellcheck source=integration/bench-lib.sh
. integration/bench-lib.sh
bench_start bench-compare wrk nginx redis-server curl python3 go

caddy_binary "$PWD" "$WORK/caddy-a"
cp "$CADDY_BIN_B" "$WORK/caddy-b"
PAGE=substitute/internal/engine/testdata/rustc-book.html
SCRIPT=brotli/testdata/corpus/jquery.min.js
mkdir -p "$WORK/www/assets" "$WORK/origin"
cp "$PAGE" "$WORK/www/page.html"
gzip -6 -k "$WORK/www/page.html" # the gzip origin serves it precompressed (gzip_static)
cp "$SCRIPT" "$WORK/www/assets/app.2.js"
# The previous version: the same script with a few edits, as a release is.
sed -e 's/3\.7\.1/3.7.0/g' -e 's/jQuery/jQueri/; s/function/function /20' "$SCRIPT" >"$WORK/www/assets/app.1.js"
chmod -R a+rX "$WORK/www"

wait_port() {
	for _ in $(seq 1 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "bench-compare: nothing listens on $1" >&2
	exit 1
}

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
origin=$(free_port) origin_gz=$(free_port)
cat >"$WORK/origin/nginx.conf" <<NGX
worker_processes 1;
pid $WORK/origin/nginx.pid;
error_log $WORK/origin/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	include /etc/nginx/mime.types;
	client_body_temp_path $WORK/origin; proxy_temp_path $WORK/origin; fastcgi_temp_path $WORK/origin;
	uwsgi_temp_path $WORK/origin; scgi_temp_path $WORK/origin;
	open_file_cache max=16;
	server { listen 127.0.0.1:$origin; root $WORK/www; sendfile on; }
	server { listen 127.0.0.1:$origin_gz; root $WORK/www; gzip_static on; gzip_proxied any; }
}
NGX
nginx -p "$WORK/origin" -c "$WORK/origin/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

names=(respond client_ip throttle throttle_redis reverse_proxy substitute substitute_gzip encode_br dictionary throttle_noheaders)
paths=(/ / / / /page.html /page.html /page.html /assets/app.2.js /assets/app.2.js /)
rules=$(substitute_rules)
declare -A port
for side in a b; do
	for i in "${!names[@]}"; do port[$side$i]=$(free_port); done
	site() { printf 'http://127.0.0.1:%s {\n%s\n}\n' "${port[$side$1]}" "$2"; }
	clientip=$'\tclient_ip {\n\t\ttrusted_proxies 127.0.0.0/8 10.0.0.0/8\n\t\thops 3\n\t}'
	{
		caddy_global off "$WORK/data-$side"
		site 0 $'\trespond "ok"'
		site 1 "$clientip"$'\n\trespond "ok"'
		site 2 "$clientip"$'\n\tthrottle {\n\t\tzone bench {\n\t\t\trate 1000000/s\n\t\t\tburst 1000000\n\t\t}\n\t}\n\trespond "ok"'
		site 3 "$clientip"$'\n\tthrottle {\n\t\tzone bench_redis_'"$side"$' {\n\t\t\trate 1000000/s\n\t\t\tburst 1000000\n\t\t}\n\t\tstore redis {\n\t\t\taddress 127.0.0.1:'"$redis_port"$'\n\t\t}\n\t}\n\trespond "ok"'
		site 4 $'\treverse_proxy 127.0.0.1:'"$origin"
		site 5 $'\tsubstitute {\n'"$rules"$'\n\t}\n\treverse_proxy 127.0.0.1:'"$origin"
		site 6 $'\tsubstitute {\n'"$rules"$'\n\t}\n\treverse_proxy 127.0.0.1:'"$origin_gz"
		site 7 $'\tencode br\n\troot * '"$WORK/www"$'\n\tfile_server'
		site 8 $'\tencode br\n\tdictionary {\n\t\tmatch /assets/app.*.js\n\t\tdelta_cache_size off\n\t\tencodings dcz\n\t}\n\troot * '"$WORK/www"$'\n\tfile_server'
		site 9 "$clientip"$'\n\tthrottle {\n\t\tzone bench_noheaders {\n\t\t\trate 1000000/s\n\t\t\tburst 1000000\n\t\t}\n\t\theaders off\n\t}\n\trespond "ok"'
	} >"$WORK/Caddyfile-$side"
	sed -i 's/^\tadmin off$/\tadmin off\n\tlog default {\n\t\tlevel ERROR\n\t}/' "$WORK/Caddyfile-$side"
	mkdir -p "$WORK/home-$side"
	HOME=$WORK/home-$side XDG_DATA_HOME=$WORK/home-$side/data XDG_CONFIG_HOME=$WORK/home-$side/config \
		"$WORK/caddy-$side" run --config "$WORK/Caddyfile-$side" --adapter caddyfile >"$WORK/caddy-$side.log" 2>&1 &
	PIDS+=($!)
done
wait_port "$redis_port"
wait_port "$origin"
# The gzip origin must answer gzip to Caddy's requests (nginx's gzip_proxied
# off would answer identity to any request with Via, which Caddy sends).
for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$origin_gz/page.html" && break; sleep 0.1; done
curl -fs -o /dev/null -D - -H 'Accept-Encoding: gzip' -H 'Via: 1.1 Caddy' "http://127.0.0.1:$origin_gz/page.html" | grep -qi '^content-encoding: gzip' ||
	{ echo "$0: the gzip origin does not answer gzip" >&2; exit 1; }
for p in "${port[@]}"; do wait_port "$p"; done

# Each row's request headers, as wrk Lua: random callers behind a 3-hop
# chain for the small responses; a browser's Accept-Encoding for the rest.
cat >"$WORK/callers.lua" <<'LUA'
math.randomseed(os.time())
request = function()
	local ip = math.random(1, 223) .. "." .. math.random(0, 255) .. "." .. math.random(0, 255) .. "." .. math.random(1, 254)
	wrk.headers["X-Forwarded-For"] = ip .. ", 10.1.1.1, 10.2.2.2"
	return wrk.format(nil)
end
LUA
avail=$(python3 -c 'import base64,hashlib,sys; print(":"+base64.b64encode(hashlib.sha256(open(sys.argv[1],"rb").read()).digest()).decode()+":")' "$WORK/www/assets/app.1.js")
printf 'wrk.headers["Accept-Encoding"] = "gzip, deflate, br, zstd"\n' >"$WORK/page.lua"
printf 'wrk.headers["Accept-Encoding"] = "gzip, deflate, br, zstd, dcb, dcz"\nwrk.headers["Available-Dictionary"] = "%s"\nwrk.headers["Sec-Fetch-Dest"] = "script"\nwrk.headers["Sec-Fetch-Site"] = "same-origin"\n' "$avail" >"$WORK/dict.lua"
luas=(callers callers callers callers page page page page dict callers)
conns=(64 64 64 64 16 16 16 16 16 64)
# What each row must answer with (Content-Encoding), checked once per side.
want_enc=("" "" "" "" "" "" "" br dcz "")

for side in a b; do
	# The dictionary: the previous version, marked and stored by a first fetch.
	curl -fs -o /dev/null -H 'Accept-Encoding: gzip, br' -H 'Sec-Fetch-Dest: script' "http://127.0.0.1:${port[${side}8]}/assets/app.1.js"
	for i in "${!names[@]}"; do
		got=""
		for _ in $(seq 50); do
			hdrs=(-H 'Accept-Encoding: gzip, deflate, br, zstd')
			[ "${luas[$i]}" = dict ] && hdrs=(-H 'Accept-Encoding: gzip, br, dcz' -H "Available-Dictionary: $avail" -H 'Sec-Fetch-Dest: script' -H 'Sec-Fetch-Site: same-origin')
			got=$(curl -fs -o "$WORK/body" -D - "${hdrs[@]}" "http://127.0.0.1:${port[$side$i]}${paths[$i]}" |
				tr -d '\r' | awk -F': ' 'tolower($1) == "content-encoding" {print $2}')
			[ "$got" = "${want_enc[$i]}" ] && break
			sleep 0.1 # the stored dictionary may take a moment
		done
		if [ "$got" != "${want_enc[$i]}" ]; then
			echo "bench-compare: ${names[$i]} on $side answered Content-Encoding '$got', want '${want_enc[$i]}'" >&2
			exit 1
		fi
	done
	grep -q RUSTC <(curl -fs "http://127.0.0.1:${port[${side}5]}/page.html") ||
		{ echo "bench-compare: substitute on $side did not substitute" >&2; exit 1; }
done

run() { # row side -> req/s
	local out
	out=$(wrk -t2 -c"${conns[$1]}" -d"${DURATION}s" -s "$WORK/${luas[$1]}.lua" "http://127.0.0.1:${port[$2$1]}${paths[$1]}")
	if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
		echo "bench-compare: ${names[$1]} on $2: $(grep -E 'Non-2xx|Socket errors' <<<"$out")" >&2
		exit 1
	fi
	awk '/^Requests\/sec/ {print $2}' <<<"$out"
}
rows=()
for i in "${!names[@]}"; do grep -Eq "$ONLY" <<<"${names[$i]}" && rows+=("$i"); done
for i in "${rows[@]}"; do # warm up: pools, connections, the memo
	for side in a b; do wrk -t1 -c8 -d1s -s "$WORK/${luas[$i]}.lua" "http://127.0.0.1:${port[$side$i]}${paths[$i]}" >/dev/null; done
done

declare -A results
for round in $(seq 1 "$ROUNDS"); do
	order="a b"
	((round % 2 == 0)) && order="b a"
	for i in "${rows[@]}"; do
		for side in $order; do
			rps=$(run "$i" "$side")
			results[$side$i]="${results[$side$i]:-} $rps"
		done
	done
	line="round $round:"
	for i in "${rows[@]}"; do line+=" ${names[$i]} $(awk '{print $NF}' <<<"${results[a$i]}")/$(awk '{print $NF}' <<<"${results[b$i]}")"; done
	echo "$line" >&2
done

ratio() { # key1 key2 -> median of per-round key1/key2, or - when either was not run
	[ -n "${results[$1]:-}" ] && [ -n "${results[$2]:-}" ] || { echo -; return; }
	paste <(tr ' ' '\n' <<<"${results[$1]}" | grep -v '^$') <(tr ' ' '\n' <<<"${results[$2]}" | grep -v '^$') |
		awk '{print $1/$2}' | median | awk '{printf "%.3f", $1}'
}
# base[i]: the row that row i adds a module to.
base=(- 0 1 2 - 4 4 - 7 2)
printf '\nA = %s\nB = %s\n' "${CADDY_BIN:-./cmd/caddy (built here)}" "$CADDY_BIN_B"
printf '%d rounds x %ss, wrk -t2, %s cores, load average %s\n' "$ROUNDS" "$DURATION" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %10s %10s %7s  %-14s %7s %7s\n' configuration "A req/s" "B req/s" "A/B" "against" "A" "B"
for i in "${rows[@]}"; do
	b=${base[$i]} against="" ra="" rb=""
	if [ "$b" != - ]; then
		against=${names[$b]}
		ra=$(ratio "a$i" "a$b") rb=$(ratio "b$i" "b$b")
	fi
	printf '%-16s %10.0f %10.0f %7s  %-14s %7s %7s\n' "${names[$i]}" "$(median <<<"${results[a$i]}")" \
		"$(median <<<"${results[b$i]}")" "$(ratio "a$i" "b$i")" "$against" "$ra" "$rb"
done
