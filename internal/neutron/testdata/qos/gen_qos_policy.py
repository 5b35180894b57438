# Regenerates qos_policy_1.10.json: /usr/bin/python3 gen_qos_policy.py > qos_policy_1.10.json
# (the host's neutron 21 objects; QosPolicy 1.10 and QosRule 1.5 are unchanged through 2026.2).
import json, datetime
from neutron.objects.qos import policy, rule
from neutron_lib import context
ctx = context.get_admin_context()
pid='5f1c7e3a-6b7e-4d2b-9a55-0d7c0c1e9a01'
rules=[
 rule.QosBandwidthLimitRule(ctx, id='11111111-1111-4111-8111-111111111111', qos_policy_id=pid, max_kbps=10000, max_burst_kbps=8000, direction='egress'),
 rule.QosBandwidthLimitRule(ctx, id='22222222-2222-4222-8222-222222222222', qos_policy_id=pid, max_kbps=20000, max_burst_kbps=None, direction='ingress'),
 rule.QosDscpMarkingRule(ctx, id='33333333-3333-4333-8333-333333333333', qos_policy_id=pid, dscp_mark=26),
 rule.QosMinimumBandwidthRule(ctx, id='44444444-4444-4444-8444-444444444444', qos_policy_id=pid, min_kbps=1000, direction='egress'),
 rule.QosPacketRateLimitRule(ctx, id='55555555-5555-4555-8555-555555555555', qos_policy_id=pid, max_kpps=2, max_burst_kpps=1, direction='egress'),
 rule.QosMinimumPacketRateRule(ctx, id='66666666-6666-4666-8666-666666666666', qos_policy_id=pid, min_kpps=5, direction='any'),
]
p=policy.QosPolicy(ctx, id=pid, project_id='a1b2c3d4e5f60718293a4b5c6d7e8f90', name='gold', shared=False, rules=rules, is_default=False,
  description='golden policy', revision_number=3,
  created_at=datetime.datetime(2026,12,4,17,0,0,tzinfo=datetime.timezone.utc), updated_at=datetime.datetime(2026,12,4,17,5,0,tzinfo=datetime.timezone.utc))
prim=p.obj_to_primitive(target_version='1.10')
print(json.dumps(prim, indent=1, sort_keys=True))
