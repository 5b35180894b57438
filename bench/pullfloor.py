#!/usr/bin/python3
"""neutron-server's own floor for an agent's restart: loading the host's ports, no agent at all.

usage: pullfloor.py SECURITY_GROUP_ID PORT_IDS_FILE [REPEAT]

After a start an agent must learn every port plugged on its host from the server; with the OVS
firewall and a group whose rules name the group itself (the default group), it must also learn the
group's members, here those same ports. However it asks, the server loads each of them once.
This times that load with neutron's own RPC client (q-plugin bulk_pull 1.1, Port 1.7, as an
agent calls it), REPEAT times (default 3), and prints the medians:
  by-group S   one bulk_pull of the ports filtered by the security group (what ours asks at a start)
  by-id S      the ports of PORT_IDS_FILE (one id per line) by id, 500 per call, one after another
The client's own decoding (Python) is included; ours decodes the same reply in a fraction of that.
"""
import sys
import time

from neutron.common import config as common_config
from neutron.conf import service as service_conf
from neutron_lib import context as n_ctx
from neutron_lib import rpc as n_rpc
import oslo_messaging

CHUNK = 500


def main():
    sg, ids_file = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    ids = [l.strip() for l in open(ids_file) if l.strip()]
    service_conf.register_service_opts(service_conf.RPC_EXTRA_OPTS)
    common_config.register_common_config_options()
    common_config.init(["--config-file", "/etc/neutron/refenv/neutron.conf"])
    ctx = n_ctx.get_admin_context()
    rpc = n_rpc.get_client(oslo_messaging.Target(topic="q-plugin", version="1.0")).prepare(
        version="1.1", timeout=300)

    def pull(filters):
        return rpc.call(ctx, "bulk_pull", resource_type="Port", version="1.7", filter_kwargs=filters)

    by_group, by_id, got = [], [], 0
    for _ in range(repeat):
        t0 = time.time()
        got = len(pull({"security_group_ids": [sg]}))
        by_group.append(time.time() - t0)
        t0 = time.time()
        for i in range(0, len(ids), CHUNK):
            pull({"id": ids[i:i + CHUNK]})
        by_id.append(time.time() - t0)
    by_group.sort()
    by_id.sort()
    print("by-group %.3f (%d ports)" % (by_group[len(by_group) // 2], got))
    print("by-id %.3f (%d ports)" % (by_id[len(by_id) // 2], len(ids)))


if __name__ == "__main__":
    main()
