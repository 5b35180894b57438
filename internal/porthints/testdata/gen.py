"""Regenerate golden.json from the reference agent's own code.

Extracts OVSNeutronAgent.sanitize_ovs_iface_other_config from the 2026.2
chroot's ovs_neutron_agent.py and runs it, inside the same try/except
(KeyError, TypeError) as _bind_devices' "Apply port hints", on every case in
cases.json. Usage: python3 gen.py REF_AGENT_PY > golden.json
"""
import ast
import json
import sys

src = open(sys.argv[1]).read()
tree = ast.parse(src)
fn = None
for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef) and node.name == 'sanitize_ovs_iface_other_config':
        fn = node
fn.decorator_list = []
warnings = []


class Log:
    def warning(self, *a):
        warnings.append(a)


ns = {'LOG': Log(), 'PORT_HINTS_TX_STEERING': 'tx-steering',
      'PORT_HINTS_TX_STEERING_HASH': 'hash', 'PORT_HINTS_TX_STEERING_THREAD': 'thread'}
exec(compile(ast.Module(body=[fn], type_ignores=[]), 'ref', 'exec'), ns)
sanitize = ns['sanitize_ovs_iface_other_config']

out = []
for case in json.load(open(sys.argv[2])):
    warnings.clear()
    hints = case['hints']
    try:
        res = {'set': sanitize(hints['openvswitch']['other_config'])}
    except (KeyError, TypeError):
        res = {'clear': True}
    res['warning'] = bool(warnings)
    out.append({'name': case['name'], 'hints': hints, 'want': res})
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
