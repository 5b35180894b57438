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

from neutron_rpc import plugin_client

CHUNK = 500


def main():
    sg, ids_file = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    ids = [l.strip() for l in open(ids_file) if l.strip()]
    ctx, rpc = plugin_client("1.1")

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
