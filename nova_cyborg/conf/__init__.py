"""Configuration for nova_cyborg.

The options live in the ``[nova_cyborg]`` group so that they never clash
with Nova's own ``[cyborg]`` group, whose keystoneauth session and adapter
options (endpoint, timeouts, retries) nova_cyborg reuses to reach Cyborg.
"""

from oslo_config import cfg

from nova_cyborg.conf import nova_cyborg

CONF = cfg.CONF

nova_cyborg.register_opts(CONF)
