"""Policy rules of the addAccelerator and removeAccelerator server actions.

Nova's policy enforcer registers them with its own rules (the patched
``nova.policies.list_rules``), so they appear in ``oslopolicy-sample-
generator --namespace nova`` and can be overridden in Nova's policy file.
"""

from nova.policies import base
from oslo_policy import policy

POLICY_ROOT = 'os_compute_api:servers:accelerators:%s'
ADD = POLICY_ROOT % 'add'
REMOVE = POLICY_ROOT % 'remove'

rules = [
    policy.DocumentedRuleDefault(
        name=ADD,
        check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='Attach the accelerators of a device profile to a '
                    'server (nova-cyborg)',
        operations=[{'method': 'POST',
                     'path': '/servers/{server_id}/action (addAccelerator)'}],
        scope_types=['project']),
    policy.DocumentedRuleDefault(
        name=REMOVE,
        check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='Detach accelerators attached with addAccelerator from '
                    'a server (nova-cyborg)',
        operations=[{'method': 'POST',
                     'path':
                         '/servers/{server_id}/action (removeAccelerator)'}],
        scope_types=['project']),
]


def list_rules():
    return rules
