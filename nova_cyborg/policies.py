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
#: Add a device profile that no flavor the server's project can use
#: carries (nova_cyborg.attach_api.check_offered).
ADD_ANY_PROFILE = POLICY_ROOT % 'add:any_profile'

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
        name=ADD_ANY_PROFILE,
        check_str=base.ADMIN,
        description='Attach the accelerators of a device profile that no '
                    'flavor the server\'s project can use carries (public '
                    'flavors and private flavors the project has access '
                    'to, not disabled). Without it, addAccelerator is '
                    'refused with 403 for such a profile: private flavors '
                    'decide which projects get which accelerators, and '
                    'addAccelerator does not bypass them (nova-cyborg)',
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
