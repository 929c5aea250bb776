#!/usr/bin/env bash
# bench-dict.sh: what a deploy costs with Compression Dictionary Transport
# (the dictionary module, RFC 9842) against encode br, on real releases
# from the npm registry, and what compressing against a dictionary costs
# the server per request against encode br q5.
#
# Usage: integration/bench-dict.sh
# Environment:
#   DURATION=5s     wrk duration per round
#   ROUNDS=3        rounds, alternating the two Caddys
#   CONNECTIONS=16  wrk connections (one wrk thread)
#   PAIR=react-dom-18.2.0:react-dom-18.3.1   the deploy wrk requests
#   DICT_CACHE=~/.cache/edgekit-dict          where npm packs are kept
#                   between runs (outside the repository)
#
# Prints:
#  1. per pair of consecutive releases, the bytes of the new release as
#     identity, br q5, br q11, dcz and dcb against the old release (Go
#     encoders, every body decoded again: TestDeployBytes in dictionary/),
#  2. the same deploy through a real Caddy (curl: mark the old release,
#     then fetch the new one naming it in Available-Dictionary), for br q5,
#     dcz and dcb,
#  3. requests/s and requests per CPU-second of Caddy with encode br (q5)
#     and of Caddy compressing against the dictionary (dcz, delta cache
#     off, so every request is compressed), for the new release of PAIR.
# Needs: go, npm, wrk, curl, python3, bc. Everything listens on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
. integration/bench-lib.sh

duration=${DURATION:-5s}
rounds=${ROUNDS:-3}
connections=${CONNECTIONS:-16}
pair=${PAIR:-react-dom-18.2.0:react-dom-18.3.1}
cache=${DICT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgekit-dict}
bench_start bench-dict go npm wrk curl python3 bc

