#!/bin/bash
# Starts Mosquitto, etcd and a gateway (sim board) on free ports above
# 20000, for running the integration tests by hand:
#
#   eval "$(node-red/test/local-env.sh /tmp/fg-env)"   # prints the exports
#   cd node-red && npm test
#   kill $(cat /tmp/fg-env/pids)
#
# The gateway is built from this repository into DIR/gateway; its signer
# ctl-a's key is DIR/ctl-a.key. (CI starts the same parts with the Go
# harness's testenv package.)
set -euo pipefail
dir=${1:?usage: local-env.sh DIR}
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir"
port() { echo $((20000 + RANDOM % 40000)); }
mq=$(port) ec=$(port) ep=$(port) gw=gw-$RANDOM
[ -x "$dir/gateway" ] || (cd "$repo" && go build -o "$dir/gateway" ./cmd/gateway)
[ -f "$dir/ctl-a.key" ] || "$dir/gateway" keygen --out "$dir/ctl-a" >/dev/null
printf 'listener %s 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n' "$mq" >"$dir/mosquitto.conf"
mosquitto -c "$dir/mosquitto.conf" >"$dir/mosquitto.log" 2>&1 &
echo $! >"$dir/pids"
rm -rf "$dir/etcd"
etcd --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$ec" --advertise-client-urls "http://127.0.0.1:$ec" \
  --listen-peer-urls "http://127.0.0.1:$ep" --initial-advertise-peer-urls "http://127.0.0.1:$ep" \
  --initial-cluster "default=http://127.0.0.1:$ep" >"$dir/etcd.log" 2>&1 &
echo $! >>"$dir/pids"
cat >"$dir/gateway.yaml" <<YAML
id: $gw
mqtt:
  broker: tcp://127.0.0.1:$mq
store: $dir/store-$gw/fence.db
board: sim
http: ""
controllers:
  - name: ctl-a
    public_key: "$(cat "$dir/ctl-a.pub")"
    scopes: [door]
actuators:
  - {name: pump, pin: GPIO17}
  - {name: valve, pin: GPIO27}
  - {name: fan, pin: GPIO22, scope: climate}
  - {name: heater, pin: GPIO23, scope: climate}
  - {name: door, pin: GPIO5, require_signature: true}
YAML
mkdir -p "$dir/store-$gw"
sleep 0.5
"$dir/gateway" run --config "$dir/gateway.yaml" --init >"$dir/gateway.log" 2>&1 &
echo $! >>"$dir/pids"
for _ in $(seq 100); do
  if grep -q '"online"\|status=online\|online' "$dir/gateway.log" 2>/dev/null; then break; fi
  sleep 0.1
done
echo "export FENCEGATE_TEST_BROKER=tcp://127.0.0.1:$mq FENCEGATE_TEST_ETCD=http://127.0.0.1:$ec FENCEGATE_TEST_GATEWAY=$gw FENCEGATE_TEST_KEY=$dir/ctl-a.key FENCEGATE_TEST_GATEWAY_BIN=$dir/gateway"
