#!/bin/bash
# add-port loop on a private netdev OVS with no agent: N veths, one ovs-vsctl add-port each.
set -e
N=${1:-1000}
D=/tmp/apexp/ovs; rm -rf $D; mkdir -p $D
export OVS_RUNDIR=$D OVS_DBDIR=$D OVS_LOGDIR=$D
ovsdb-tool create $D/conf.db /usr/share/openvswitch/vswitch.ovsschema
ip netns add apexp 2>/dev/null || true
ip netns exec apexp sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
setsid ovsdb-server $D/conf.db --remote=punix:$D/db.sock --pidfile=$D/ovsdb-server.pid --unixctl=$D/ovsdb-server.ctl --detach --log-file=$D/ovsdb-server.log
V="ovs-vsctl --db=unix:$D/db.sock"
$V --no-wait init
setsid ip netns exec apexp ovs-vswitchd unix:$D/db.sock --pidfile=$D/ovs-vswitchd.pid --unixctl=$D/ovs-vswitchd.ctl --detach --log-file=$D/ovs-vswitchd.log
$V add-br br-int -- set bridge br-int datapath_type=netdev fail_mode=secure
for i in $(seq 1 $N); do echo "link add ax$i mtu 1450 type veth peer name ay$i mtu 1450"; echo "link set ax$i up"; echo "link set ay$i up"; done | ip -n apexp -batch -
t0=$(date +%s.%N)
for i in $(seq 1 $N); do
  $V -- --may-exist add-port br-int ax$i -- set Interface ax$i external_ids:iface-id=$(printf '%08d-0000-0000-0000-000000000000' $i) external_ids:attached-mac=fa:16:3e:00:$(printf '%02x:%02x' $((i/256)) $((i%256))) external_ids:iface-status=active
  if [ $((i % 250)) = 0 ]; then echo "$i $(echo "$(date +%s.%N) - $t0" | bc)"; fi
done
t1=$(date +%s.%N)
echo "add-port loop of $N: $(echo "$t1 - $t0" | bc) s"
