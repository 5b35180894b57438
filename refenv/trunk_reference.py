#!/usr/bin/python3
"""Run the reference OVS agent's trunk handler (OVSDBHandler + TrunkManager of the
installed neutron) through a fixed scenario against a private ovsdb-server, and print
the OVSDB rows after each step and the statuses it reported, as JSON: the golden file
of internal/trunk and internal/ovsdb's trunk tests (internal/trunk/testdata/).

    trunk_reference.py unix:/path/db.sock > reference-<release>.json

Only the RPC to neutron-server is replaced (get_trunk_details, update_subport_bindings,
update_trunk_status answer from the scenario and are recorded); everything that touches
OVSDB is the reference's own code. Started by internal/trunk's capture test (tag
refcapture), which provides the private OVS."""
import json
import sys
from unittest import mock

from oslo_config import cfg

from neutron.agent.common import ovs_lib
from neutron.conf.agent import ovs_conf
from neutron.conf.agent import ovsdb_api
from neutron.objects import trunk as trunk_obj
from neutron.services.trunk.drivers.openvswitch.agent import ovsdb_handler
from neutron.services.trunk.drivers.openvswitch.agent import trunk_manager

DB = sys.argv[1]
ovs_conf.register_ovs_agent_opts(cfg.CONF)
ovsdb_api.register_ovsdb_api_opts(cfg.CONF)
cfg.CONF([], project='neutron')
cfg.CONF.set_override('ovsdb_connection', DB, 'OVS')
cfg.CONF.set_override('ovsdb_timeout', 10, 'OVS')

TRUNK = '7a4e42e6-2b1c-4e4a-9d8e-3c1f3b9a0c11'
TRUNK2 = '9f0e1d2c-3b4a-4596-8877-665544332211'
PARENT = '1b2d3c4e-0f1a-4b2c-8d3e-4f5a6b7c8d90'
PMAC = 'fa:16:3e:00:00:01'
SUBS = {  # port id -> (vlan, mac)
    '2c3d4e5f-1a2b-4c3d-9e4f-5a6b7c8d9e01': (101, 'fa:16:3e:00:01:01'),
    '3d4e5f6a-2b3c-4d4e-8f5a-6b7c8d9e0f12': (102, 'fa:16:3e:00:01:02'),
    '4e5f6a7b-3c4d-4e5f-9a6b-7c8d9e0f1a23': (103, 'fa:16:3e:00:01:03'),
    '5f6a7b8c-4d5e-4f6a-8b7c-8d9e0f1a2b34': (104, 'fa:16:3e:00:01:04'),
}
S1, S2, S3, S4 = list(SUBS)
VM = 'tap1b2d3c4e-0f'

# Newer releases add an OVSDB Manager for the connection through privsep and the
# system's ovs-vsctl; the private ovsdb-server needs none (it listens already).
try:
    from neutron.agent.ovsdb.native import helpers as _native_helpers
    _native_helpers.enable_connection_uri = lambda *a, **k: None
except ImportError:
    pass

ovs = ovs_lib.BaseOVS()
api = ovs.ovsdb
br_int = ovs.add_bridge('br-int', datapath_type='netdev')
mgr = trunk_manager.TrunkManager(br_int)
with mock.patch.object(ovsdb_handler.agent, 'TrunkStub'):  # no transport: RPC mocked below
    handler = ovsdb_handler.OVSDBHandler(mgr)
handler.timeout = 2

state = {'subports': [S1, S2], 'unbound': set()}
reported = []


def subport(pid):
    return trunk_obj.SubPort(port_id=pid, trunk_id=TRUNK, segmentation_type='vlan',
                             segmentation_id=SUBS[pid][0])


def get_trunk_details(ctx, parent_port_id):
    assert parent_port_id == PARENT, parent_port_id
    return trunk_obj.Trunk(id=TRUNK, port_id=PARENT, project_id='demo', name='t1', status='DOWN',
                           admin_state_up=True, sub_ports=[subport(p) for p in state['subports']])


def update_subport_bindings(ctx, subports):
    return {TRUNK: [{'id': s.port_id, 'mac_address': SUBS[s.port_id][1]}
                    for s in subports if s.port_id not in state['unbound']]}


