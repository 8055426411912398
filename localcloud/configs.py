"""The configuration files of every service of the local cloud.

Each service authenticates users with keystonemiddleware and reaches the
others as its own user of Keystone's ``service`` project, as in devstack.
"""

import os
import shutil
import sys

from localcloud import layout as layout_mod
from localcloud import release


def _auth(layout, user, section, extra=''):
    """keystoneauth options of ``user``; under ``[section]`` if given."""
    return ("\n[%s]" % section if section else '') + """
auth_type = password
auth_url = {auth_url}
username = {user}
password = {password}
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = {region}
{extra}""".format(auth_url=layout.auth_url, user=user,
                  password=layout_mod.PASSWORD, region=layout_mod.REGION,
                  extra=extra)


def _authtoken(layout, user):
    return _auth(layout, user, 'keystone_authtoken',
                 'www_authenticate_uri = %s\n'
                 'service_token_roles_required = true\n' % layout.auth_url)


def _etc_dir(layout, service, *packaged):
    """``<root>/etc/<service>``, with the named files that the service's
    package installs under ``<prefix>/etc/<service>`` copied in."""
    d = layout.path('etc', service)
    os.makedirs(d, exist_ok=True)
    for name in packaged:
        shutil.copy(os.path.join(sys.prefix, 'etc', service, name), d)
    return d


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text.lstrip())
    return path


def keystone(layout):
    d = layout.path('etc', 'keystone')
    return _write(os.path.join(d, 'keystone.conf'), """
[DEFAULT]
use_stderr = true
[database]
connection = {db}
[token]
provider = fernet
[fernet_tokens]
key_repository = {d}/fernet-keys
[fernet_receipts]
key_repository = {d}/fernet-keys
[credential]
key_repository = {d}/credential-keys
[identity]
# Loopback test accounts: cheap password hashes keep tempest's dynamic
# credentials fast (Keystone's default is 12 bcrypt rounds).
password_hash_rounds = 4
""".format(db=layout.db_url('keystone'), d=d))


def placement(layout):
    return _write(layout.path('etc', 'placement', 'placement.conf'), """
[DEFAULT]
use_stderr = true
[api]
auth_strategy = keystone
[placement_database]
connection = {db}
""".format(db=layout.db_url('placement')) + _authtoken(layout, 'placement'))


def glance(layout):
    d = _etc_dir(layout, 'glance', 'glance-api-paste.ini')
    data = layout.path('glance')
    return _write(os.path.join(d, 'glance-api.conf'), """
[DEFAULT]
use_stderr = true
enabled_backends = fs:file
[database]
connection = {db}
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = {data}/images/
[os_glance_staging_store]
filesystem_store_datadir = {data}/staging/
[os_glance_tasks_store]
filesystem_store_datadir = {data}/tasks/
[oslo_concurrency]
lock_path = {data}/lock
[paste_deploy]
flavor = keystone
""".format(db=layout.db_url('glance'), data=data) +
        _authtoken(layout, 'glance'))


def nova_file(layout):
    """Where :func:`nova` writes nova.conf."""
    return layout.path('etc', 'nova', 'nova.conf')


#: Nova's weighers and this project's function affinity (seed 004).
WEIGHERS = ('nova.scheduler.weights.all_weighers',
            'nova_cyborg.weigher.FunctionAffinityWeigher')


def nova(layout):
    d = _etc_dir(layout, 'nova', 'api-paste.ini')
    state = layout.path('nova')
    return _write(nova_file(layout), """
[DEFAULT]
use_stderr = true
transport_url = {transport}
my_ip = 127.0.0.1
state_path = {state}
instances_path = {state}/instances
compute_driver = libvirt.LibvirtDriver
allow_resize_to_same_host = true
[api]
auth_strategy = keystone
[api_database]
connection = {api_db}
[database]
connection = {cell_db}
[wsgi]
api_paste_config = {d}/api-paste.ini
[libvirt]
virt_type = qemu
[scheduler]
discover_hosts_in_cells_interval = 2
workers = 1
[filter_scheduler]
# Seed 004: a request lands on the card already holding its function.
weight_classes = {weighers}
[conductor]
workers = 1
[oslo_concurrency]
lock_path = {state}/lock
[vnc]
enabled = false
[service_user]
send_service_user_token = true
""".format(transport=layout.transport_url, state=state,
           weighers=','.join(WEIGHERS),
           api_db=layout.db_url('nova_api'),
           cell_db=layout.db_url('nova_cell1'), d=d)
        + _auth(layout, 'nova', None)
        + _authtoken(layout, 'nova')
        + _auth(layout, 'nova', 'placement')
        + _auth(layout, 'nova', 'neutron')
        + _auth(layout, 'nova', 'cyborg')
        + _auth(layout, 'nova', 'glance'))


