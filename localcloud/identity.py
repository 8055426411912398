"""Keystone: bootstrap, the service users and the service catalog."""

import openstack

from localcloud import layout as layout_mod
from localcloud import procs

#: (service name, type, endpoint path) of the catalog, beside Keystone.
CATALOG = (
    ('placement', 'placement', 'placement', ''),
    ('glance', 'image', 'glance', ''),
    ('nova', 'compute', 'nova', '/v2.1'),
    ('cyborg', 'accelerator', 'cyborg', '/accelerator/v2'),
    ('neutron', 'network', 'neutron', ''),
)


def bootstrap(layout, config_file):
    """``keystone-manage``: schema, keys, the admin account, Keystone's
    own endpoints."""
    manage = [layout.bin('keystone-manage'), '--config-file', config_file]
    procs.run(layout, 'keystone-setup', manage + ['db_sync'])
    for command in ('fernet_setup', 'credential_setup'):
        procs.run(layout, 'keystone-setup', manage + [
            command, '--keystone-user', 'root', '--keystone-group', 'root'])
    procs.run(layout, 'keystone-setup', manage + [
        'bootstrap', '--bootstrap-password', layout_mod.PASSWORD,
        '--bootstrap-admin-url', layout.auth_url,
        '--bootstrap-internal-url', layout.auth_url,
        '--bootstrap-public-url', layout.auth_url,
        '--bootstrap-region-id', layout_mod.REGION])


def admin_connection(layout):
    return openstack.connect(
        auth_url=layout.auth_url, username='admin',
        password=layout_mod.PASSWORD, project_name='admin',
        user_domain_name='Default', project_domain_name='Default',
        region_name=layout_mod.REGION, identity_interface='public')


def register_services(layout):
    """The ``service`` project, one user per service (roles ``admin`` and
    ``service``: Cyborg's bind policy wants the service role), and the
    catalog."""
    conn = admin_connection(layout)
    identity = conn.identity
    project = identity.create_project(name='service', domain_id='default')
    roles = {r.name: r for r in identity.roles()}
    for name in layout_mod.SERVICE_USERS:
        user = identity.create_user(name=name, domain_id='default',
                                    password=layout_mod.PASSWORD,
                                    default_project_id=project.id)
        for role in ('admin', 'service'):
            identity.assign_project_role_to_user(project, user, roles[role])
    for name, type_, port_name, path in CATALOG:
        service = identity.create_service(name=name, type=type_)
        for interface in ('public', 'internal', 'admin'):
            identity.create_endpoint(
                service_id=service.id, interface=interface,
                url=layout.url(port_name, path),
                region_id=layout_mod.REGION)
