"""What a user of the local cloud gets: openrc, clouds.yaml, tempest.conf."""

import os

from localcloud import layout as layout_mod

CLOUD = 'nova-cyborg'

OPENRC = """\
# The local cloud's admin account (loopback only). Source it:
#   . {root}/openrc
export OS_AUTH_URL={auth_url}
export OS_IDENTITY_API_VERSION=3
export OS_USERNAME=admin
export OS_PASSWORD={password}
export OS_PROJECT_NAME=admin
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME={region}
export OS_INTERFACE=public
export OS_COMPUTE_API_VERSION=2.95
export OS_PLACEMENT_API_VERSION=1.39
"""

TEMPEST_CONF = """\
[DEFAULT]
log_file = {root}/logs/tempest.log

[auth]
admin_username = admin
admin_password = {password}
admin_project_name = admin
admin_domain_name = Default
use_dynamic_credentials = true
create_isolated_networks = false
tempest_roles = member

[identity]
uri_v3 = {auth_url}
auth_version = v3
region = {region}
v3_endpoint_type = public

[identity-feature-enabled]
api_v2 = false

[compute]
image_ref = {image}
image_ref_alt = {image}
flavor_ref = {flavor}
flavor_ref_alt = {flavor}
min_compute_nodes = {computes}
min_microversion = 2.1
max_microversion = latest
region = {region}
build_timeout = 120

[compute-feature-enabled]
resize = true
# A cold migration is an admin's request on a user's server: the plugin's
# AdminColdMigrationTest moves it as an admin of another project, then the
# owner confirms or deletes it.
cold_migration = true
# Live migration hands the domain from one simulated host to the other
# through their shared domain directory (localcloud.migration). Each host
# has its own instances_path (no shared storage): block migration, which
# copies no disk here (the hosts write none).
live_migration = true
block_migration_for_live_migration = true
shelve = true
suspend = true
pause = true
rescue = true
# The simulated hosts write no guest disks, so there is nothing to
# snapshot (the functional tests cover snapshot with Nova's fixtures).
snapshot = false
console_output = false
interface_attach = false
attach_encrypted_volume = false
vnc_console = false
serial_console = false
spice_console = false
personality = false

[image]
region = {region}
image_path =
disk_formats = raw,qcow2

[image-feature-enabled]
api_v1 = false
api_v2 = true

[network]
region = {region}

[placement]
region = {region}

[validation]
run_validation = false

[service_available]
nova = true
glance = true
neutron = false
cinder = false
swift = false
horizon = false
cyborg = true
nova_cyborg = true

[nova_cyborg]
domain_xml_dir = {domain_xml_dir}
fpga_sysfs_dir = {hosts_dir}

[accelerator]
region = {region}

[cyborg_policy]
# Cyborg runs with [oslo_policy] enforce_new_defaults (localcloud.configs):
# cyborg-tempest-plugin's SRBAC classes run, and its API tests use the
# reader, member and manager personas instead of the admin.
enforce_new_defaults = true
"""


def _write(path, text):
    with open(path, 'w') as f:
        f.write(text)
    return path


def _openrc(layout):
    return OPENRC.format(root=layout.root, auth_url=layout.auth_url,
                         password=layout_mod.PASSWORD,
                         region=layout_mod.REGION)


def write_openrc(layout):
    return _write(layout.path('openrc'), _openrc(layout))


def openrc_env(layout):
    """The environment ``openrc`` sets, on top of this process's."""
    env = dict(os.environ)
    for line in _openrc(layout).splitlines():
        if line.startswith('export '):
            key, value = line[len('export '):].split('=', 1)
            env[key] = value
    return env


def write_tempest(layout, image, flavor):
    """A tempest workspace under ``<root>/tempest``; returns its conf."""
    workspace = layout.path('tempest')
    os.makedirs(os.path.join(workspace, 'etc'), exist_ok=True)
    test_path = _tempest_test_path()
    # As "tempest init" writes it: a class's tests run in one worker, so
    # that its class fixtures (cyborg-tempest-plugin's SRBAC classes create
    # device profiles with fixed names) are set up once, not per worker.
    _write(os.path.join(workspace, '.stestr.conf'),
           '[DEFAULT]\ntest_path=%s\ntop_dir=%s\n'
           'group_regex=([^\\.]*\\.)*\n' % (
               test_path, os.path.dirname(os.path.dirname(test_path))))
    return _write(os.path.join(workspace, 'etc', 'tempest.conf'),
                  TEMPEST_CONF.format(
                      root=layout.root, auth_url=layout.auth_url,
                      password=layout_mod.PASSWORD, region=layout_mod.REGION,
                      image=image, flavor=flavor, computes=layout.computes,
                      domain_xml_dir=layout.domain_xml_dir,
                      hosts_dir=layout.path('hosts')))


def _tempest_test_path():
    import tempest.test_discover
    return os.path.dirname(tempest.test_discover.__file__)
