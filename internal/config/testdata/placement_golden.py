#!/usr/bin/python3
"""Writes placement_golden.json: what the reference agent computes for the
[ovs] resource_provider_* options, by running the reference's own functions
(neutron_lib.placement.utils, the same in Zed and 2026.2) in the order
OVSNeutronAgent.__init__ calls them (neutron 2026.2). Zed's
validate_rp_bandwidth and default_rp_hypervisors predate the tunnelled
resource provider, so their 2026.2 bodies are inlined below
(hypervisor_hostname stands for get_hypervisor_hostname()). Run: /usr/bin/python3 placement_golden.py
"""
import json

from neutron_lib.placement import utils as place_utils
from oslo_config import types

OPTS = ('resource_provider_bandwidths',
        'resource_provider_hypervisors',
        'resource_provider_default_hypervisor',
        'resource_provider_inventory_defaults',
        'resource_provider_packet_processing_without_direction',
        'resource_provider_packet_processing_with_direction',
        'resource_provider_packet_processing_inventory_defaults')
INV_DEFAULT = {'allocation_ratio': 1.0, 'min_unit': 1, 'step_size': 1,
               'reserved': 0}


def validate_rp_bandwidth(rp_bandwidths, device_names,
                          tunnelled_network_rp_name=None):
    # neutron 2026.2 neutron/common/utils.py validate_rp_bandwidth
    if tunnelled_network_rp_name:
        device_names.add(tunnelled_network_rp_name)
    for dev_name in rp_bandwidths:
        if dev_name not in device_names:
            raise ValueError(
                "Invalid resource_provider_bandwidths: "
                "Device name %(dev_name)s is missing from "
                "device mappings" % {'dev_name': dev_name})


def default_rp_hypervisors(hypervisors, device_mappings,
                           default_hypervisor=None,
                           tunnelled_network_rp_name=None,
                           hypervisor_hostname=None):
    # neutron 2026.2 neutron/agent/common/utils.py default_rp_hypervisors
    _default_hypervisor = default_hypervisor or hypervisor_hostname
    devices = {dev for devs in device_mappings.values() for dev in devs}
    if tunnelled_network_rp_name:
        devices.add(tunnelled_network_rp_name)
    return {device: hypervisors.get(device) or _default_hypervisor
            for device in devices}


def agent(case):
    ovs = case['ovs']
    lst, dct = types.List(), types.Dict()
    host = case['host']
    bm = dct(case.get('bridge_mappings', ''))  # unique physnets here
    tunnelled = case.get('tunnelled_network_rp_name', 'rp_tunnelled')
    rp_bw = place_utils.parse_rp_bandwidths(
        lst(ovs.get('resource_provider_bandwidths', '')))
    pp_without = place_utils.parse_rp_pp_without_direction(
        lst(ovs.get('resource_provider_packet_processing_without_direction',
                    '')), host)
    pp_with = place_utils.parse_rp_pp_with_direction(
        lst(ovs.get('resource_provider_packet_processing_with_direction',
                    '')), host)
    if pp_with and pp_without:
        raise ValueError('mutually exclusive')
    validate_rp_bandwidth(rp_bw, set(bm.values()),
                          tunnelled_network_rp_name=tunnelled)

    def inv(name):
        if name in ovs:
            return place_utils.parse_rp_inventory_defaults(dct(ovs[name]))
        return place_utils.parse_rp_inventory_defaults(dict(INV_DEFAULT))
    inv_defaults = inv('resource_provider_inventory_defaults')
    pp_inv_defaults = inv(
        'resource_provider_packet_processing_inventory_defaults')
    hyp = default_rp_hypervisors(
        dct(ovs.get('resource_provider_hypervisors', '')),
        {k: [v] for k, v in bm.items()},
        default_hypervisor=ovs.get('resource_provider_default_hypervisor'),
        tunnelled_network_rp_name=tunnelled,
        hypervisor_hostname=case['hypervisor_hostname'])
    return {
        'resource_provider_bandwidths': rp_bw,
        'resource_provider_inventory_defaults': inv_defaults,
        'resource_provider_packet_processing_without_direction': pp_without,
        'resource_provider_packet_processing_with_direction': pp_with,
        'resource_provider_packet_processing_inventory_defaults':
            pp_inv_defaults,
        'resource_provider_hypervisors': hyp,
    }


def case(name, ovs, error_option=None, **kw):
    c = {'name': name, 'host': 'compute-1', 'hypervisor_hostname': 'vm',
         'bridge_mappings': 'physnet1:br-phys', 'ovs': ovs}
    c.update(kw)
    if error_option:
        c['error_option'] = error_option
    return c


