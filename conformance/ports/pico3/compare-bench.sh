#!/usr/bin/env bash
# compare-bench.sh: issue 20's ratio table, the TypeScript peer (pico3, see
# shared/peer/README.md) against picosim bench, measured side by side now.
#
#   conformance/ports/pico3/compare-bench.sh            # the issue's rows: 200 and 2,000 turns
#   SHORT=20 LONG=200 conformance/ports/pico3/compare-bench.sh   # a quick look
#
# The peer is installed outside the repository, in a temporary directory
# (or reused from PEER_DIR, a directory where it is installed already:
# bench.mjs beside node_modules); its packages never enter the Go module
# and node_modules is never committed. PEER_SRC is where bench.mjs comes
# from (default: the shared/peer directory beside the repository). The
# peer's lines are kept in OUT (default: a temporary file) for a rerun with
# picosim bench --compare OUT [--ours OURS.json].
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

out=${OUT:-$(mktemp "${TMPDIR:-/tmp}/pico3-peer-lines.XXXXXX")}
: >"$out"
# turns, backend, tools per turn, fsync, reset every: the issue's rows.
for row in "$short memory 2 0 0" "$short jsonl 2 0 0" "$long memory 2 0 $reset" "$long jsonl 2 0 $reset"; do
	echo "peer: node bench.mjs $row" >&2
	# shellcheck disable=SC2086 # the row is five words
	(cd "$peer" && node bench.mjs $row 2>/dev/null) >>"$out"
done
echo "peer lines in $out" >&2

cd "$repo"
go run ./cmd/picosim bench --compare "$out" --sqlite
