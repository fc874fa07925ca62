#!/usr/bin/env bash
# compare-bench.sh: issue 20's ratio table, the TypeScript peer (pico3, see
# shared/peer/README.md) against picosim bench, measured side by side now.
#
#   conformance/ports/pico3/compare-bench.sh            # the issue's rows: 200 and 2,000 turns
#   SHORT=20 LONG=200 conformance/ports/pico3/compare-bench.sh   # a quick look
#   REPEAT=5 conformance/ports/pico3/compare-bench.sh   # each row five times, medians compared
#
# Each row runs REPEAT times (default 3), the peer and ours (and ours on
# SQLite) one after the other each time, so that a machine whose speed
# drifts slows both alike; the table compares the medians of each
# measure, which a noisy machine moves less than any one run.
#
# The peer is installed outside the repository, in a temporary directory
# (or reused from PEER_DIR, a directory where it is installed already:
# bench.mjs beside node_modules); its packages never enter the Go module
# and node_modules is never committed. PEER_SRC is where bench.mjs comes
# from (default: the shared/peer directory beside the repository). The
# peer's lines are kept in OUT (default: a temporary file) and ours in
# OURS (the same) for a rerun with picosim bench --compare OUT --ours OURS.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../../.." && pwd)
short=${SHORT:-200}
long=${LONG:-2000}
reset=${RESET:-50}
peer_src=${PEER_SRC:-$repo/../shared/peer}

peer=${PEER_DIR:-}
if [[ -z $peer ]]; then
	peer=$(mktemp -d "${TMPDIR:-/tmp}/pico3-peer.XXXXXX")
	trap 'rm -rf "$peer"' EXIT
	cp "$peer_src/bench.mjs" "$peer/"
	(
		cd "$peer"
		echo '{"name":"pico3-peer","private":true,"type":"module"}' >package.json
		npm install --silent --no-audit --no-fund \
			@earendil-works/pi-agent-core@0.87.1 @earendil-works/pi-ai@0.87.1 @earendil-works/chord@0.87.1 >&2
	)
fi
case $peer in "$repo" | "$repo"/*)
	echo "compare-bench.sh: PEER_DIR $peer is inside the repository; install the peer outside it" >&2
	exit 2
	;;
esac

repeat=${REPEAT:-3}
out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/pico3-peer-lines.XXXXXX")}
ours=${OURS:-$(mktemp "${TMPDIR:-/tmp}/pico-go-lines.XXXXXX")}
: >"$out"
: >"$ours"
bin=$(mktemp -d "${TMPDIR:-/tmp}/picosim-bench.XXXXXX")
trap 'rm -rf "$bin"; if [[ -z ${PEER_DIR:-} ]]; then rm -rf "$peer"; fi' EXIT
(cd "$repo" && go build -o "$bin/picosim" ./cmd/picosim)
# turns, backend, tools per turn, fsync, reset every: the issue's rows.
for ((i = 1; i <= repeat; i++)); do
	for row in "$short memory 2 0 0" "$short jsonl 2 0 0" "$long memory 2 0 $reset" "$long jsonl 2 0 $reset"; do
		read -r turns backend tools fsync every <<<"$row"
		echo "run $i of $repeat: node bench.mjs $row, then picosim bench" >&2
		# shellcheck disable=SC2086 # the row is five words
		(cd "$peer" && node bench.mjs $row 2>/dev/null) >>"$out"
		# Ours on SQLite too, once per settings: a JSONL row without fsync
		# has the memory row's.
		sync=() backends=("$backend" sqlite)
		[[ $fsync == 1 ]] && sync=(--fsync)
		[[ $backend == jsonl && $fsync != 1 ]] && backends=("$backend")
		for b in "${backends[@]}"; do
			"$bin/picosim" bench --json --turns "$turns" --backend "$b" --tools "$tools" --reset-every "$every" "${sync[@]}" 2>/dev/null >>"$ours"
		done
	done
done
echo "peer lines in $out, ours in $ours" >&2

"$bin/picosim" bench --compare "$out" --ours "$ours"