rpc = mock.Mock()
rpc.get_trunk_details.side_effect = get_trunk_details
rpc.update_subport_bindings.side_effect = update_subport_bindings
rpc.update_trunk_status.side_effect = lambda ctx, tid, status: reported.append([tid, status])
handler.trunk_rpc = rpc


def dump():
    out = {}
    for br in sorted(api.list_br().execute(check_error=True)):
        ports = {}
        for pname in api.list_ports(br).execute(check_error=True):
            p = api.db_get('Port', pname, 'tag').execute(check_error=True)
            vm = api.db_get('Port', pname, 'vlan_mode').execute(check_error=True)
            i = api.db_list('Interface', [pname], columns=['type', 'options', 'external_ids'],
                            if_exists=True).execute(check_error=True)[0]
            ports[pname] = {'tag': p if p != [] else None, 'vlan_mode': vm if vm != [] else None,
                            'type': i['type'], 'options': i['options'], 'external_ids': i['external_ids']}
        out[br] = ports
    return out


steps = []


def step(name, fn):
    del reported[:]
    fn()
    steps.append({'step': name, 'reported': list(reported), 'ovsdb': dump()})


tbr = trunk_manager.TrunkBridge(TRUNK)


def plug_vm():
    # What os-vif does: the trunk bridge, the VM's port on it with the parent's ids.
    # (an internal port stands for the VM's tap: ovs-vswitchd must be able to create it)
    ovs.add_bridge(tbr.br_name, datapath_type='netdev')
    with api.transaction(check_error=True) as txn:
        txn.add(api.add_port(tbr.br_name, VM))
        txn.add(api.db_set('Interface', VM, ('type', 'internal'), ('external_ids', {
            'iface-id': PARENT, 'attached-mac': PMAC, 'iface-status': 'active', 'vm-uuid': 'vm-1'})))


step('plug', plug_vm)
step('wire', lambda: handler.handle_trunk_add(tbr.br_name))


def add_subports(ids):
    def f():
        status = handler.wire_subports_for_trunk(handler.context, TRUNK, [subport(p) for p in ids])
        handler.report_trunk_status(handler.context, TRUNK, status)
    return f


def remove_subports(ids):
    def f():
        status = handler.unwire_subports_for_trunk(TRUNK, ids)
        handler.report_trunk_status(handler.context, TRUNK, status)
    return f


step('add_subport', add_subports([S3]))
step('remove_subport', remove_subports([S2]))


def rewire():
    # The agent restarts; meanwhile S3 left the trunk and S4 joined.
    state['subports'] = [S1, S4]
    handler.handle_trunk_add(tbr.br_name)


step('rewire', rewire)


def add_unbound():
    # S2 comes back but the server fails to bind it (absent from update_subport_bindings):
    # the reference's wire_subports_for_trunk then fails on the missing MAC (KeyError)
    # before it reports anything; recorded as such.
    state['unbound'].add(S2)
    try:
        add_subports([S2])()
    except KeyError as e:
        reported.append(['exception', 'KeyError %s' % e])
    state['unbound'].discard(S2)


step('add_unbound', add_unbound)


def unplug_vm():
    # os-vif unplugs the VM and deletes the bridge; the agent's monitor then reports the
    # VM's interface removed, with its last external_ids.
    ext = api.db_get('Interface', VM, 'external_ids').execute(check_error=True)
    api.del_br(tbr.br_name).execute(check_error=True)
    handler.handle_trunk_remove(tbr.br_name, {'name': VM, 'external_ids': ext})


step('unplug', unplug_vm)


def dispose():
    # A trunk bridge left with patch ports but no VM (the agent was down when the VM
    # left): the reference waits for a VM, then disposes of the bridge and the peers.
    b2 = trunk_manager.TrunkBridge(TRUNK2)
    ovs.add_bridge(b2.br_name, datapath_type='netdev')
    trunk_manager.TrunkParentPort(TRUNK2, PARENT, PMAC).plug(br_int)
    trunk_manager.SubPort(TRUNK2, S1, SUBS[S1][1], 101).plug(br_int)
    handler.handle_trunk_add(b2.br_name)


step('dispose', dispose)
json.dump({'steps': steps}, sys.stdout, indent=1, sort_keys=True)
print()
