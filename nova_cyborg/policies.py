"""Policy rules of the addAccelerator and removeAccelerator server actions.

The rules are nova-cyborg's, in its own policy namespace: they are listed
by ``oslopolicy-sample-generator --namespace nova_cyborg`` (the
``oslo.policy.policies`` entry point in ``setup.cfg``), not with Nova's,
and registered once, with Nova's enforcer in nova-api when an action is
first checked (:func:`authorize`); no Nova patch lists them. They are
overridden in Nova's policy file, as Nova's rules are.

Their names were ``os_compute_api:servers:accelerators:*``, inside Nova's
namespace; those names are deprecated aliases (oslo.policy
``DeprecatedRule``): an operator's override of an old name applies to the
new one, with a deprecation warning, until it is renamed.
"""

import threading

from nova.policies import base
from nova import policy as nova_policy
from oslo_policy import policy

POLICY_ROOT = 'nova_cyborg:servers:accelerators:%s'
ADD = POLICY_ROOT % 'add'
REMOVE = POLICY_ROOT % 'remove'
#: Add a device profile that no flavor the server's project can use
#: carries (nova_cyborg.flows.attach.api.check_offered).
ADD_ANY_PROFILE = POLICY_ROOT % 'add:any_profile'

#: The names before, inside Nova's namespace.
OLD_ROOT = 'os_compute_api:servers:accelerators:%s'
DEPRECATED_REASON = """
nova-cyborg's rules moved out of Nova's os_compute_api namespace into their
own, nova_cyborg, so that Nova's rules and nova-cyborg's are registered and
listed apart. Rename an override of os_compute_api:servers:accelerators:*
to nova_cyborg:servers:accelerators:*.
"""
DEPRECATED_SINCE = '2026.2'


def _old(suffix, check_str):
    return policy.DeprecatedRule(
        name=OLD_ROOT % suffix, check_str=check_str,
        deprecated_reason=DEPRECATED_REASON,
        deprecated_since=DEPRECATED_SINCE)


rules = [
    policy.DocumentedRuleDefault(
        name=ADD,
        check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='Attach the accelerators of a device profile to a '
                    'server (nova-cyborg)',
        operations=[{'method': 'POST',
                     'path': '/servers/{server_id}/action (addAccelerator)'}],
        scope_types=['project'],
        deprecated_rule=_old('add', base.PROJECT_MEMBER_OR_ADMIN)),
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
        scope_types=['project'],
        deprecated_rule=_old('add:any_profile', base.ADMIN)),
    policy.DocumentedRuleDefault(
        name=REMOVE,
        check_str=base.PROJECT_MEMBER_OR_ADMIN,
        description='Detach accelerators attached with addAccelerator from '
                    'a server (nova-cyborg)',
        operations=[{'method': 'POST',
                     'path':
                         '/servers/{server_id}/action (removeAccelerator)'}],
        scope_types=['project'],
        deprecated_rule=_old('remove', base.PROJECT_MEMBER_OR_ADMIN)),
]

_lock = threading.Lock()


def list_rules():
    """The rules, for oslo.policy's tools (namespace ``nova_cyborg``)."""
    return rules


def register(enforcer):
    """Register the rules with ``enforcer``, those it lacks only (once per
    enforcer: Nova makes a new one when its policy is reset)."""
    with _lock:
        missing = [rule for rule in rules
                   if rule.name not in enforcer.registered_rules]
        if missing:
            enforcer.register_defaults(missing)


def authorize(context, rule, target, fatal=True):
    """``context.can(rule, target, fatal)`` with the rules registered with
    Nova's enforcer (``nova.policy``, made by its ``init``)."""
    nova_policy.init()
    # nova.policy has no public accessor of its enforcer for a service:
    # get_enforcer() is for oslo.policy's tools (it parses the command
    # line again).
    register(nova_policy._ENFORCER)
    return context.can(rule, target=target, fatal=fatal)
