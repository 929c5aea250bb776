# bench-lib.sh: helpers the integration/bench-*.sh scripts source.

# free_port prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# median prints the median of the numbers on standard input (any spacing).
median() {
	tr -s ' \t' '\n\n' | grep -v '^$' | sort -g |
		awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}

# cpu_ticks pids...: user+system clock ticks of these processes and their
# children (getconf CLK_TCK per second).
cpu_ticks() {
	local total=0 pid
	for pid in "$@" $(ps -o pid= --ppid "$(tr ' ' ',' <<<"$*")" 2>/dev/null); do
		[[ -r /proc/$pid/stat ]] || continue
		total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
	done
	echo "$total"
}

# bench_start name cmd...: fails unless every cmd is on PATH; makes $WORK
# (readable by nginx workers, which may run as another user) and, on exit,
# stops every pid in PIDS and removes $WORK.
bench_start() {
	local name=$1 cmd
	shift
	for cmd in "$@"; do
		command -v "$cmd" >/dev/null || { echo "$name: missing $cmd" >&2; exit 1; }
	done
	WORK=$(mktemp -d "/tmp/$name.XXXXXX")
	chmod 755 "$WORK"
	PIDS=()
	trap bench_stop EXIT
}

bench_stop() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}

# caddy_binary root dst: copies $CADDY_BIN to dst or, if unset, builds
# root's ./cmd/caddy there.
caddy_binary() {
	if [ -n "${CADDY_BIN:-}" ]; then
		cp "$CADDY_BIN" "$2"
	else
		echo "building caddy (set CADDY_BIN to skip)..." >&2
		(cd "$1" && go build -o "$2" ./cmd/caddy)
	fi
}

# caddy_global admin storage-dir: the global options block of a benchmark
# Caddyfile: the admin endpoint at admin (or off), nothing persisted, no
# automatic HTTPS, storage in storage-dir.
caddy_global() {
	printf '{\n\tadmin %s\n\tpersist_config off\n\tauto_https off\n\tstorage file_system %s\n}\n' "$1" "$2"
}

# wait_ready path ports...: waits, up to 10 s each, until every port on
# 127.0.0.1 answers GET path with a 2xx.
wait_ready() {
	local path=$1 port
	shift
	for port in "$@"; do
		for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port$path" && break; sleep 0.1; done
	done
}

# substitute_rules prints the ten rules of the 1 MB page benchmarks (six
# literal, four regex: the rules bench-substitute.sh uses), indented for a
# substitute block.
substitute_rules() {
	cat <<'RULES'
		replace `https://doc.rust-lang.org` `https://docs.example.org`
		replace `<table>` `<table class="t">`
		replace `https://llvm.org` `https://llvm.example.org`
		replace `rustc` `RUSTC`
		replace `legacyWidget` `widget`
		replace `https://cdn.example.com/` `/static/`
		regex `https?://github\.com/([\w-]+)` `https://git.example.com/$1`
		regex `\bwarning\b` `WARN`
		regex `\bv(\d+)\.(\d+)\.(\d+)\b` `v$1.$2.x`
		regex `campaign-[0-9a-f]{8}` `campaign`
RULES
}

# wrk_rps name wrk-args...: runs wrk with these arguments and prints its
# requests/s; a non-2xx answer stops the script, named name in the message.
wrk_rps() {
	local name=$1 out
	shift
	out=$(wrk "$@")
	if grep -q 'Non-2xx' <<<"$out"; then
		echo "$name: ${*: -1} answered non-2xx: $(grep Non-2xx <<<"$out")" >&2
		exit 1
	fi
	awk '/^Requests\/sec/ {print $2}' <<<"$out"
}

# per_round_ratios "x1 x2 ..." "y1 y2 ...": prints x1/y1 x2/y2 ... (one
# round's figures in the same place of both lists).
per_round_ratios() {
	paste <(tr -s ' ' '\n' <<<"$1" | grep -v '^$') <(tr -s ' ' '\n' <<<"$2" | grep -v '^$') |
		awk '{printf "%s ", $1/$2}'
}