def compute(layout, host):
    """The per-host file read after nova.conf by a simulated host (its own
    state_path: it holds the host's compute node identity).

    A domain whose server was deleted while its host was down (the API
    deletes it locally) is reaped by nova-compute once the host is back:
    Nova's default action, checked every 10 s, first within 5 s of the
    start instead of Nova's 60 s herd delay (two hosts, no herd).

    Each host has its own address (``my_ip``, the live migration
    address) and its own ``instances_path``, as separate hosts have: Nova
    takes two hosts of one address for shared storage, and a cold
    migration or resize then left the instance directory on the source
    (a live migration back failed with DestinationDiskExists).

    After a host reboot nova-compute starts again the guests of the
    servers that were running (``resume_guests_state_on_host_boot``, as
    a deployer sets it: :mod:`localcloud.reboot`); their devices are back
    first (:mod:`localcloud.boot_order`)."""
    # instances_path exists before a live migration's first check of
    # shared storage (a temporary file in the destination's).
    os.makedirs(layout.instances_path(host), exist_ok=True)
    return _write(layout.path('etc', 'nova', host + '.conf'), """
[DEFAULT]
host = {host}
my_ip = {address}
state_path = {state}
instances_path = {instances}
running_deleted_instance_action = reap
running_deleted_instance_poll_interval = 10
resume_guests_state_on_host_boot = true
periodic_fuzzy_delay = 5
[libvirt]
live_migration_inbound_addr = {address}
[oslo_concurrency]
lock_path = {state}/lock
""".format(host=host, state=layout.path('hosts', host, 'nova'),
           address=layout.host_address(host),
           instances=layout.instances_path(host)))


def cyborg(layout):
    d = _etc_dir(layout, 'cyborg', 'api-paste.ini')
    return _write(os.path.join(d, 'cyborg.conf'), """
[DEFAULT]
use_stderr = true
transport_url = {transport}
# oslo.messaging's ping (oslo_rpc_server_ping): "service start
# cyborg-conductor" waits until the conductor answers it.
rpc_ping_enabled = true
[api]
api_paste_config = {d}/api-paste.ini
[database]
connection = {db}
[oslo_policy]
# Cyborg's secure RBAC defaults (Cyborg 17 itself defaults to the legacy
# rules): project reader/member/manager personas, the service role may
# write ARQs. oslo.policy 4.5+ always enforces the rules' scope_types (no
# enforce_scope option left): a system-scoped token gets 403 on every
# Cyborg API, all of which are project-scoped.
enforce_new_defaults = true
""".format(transport=layout.transport_url, db=layout.db_url('cyborg'), d=d)
        + _authtoken(layout, 'cyborg')
        + _auth(layout, 'cyborg', 'placement')
        + _auth(layout, 'cyborg', 'nova'))


#: The openstacksdk cloud in which cyborg-conductor looks bitstreams up
#: (Cyborg 17 hard-codes the name; devstack defines it).
CYBORG_GLANCE_CLOUD = 'devstack-admin'


def clouds_yaml(layout):
    """An openstacksdk ``clouds.yaml`` for cyborg-conductor.

    Cyborg 17's conductor reads a bitstream's metadata from Glance through
    ``openstack.connection.Connection(cloud='devstack-admin')`` when it
    binds an accelerator request whose device profile names a bitstream
    (``accel:bitstream_id``) or a function (``accel:function_id``). The
    cloud is Cyborg's own service user (roles admin and service), so it
    sees every image; ``cyborg-conductor`` is started with
    ``OS_CLIENT_CONFIG_FILE`` naming this file.
    """
    return _write(layout.path('etc', 'openstack', 'clouds.yaml'), """
clouds:
  {cloud}:
    auth:
      auth_url: {auth_url}
      username: cyborg
      password: {password}
      project_name: service
      user_domain_name: Default
      project_domain_name: Default
    identity_api_version: 3
    region_name: {region}
    interface: public
""".format(cloud=CYBORG_GLANCE_CLOUD, auth_url=layout.auth_url,
           password=layout_mod.PASSWORD, region=layout_mod.REGION))


