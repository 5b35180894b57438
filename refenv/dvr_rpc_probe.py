#!/usr/bin/python3
"""Call the DVR RPCs of the reference OVS agent (neutron/api/rpc/handlers/dvr_rpc.py,
DVRServerRpcApi: topic q-plugin, no namespace (RPC_NAMESPACE_DVR is None), version 1.0) against a running server and
print the replies as JSON, so that ovs-agent's DVR client can be written against real payloads.
Run with the release's neutron (inside the chroot, the DVR server's configuration):

  chroot /var/lib/ovsagent-refenv/2026.2 python3 - CONF HOST SUBNET_ID [PORT_ID] < refenv/dvr_rpc_probe.py

(dvr.sh rpc does that). get_subnet_for_dvr is called as the agent calls it: with fixed_ips of a
distributed router interface (PORT_ID's) and with fixed_ips=None (what a csnat port sends).
"""
import json
import sys

from neutron_lib import context as n_ctx
from neutron_lib import rpc as n_rpc
import oslo_messaging

conf, host, subnet = sys.argv[1], sys.argv[2], sys.argv[3]
port_id = sys.argv[4] if len(sys.argv) > 4 else None
from neutron.common import config as common_config  # registers opts, control_exchange=neutron
from neutron.conf import service as service_conf
service_conf.register_service_opts(service_conf.RPC_EXTRA_OPTS)
common_config.register_common_config_options()
common_config.init(["--config-file", conf])
ctx = n_ctx.get_admin_context()
# neutron_lib.constants.RPC_NAMESPACE_DVR is None: no namespace on the wire
c = n_rpc.get_client(oslo_messaging.Target(topic="q-plugin", version="1.0",
                                           namespace=None)).prepare(timeout=30)
out = {
    "get_dvr_mac_address_by_host": c.call(ctx, "get_dvr_mac_address_by_host", host=host),
    "get_dvr_mac_address_list": c.call(ctx, "get_dvr_mac_address_list"),
    "get_ports_on_host_by_subnet": c.call(ctx, "get_ports_on_host_by_subnet", host=host, subnet=subnet),
    "get_subnet_for_dvr(fixed_ips=None)": c.call(ctx, "get_subnet_for_dvr", subnet=subnet, fixed_ips=None),
}
if port_id:
    port = c.call(ctx, "get_ports", filters={"id": [port_id]})
    out["get_ports(filters={id: [PORT_ID]})"] = port
    if port:
        out["get_subnet_for_dvr(fixed_ips=PORT_ID's)"] = c.call(
            ctx, "get_subnet_for_dvr", subnet=subnet, fixed_ips=port[0]["fixed_ips"])
print(json.dumps(out, indent=1, sort_keys=True, default=str))