# --- corpus: name-version:file inside the package ----------------------------
releases=(
	react-dom@18.2.0:umd/react-dom.production.min.js react-dom@18.3.1:umd/react-dom.production.min.js
	three@0.151.0:build/three.min.js three@0.152.0:build/three.min.js
	vue@3.4.37:dist/vue.global.prod.js vue@3.4.38:dist/vue.global.prod.js
	lodash@4.17.20:lodash.min.js lodash@4.17.21:lodash.min.js
	bootstrap@5.3.2:dist/js/bootstrap.bundle.min.js bootstrap@5.3.3:dist/js/bootstrap.bundle.min.js
	jquery@3.7.0:dist/jquery.min.js jquery@3.7.1:dist/jquery.min.js
	d3@7.8.5:dist/d3.min.js d3@7.9.0:dist/d3.min.js
	chart.js@4.4.3:dist/chart.umd.js chart.js@4.4.4:dist/chart.umd.js
)
mkdir -p "$cache/npm" "$cache/files"
pairs=()
for ((i = 0; i < ${#releases[@]}; i += 2)); do
	names=()
	for spec in "${releases[i]}" "${releases[i + 1]}"; do
		pkg=${spec%%:*} path=${spec#*:}
		name=${pkg/@/-}
		if [[ ! -s $cache/files/$name.js ]]; then
			tgz=$(cd "$cache/npm" && timeout 90 npm pack --silent "$pkg" | tail -1)
			tar -xzOf "$cache/npm/$tgz" "package/$path" >"$cache/files/$name.js"
		fi
		names+=("$name")
	done
	pairs+=("${names[0]}:${names[1]}")
done
corpus=$WORK/assets
mkdir -p "$corpus"
cp "$cache"/files/*.js "$corpus/"
chmod 644 "$corpus"/*

echo "== deploy bytes, Go encoders (go test -run TestDeployBytes ./dictionary/)"
EDGEKIT_DICT_CORPUS=$cache/files EDGEKIT_DICT_PAIRS="${pairs[*]}" \
	go test -count=1 -run '^TestDeployBytes$' -v ./dictionary/ | sed -n 's/^        //p' | grep '^|'

# --- two Caddys: encode br q5 alone, and encode br + dictionary --------------
echo "building Caddy (./cmd/caddy)..." >&2
caddy_binary "$PWD" "$WORK/caddy"
br_port=$(free_port) dict_port=$(free_port)
start_caddy() { # name port site-body
	mkdir -p "$WORK/$1"
	{ caddy_global off "$WORK/$1/data"; printf 'http://127.0.0.1:%s {\n%s\n}\n' "$2" "$3"; } >"$WORK/$1/Caddyfile"
	HOME=$WORK/$1 XDG_DATA_HOME=$WORK/$1 XDG_CONFIG_HOME=$WORK/$1 \
		"$WORK/caddy" run --config "$WORK/$1/Caddyfile" --adapter caddyfile >"$WORK/$1/log" 2>&1 &
	PIDS+=($!)
}
start_caddy br "$br_port" "	encode br
	root * $WORK
	file_server"
start_caddy dict "$dict_port" "	encode br
	dictionary {
		match /assets/*.js
		max_size 4MiB
		delta_cache_size ${DELTA_CACHE:-off}
		encodings dcz dcb
	}
	root * $WORK
	file_server"
first=${pair%%:*}
wait_ready "/assets/$first.js" "$br_port" "$dict_port"

avail() { python3 -c 'import base64,hashlib,sys; print(":"+base64.b64encode(hashlib.sha256(open(sys.argv[1],"rb").read()).digest()).decode()+":")' "$1"; }
fetch() { # port file accept-encoding want-encoding [available-dictionary]: prints bytes on the wire
	local extra=()
	[[ -n ${5:-} ]] && extra=(-H "Available-Dictionary: $5")
	curl -fs -D "$WORK/headers" -o "$WORK/body" -H "Accept-Encoding: $3" -H 'Sec-Fetch-Site: same-origin' \
		-H 'Sec-Fetch-Dest: script' "${extra[@]}" "http://127.0.0.1:$1/assets/$2.js"
	grep -qi "^content-encoding: $4" "$WORK/headers" || { echo "bench-dict: $2 not answered with $4:" >&2; cat "$WORK/headers" >&2; exit 1; }
	wc -c <"$WORK/body"
}

echo
echo "== deploy bytes through Caddy (curl; first the old release, marked, then the new one)"
printf '%-34s %10s %10s %10s %10s %8s %8s\n' deploy identity "br q5" dcz dcb "dcz/br" "dcb/br"
ti=0 tb=0 tz=0 td=0
for p in "${pairs[@]}"; do
	old=${p%%:*} new=${p#*:}
	fetch "$dict_port" "$old" "gzip, br" br >/dev/null # marks and stores the old release
	a=$(avail "$corpus/$old.js")
	id=$(wc -c <"$corpus/$new.js")
	b=$(fetch "$br_port" "$new" "gzip, br" br)
	z=$(fetch "$dict_port" "$new" "gzip, br, dcz" dcz "$a")
	d=$(fetch "$dict_port" "$new" "gzip, br, dcb" dcb "$a")
	ti=$((ti + id)) tb=$((tb + b)) tz=$((tz + z)) td=$((td + d))
	printf '%-34s %10d %10d %10d %10d %7.1f%% %7.1f%%\n' "$old -> ${new##*-}" "$id" "$b" "$z" "$d" \
		"$(bc -l <<<"100*$z/$b")" "$(bc -l <<<"100*$d/$b")"
done
printf '%-34s %10d %10d %10d %10d %7.1f%% %7.1f%%\n' total "$ti" "$tb" "$tz" "$td" "$(bc -l <<<"100*$tz/$tb")" "$(bc -l <<<"100*$td/$tb")"

# --- cost per request ----------------------------------------------------------
old=${pair%%:*} new=${pair#*:}
fetch "$dict_port" "$old" "gzip, br" br >/dev/null
a=$(avail "$corpus/$old.js")
clk_tck=$(getconf CLK_TCK)
measure() { # port pid headers...: prints "requests seconds cpu-seconds"
	local port=$1 pid=$2 before after out
	shift 2
	before=$(cpu_ticks "$pid")
	out=$(wrk -t1 -c"$connections" --timeout 60s "$@" -d"$duration" "http://127.0.0.1:$port/assets/$new.js")
	after=$(cpu_ticks "$pid")
	awk -v cpu="$(bc -l <<<"($after - $before) / $clk_tck")" \
		'/requests in/ {gsub(/s,/, "", $4); print $1, $4, cpu}' <<<"$out"
}
br_hdr=(-H 'Accept-Encoding: gzip, br')
dcz_hdr=(-H 'Accept-Encoding: gzip, br, dcz' -H "Available-Dictionary: $a" -H 'Sec-Fetch-Site: same-origin')
dcb_hdr=(-H 'Accept-Encoding: gzip, br, dcb' -H "Available-Dictionary: $a" -H 'Sec-Fetch-Site: same-origin')
echo
echo "== cost: wrk -t1 -c$connections -d$duration /assets/$new.js ($(wc -c <"$corpus/$new.js") bytes), $rounds rounds alternating, $(nproc) cores shared by both Caddys, wrk and anything else"
for run in br dcz dcb; do
	port=$dict_port pid=${PIDS[1]}
	[[ $run == br ]] && port=$br_port pid=${PIDS[0]}
	hdr_name=${run}_hdr[@]
	wrk -t1 -c"$connections" "${!hdr_name}" -d2s "http://127.0.0.1:$port/assets/$new.js" >/dev/null # warm the pools
done
declare -A req sec cpu
for _ in $(seq "$rounds"); do
	for run in br dcz dcb; do
		port=$dict_port pid=${PIDS[1]}
		[[ $run == br ]] && port=$br_port pid=${PIDS[0]}
		hdr_name=${run}_hdr[@]
		read -r r t u < <(measure "$port" "$pid" "${!hdr_name}")
		req[$run]=$((${req[$run]:-0} + r)) sec[$run]=$(bc -l <<<"${sec[$run]:-0} + $t") cpu[$run]=$(bc -l <<<"${cpu[$run]:-0} + $u")
	done
done
printf '%-22s %12s %14s %18s %10s\n' server "req/s" "req/CPU-s" "CPU ms/request" "x br q5"
for run in br dcz dcb; do
	rps=$(bc -l <<<"${req[$run]} / ${sec[$run]}")
	rpc=$(bc -l <<<"${req[$run]} / (${cpu[$run]} + 0.000001)")
	base=$(bc -l <<<"${req[br]} / (${cpu[br]} + 0.000001)")
	label="encode br q5"
	[[ $run != br ]] && label="dictionary $run"
	printf '%-22s %12.1f %14.1f %18.3f %10.2f\n' "$label" "$rps" "$rpc" "$(bc -l <<<"1000/$rpc")" "$(bc -l <<<"$rpc/$base")"
done