def program_command(sysfs_root):
    """The FPGA programmer: a stand-in card loading a bitstream's id."""
    return ' '.join((sys.executable, os.path.join(
        layout_mod.REPO_ROOT, 'tests', 'functional', 'harness',
        'fpga_device.py'), sysfs_root, '{address}', '{bitstream}'))


#: The sidecar's ``[pci] device_spec``: the VFs of the simulated hosts'
#: plain PFs (``localcloud.devices.MIGRATABLE_PF``, after the FPGAs)
#: support VFIO migration; the generic PCI driver gives their provider
#: ``HW_PCI_LIVE_MIGRATABLE``. The FPGAs' VFs (FPGA driver) do not.
MIGRATABLE_SPEC = ('{"vendor_id": "8086", "product_id": "1528", '
                   '"resource_class": "%s", "live_migratable": true}')
#: The resource class of those VFs.
MIGRATABLE_RC = 'CUSTOM_MIGRATABLE_VF'


#: The sidecar's ``[gpu]`` options on hosts with GPUs: fakelibvirt's
#: mdev-capable GPUs (NVIDIA, ``localcloud.devices``) are vGPUs of their
#: mdev type ``nvidia-11`` (16 a GPU).
VGPU_MDEV_TYPE = 'nvidia-11'
#: The trait of those vGPUs' providers (the gpu driver's gpu_trait: the
#: GPU's product id, 0ffe, and the type's name, GRID M60-0B).
VGPU_MDEV_TRAIT = 'CUSTOM_NVIDIA_0FFE_M60_0B'
#: On hosts with vGPU 17 cards (H100s, ``localcloud.devices``), the type
#: each VF takes when Cyborg binds it: H100-20C, 4 a GPU, one a VF.
VGPU17_TYPE = 'NVIDIA H100-20C'
VGPU17_TRAIT = 'CUSTOM_NVIDIA_2331_H100_20C'


def gpu_options(layout):
    """The sidecar's ``[gpu]`` section for the layout's GPUs, or ''."""
    if not (layout.gpus or layout.vgpu17):
        return ''
    return ('[gpu]\ndevice_selector = 10de:*\n' +
            ('enabled_mdev_types = %s\n' % VGPU_MDEV_TYPE
             if layout.gpus else '') +
            ('vfio_vgpu_types = 2331:%s\n' % VGPU17_TYPE
             if layout.vgpu17 else ''))


def sidecar(layout, host, sysfs_root):
    """The host's sidecar: its ``fpga`` driver reports the FPGAs, ``pci``
    the live-migratable VFs and, on hosts with GPUs, ``gpu`` the vGPUs:
    the mdev GPUs' and the vGPU 17 cards' (:mod:`localcloud.devices`)."""
    drivers = 'fpga,pci' + (',gpu' if layout.gpus or layout.vgpu17
                            else '')
    return _write(layout.path('etc', 'nova-cyborg', host + '-sidecar.conf'),
                  """
[DEFAULT]
host = {host}
transport_url = {transport}
[sidecar]
enabled_drivers = {drivers}
sysfs_root = {sysfs}
state_path = {state}
admit_new_devices = disabled
[fpga]
programmer = command
program_command = {command}
[pci]
device_spec = {spec}
""".format(host=host, transport=layout.transport_url, sysfs=sysfs_root,
           drivers=drivers, state=layout.path('hosts', host, 'sidecar'),
           command=program_command(sysfs_root),
           spec=MIGRATABLE_SPEC % MIGRATABLE_RC)
        + gpu_options(layout)
        + _auth(layout, 'cyborg', 'placement')
        + _auth(layout, 'cyborg', 'glance')
        # The ARQs of a device's consumers (what function they want).
        + _auth(layout, 'cyborg', 'cyborg')
        + _upgrade_levels(layout))


def _upgrade_levels(layout):
    """A sidecar beside an older cyborg-conductor (that service's
    release, localcloud.release) sends its reports at that release."""
    level = release.of(layout.python_for('cyborg-conductor')
                       ).conductor_level
    if not level:
        return ''
    return '\n[upgrade_levels]\ncyborg_conductor = %s\n' % level
