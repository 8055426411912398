"""A local all-in-one cloud on loopback, from the real services.

``python -m localcloud up`` (what ``tools/cloud`` runs) starts MariaDB,
RabbitMQ, Keystone, Placement, Glance, a Neutron stand-in, Nova's API,
conductor and scheduler, Cyborg's API and conductor, and simulated compute
hosts (nova-compute, patched, over Nova's fakelibvirt, with the sidecar
beside it), then boots a server with an accelerator and shows it. See
:mod:`localcloud.__main__` for the commands and ``doc/source/localcloud.rst``
for what runs where.
"""
