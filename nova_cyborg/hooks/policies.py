"""Hooks of ``nova.policies`` (patch 0010)."""

from nova_cyborg import policies


def list_rules():
    """Called by ``nova.policies.list_rules()``.

    :returns: the policy rules of addAccelerator and removeAccelerator
        (oslo.policy DocumentedRuleDefault objects).
    """
    return policies.list_rules()
