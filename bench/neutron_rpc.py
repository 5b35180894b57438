"""neutron's own RPC client to neutron-server's q-plugin topic, as an agent holds it: shared by
floor.py and pullfloor.py, which time the server with no agent in between."""
from neutron.common import config as common_config
from neutron.conf import service as service_conf
from neutron_lib import context as n_ctx
from neutron_lib import rpc as n_rpc
import oslo_messaging

CONF_FILE = "/etc/neutron/refenv/neutron.conf"


def plugin_client(version):
    """(admin context, q-plugin client pinned to version) with refenv's neutron.conf."""
    service_conf.register_service_opts(service_conf.RPC_EXTRA_OPTS)
    common_config.register_common_config_options()
    common_config.init(["--config-file", CONF_FILE])
    rpc = n_rpc.get_client(oslo_messaging.Target(topic="q-plugin", version="1.0")).prepare(
        version=version, timeout=300)
    return n_ctx.get_admin_context(), rpc
