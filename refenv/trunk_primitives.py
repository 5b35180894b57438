#!/usr/bin/python3
"""Print the Trunk / SubPort primitives a neutron release sends (golden input of
internal/neutron's trunk tests): a trunk with two subports as get_trunk_details returns
it (obj_to_primitive at the agent's version 1.1), and the resource_list of a SubPort push.
Run with the release's own python: /usr/bin/python3 (Zed, host) or in its chroot."""
import json
import sys

from neutron.objects import trunk as trunk_obj
from neutron import version

TRUNK = '7a4e42e6-2b1c-4e4a-9d8e-3c1f3b9a0c11'
PARENT = '1b2d3c4e-0f1a-4b2c-8d3e-4f5a6b7c8d90'
SUB1 = '2c3d4e5f-1a2b-4c3d-9e4f-5a6b7c8d9e01'
SUB2 = '3d4e5f6a-2b3c-4d4e-8f5a-6b7c8d9e0f12'

subs = [trunk_obj.SubPort(port_id=SUB1, trunk_id=TRUNK, segmentation_type='vlan', segmentation_id=101),
        trunk_obj.SubPort(port_id=SUB2, trunk_id=TRUNK, segmentation_type='vlan', segmentation_id=102)]
t = trunk_obj.Trunk(id=TRUNK, project_id='demo', name='t1', port_id=PARENT, status='DOWN',
                    admin_state_up=True, sub_ports=subs, description='', revision_number=2,
                    created_at=None, updated_at=None) if 'revision_number' in trunk_obj.Trunk.fields else \
    trunk_obj.Trunk(id=TRUNK, project_id='demo', name='t1', port_id=PARENT, status='DOWN',
                    admin_state_up=True, sub_ports=subs)
json.dump({
    'release': version.version_info.release_string(),
    'trunk_version': trunk_obj.Trunk.VERSION,
    'subport_version': trunk_obj.SubPort.VERSION,
    'get_trunk_details': t.obj_to_primitive(target_version='1.1'),
    'subport_push': {'resource_list': [s.obj_to_primitive() for s in subs], 'event_type': 'created'},
}, sys.stdout, indent=1, sort_keys=True, default=str)
print()
