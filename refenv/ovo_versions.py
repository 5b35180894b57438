#!/usr/bin/python3
"""bulk_pull the given objects at every OVO version ovs-agent decodes, over the release's
own RPC client, and print the primitives (or the server's error) as JSON: the golden input
of internal/neutron's version tests (testdata/versions/<release>.json).

usage: ovo_versions.py CONF PORT_ID NETWORK_ID SUBNET_ID SG_ID
Run with the release's python: /usr/bin/python3 on the host (Zed, CONF
/etc/neutron/refenv/neutron.conf) or in its chroot (chroot DIR python3 /tmp/ovo_versions.py
/etc/neutron/refenv/neutron.conf ...). Also prints the server's own versions
(LOCAL_RESOURCE_VERSIONS of the same code: what its reference agent reports)."""
import json
import sys

from neutron_lib import context as n_ctx
from neutron_lib import rpc as n_rpc
from oslo_config import cfg
import oslo_messaging

conf, port, net, subnet, sg = sys.argv[1:6]
from neutron.common import config as common_config  # registers opts, control_exchange=neutron
from neutron.conf import service as service_conf
service_conf.register_service_opts(service_conf.RPC_EXTRA_OPTS)
common_config.register_common_config_options()
common_config.init(["--config-file", conf])
from neutron.api.rpc.callbacks import resources
from neutron import version

ctx = n_ctx.get_admin_context()
client = n_rpc.get_client(oslo_messaging.Target(topic="q-plugin", version="1.1"))
LADDERS = {  # internal/neutron/versions.go VersionLadders
    "Port": (["1.11", "1.10", "1.9", "1.8", "1.7"], {"id": [port]}),
    "Network": (["1.3", "1.2", "1.1"], {"id": [net]}),
    "Subnet": (["1.2", "1.1"], {"id": [subnet]}),
    "SecurityGroup": (["1.6", "1.5"], {"id": [sg]}),
    "SecurityGroupRule": (["1.3", "1.2"], {"security_group_id": [sg]}),
}
out = {"release": version.version_info.release_string(),
       "reference_resource_versions": dict(resources.LOCAL_RESOURCE_VERSIONS),
       "bulk_pull": {}}
for rtype, (ladder, flt) in LADDERS.items():
    res = out["bulk_pull"].setdefault(rtype, {})
    for v in ladder:
        try:
            res[v] = {"result": client.prepare(timeout=30).call(
                ctx, "bulk_pull", resource_type=rtype, version=v, filter_kwargs=flt)}
        except oslo_messaging.RemoteError as e:
            res[v] = {"error": {"exc_type": e.exc_type, "value": e.value}}
print(json.dumps(out, indent=1, sort_keys=True, default=str))