BW, HYP, DHYP, INV = OPTS[0], OPTS[1], OPTS[2], OPTS[3]
PPW, PPD, PPINV = OPTS[4], OPTS[5], OPTS[6]
CASES = [
    case('defaults', {}),
    case('no bridge mappings', {}, bridge_mappings=''),
    case('tunnelled rp name unset', {}, tunnelled_network_rp_name=''),
    case('tunnelled rp name renamed', {}, tunnelled_network_rp_name='tun'),
    case('bandwidths both', {BW: 'br-phys:1000:2000'}),
    case('bandwidths forms', {BW: 'br-phys::1000, br-x'},
         bridge_mappings='physnet1:br-phys,physnet2:br-x'),
    case('bandwidths bare name and empty', {BW: 'br-phys::'}),
    case('bandwidths python ints', {BW: 'br-phys: 1_000 :+5'}),
    case('bandwidths zero and minus zero', {BW: 'br-phys:0:-0'}),
    case('bandwidths tunnelled', {BW: 'rp_tunnelled:100:100'}),
    case('bandwidths empty list', {BW: ''}),
    case('bandwidths short tuple', {BW: 'br-phys:1000'}, BW),
    case('bandwidths long tuple', {BW: 'br-phys:1:2:3'}, BW),
    case('bandwidths negative', {BW: 'br-phys:-1:5'}, BW),
    case('bandwidths float', {BW: 'br-phys:1.5:1'}, BW),
    case('bandwidths word', {BW: 'br-phys:ten:1'}, BW),
    case('bandwidths bad underscore', {BW: 'br-phys:1__0:1'}, BW),
    case('bandwidths duplicate', {BW: 'br-phys:1:1,br-phys:2:2'}, BW),
    case('bandwidths unmapped bridge', {BW: 'br-other:1:1'}, BW),
    case('bandwidths empty name', {BW: ':1:1'}, BW),
    case('bandwidths tunnelled renamed', {BW: 'rp_tunnelled:1:1'}, BW,
         tunnelled_network_rp_name='tun'),
    case('pp without default host', {PPW: ':1000'}),
    case('pp without forms', {PPW: 'hv1:10,hv2:,hv3'}),
    case('pp without bare host', {PPW: 'compute-1'}),
    case('pp without override', {PPW: ':5,compute-1:6'}, PPW),
    case('pp without long tuple', {PPW: ':5:5'}, PPW),
    case('pp with default host', {PPD: ':1000:2000'}),
    case('pp with forms', {PPD: 'hv1::10,:0:0'}),
    case('pp with override', {PPD: 'compute-1:1:1,:2:2'}, PPD),
    case('pp with short tuple', {PPD: 'hv1:1'}, PPD),
    case('pp both', {PPW: ':1', PPD: ':1:1'}, PPD),
    case('inventory reserved only', {INV: 'reserved:1'}),
    case('inventory all', {INV: 'allocation_ratio:1.5,max_unit:10,min_unit:2,'
                                'step_size:3,reserved:4'}),
    case('inventory ratio integral', {INV: 'allocation_ratio:2'}),
    case('inventory ratio exponent', {INV: 'allocation_ratio:1e3'}),
    case('inventory ratio small', {INV: 'allocation_ratio:0.00001'}),
    case('inventory ratio large', {INV: 'allocation_ratio:1e16'}),
    case('inventory empty', {INV: ''}),
    case('inventory unknown key', {INV: 'foo:1'}, INV),
    case('inventory negative int', {INV: 'min_unit:-1'}, INV),
    case('inventory negative ratio', {INV: 'allocation_ratio:-0.5'}, INV),
    case('inventory int as float', {INV: 'step_size:1.0'}, INV),
    case('inventory ratio word', {INV: 'allocation_ratio:x'}, INV),
    case('pp inventory', {PPINV: 'reserved:7,allocation_ratio:0.5'}),
    case('pp inventory bad', {PPINV: 'max_unit:'}, PPINV),
    case('hypervisors given', {HYP: 'br-phys:hv1,br-zz:hv2'}),
    case('hypervisors default option', {DHYP: 'dhv'},
         bridge_mappings='physnet1:br-phys,physnet2:br-x'),
    case('hypervisors empty value falls back', {HYP: 'br-phys:'}),
    case('hypervisors tunnelled', {HYP: 'rp_tunnelled:hvt', DHYP: 'dhv'}),
]


def main():
    out = []
    for c in CASES:
        try:
            # The reference's own JSON encoding, keys sorted, compact: the
            # Go test compares bytes (1.0 stays 1.0, null stays null).
            c['want_json'] = json.dumps(agent(c), sort_keys=True,
                                        separators=(',', ':'))
        except ValueError as e:
            if 'error_option' not in c:
                raise
            c['want_error'] = str(e)
        else:
            assert 'error_option' not in c, c['name']
        out.append(c)
    with open('placement_golden.json', 'w') as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write('\n')


main()
