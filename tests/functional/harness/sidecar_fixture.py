"""One nova-cyborg sidecar per simulated host, in the test process.

The sidecar runs beside Nova (not in Cyborg's child process) because it asks
libvirt which devices domains use, and the domains of a simulated host live
in that host's fakelibvirt connection in this process. It reaches the real
cyborg-conductor through RabbitMQ (:mod:`tests.functional.harness.broker`),
Placement and Glance over loopback HTTP, and reads a sysfs tree written by
:mod:`sidecar_simulator.host` for the same PCI addresses fakelibvirt shows
Nova.

FPGAs are programmed with the ``command`` programmer running
:mod:`tests.functional.harness.fpga_device`, which stands in for the card: it
loads the function id a test bitstream names into the region's ``afu_id``.
"""

from importlib import metadata
import os
import sys

import fixtures
import oslo_messaging as messaging
from oslo_config import cfg

from sidecar import conf as sidecar_conf
from sidecar import privileged
from sidecar.daemon import factory
from sidecar.report import objects as report_objects
from tests.functional.harness import child
from tests.functional.harness import guest_kernel
from tests.functional.harness import identity

CONFIG_TEMPLATE = """\
[DEFAULT]
host = {host}

[sidecar]
enabled_drivers = {drivers}
sysfs_root = {sysfs_root}
state_path = {state_path}
admit_new_devices = {admit}
report_interval = 3600
resync_interval = 0
rpc_response_timeout = {rpc_timeout}
nova_config_file = {nova_config_file}

[gpu]
enabled_mdev_types = {mdev_types}
device_selector = {gpu_selector}

[fpga]
programmer = command
program_command = {program_command}

[placement]
auth_type = admin_token
endpoint = {placement_url}
token = admin

[glance]
auth_type = none
endpoint_override = {glance_url}

[cyborg]
auth_type = admin_token
endpoint = {cyborg_url}
token = {cyborg_token}
{upgrade_levels}"""

REPO_ROOT = child.REPO_ROOT


def write_config(path, **values):
    # By path: privsep's daemon runs commands from '/'.
    values.setdefault('program_command', ' '.join((
        sys.executable, os.path.join(os.path.dirname(__file__),
                                     'fpga_device.py'),
        values['sysfs_root'], '{address}', '{bitstream}')))
    values.setdefault('drivers', 'fpga')
    values.setdefault('mdev_types', '')
    values.setdefault('rpc_timeout', 30)
    # Most tests boot on the devices at once; admission has its own tests.
    values.setdefault('admit', 'enabled')
    values.setdefault('glance_url', 'http://127.0.0.1:9')
    # Cyborg's API, read before programming (nothing listens on port 9).
    values.setdefault('cyborg_url', 'http://127.0.0.1:9')
    values.setdefault('cyborg_token', identity.ADMIN_TOKEN)
    # Nova's fakelibvirt GPUs; tests write a nova.conf beside the config
    # to have devices refused as Nova's.
    values.setdefault('gpu_selector', '10de:*')
    values.setdefault('nova_config_file', os.path.join(
        os.path.dirname(path), 'nova.conf'))
    values.setdefault('upgrade_levels', _upgrade_levels())
    with open(path, 'w') as f:
        f.write(CONFIG_TEMPLATE.format(**values))
    return path


def _conductor_release():
    """The release of the cyborg-conductor installed here, if older than
    this project's default (Cyborg 16, beside Nova 33: ``2026.1``)."""
    return report_objects.conductor_pin(metadata.version('openstack-cyborg'))


def _upgrade_levels():
    """``[upgrade_levels]`` for the cyborg-conductor installed here: an
    older one reads reports at its release."""
    release = _conductor_release()
    if release:
        return '\n[upgrade_levels]\ncyborg_conductor = %s\n' % release
    return ''


def conductor_device_types():
    """The device types a sidecar reports to the cyborg-conductor
    installed here (to Cyborg 16's: no MDEV or NVME; PCI as GPU)."""
    version = report_objects.target_version(_conductor_release())
    return tuple(t for t in report_objects.DEVICE_TYPES
                 if report_objects.wire_type(t, version))


def make_conf(args=()):
    """A sidecar's own ConfigOpts, parsed from ``args`` only."""
    conf = cfg.ConfigOpts()
    sidecar_conf.register_opts(conf)
    conf(list(args), project='nova-cyborg', default_config_files=[],
         default_config_dirs=[])
    return conf


class SidecarFixture(fixtures.Fixture):
    """A started sidecar for ``host``.

    :param simulated: a :class:`sidecar_simulator.host.SimulatedHost`; its tree
        is written under this fixture's directory.
    :param connect: returns the libvirt connection to ask about domains.
    :param cyborg_url: Cyborg's API (``.../accelerator/v2``), which the
        sidecar asks what the servers allocated on an FPGA want before
        programming it; without it every programming of a card some server
        is allocated on is refused.
    :param program_lease: ignored (``[sidecar] program_lease`` is
        deprecated; the allocations are the promise).

    After setUp: ``sidecar`` (the service), ``simulated``, ``sysfs_root``,
    ``config_path``.
    """

    def __init__(self, host, simulated, transport_url, placement_url,
                 connect, glance_url=None, drivers=('fpga',),
                 mdev_types=(), program_lease=None, extra='',
                 rpc_timeout=30, cyborg_url=None, admit='enabled'):
        super().__init__()
        self.host = host
        self.simulated = simulated
        self.transport_url = transport_url
        self.placement_url = placement_url
        self.connect = connect
        self.glance_url = glance_url
        self.drivers = drivers
        self.mdev_types = mdev_types
        self.extra = extra
        self.rpc_timeout = rpc_timeout
        self.cyborg_url = cyborg_url
        self.admit = admit

    def _setUp(self):
        base = self.useFixture(fixtures.TempDir()).path
        self.sysfs_root = self.simulated.write(os.path.join(base, 'sys'))
        # The host's FPGA functions follow its guests (vfio-pci).
        self.useFixture(guest_kernel.GuestKernel(self.connect,
                                                 self.simulated))
        self.config_path = write_config(
            os.path.join(base, 'sidecar.conf'), host=self.host,
            drivers=','.join(self.drivers),
            mdev_types=','.join(self.mdev_types),
            sysfs_root=self.sysfs_root,
            state_path=os.path.join(base, 'state'),
            rpc_timeout=self.rpc_timeout, admit=self.admit,
            placement_url=self.placement_url,
            glance_url=self.glance_url or 'http://127.0.0.1:9',
            cyborg_url=self.cyborg_url or 'http://127.0.0.1:9')
        if self.extra:
            with open(self.config_path, 'a') as f:
                f.write('\n' + self.extra + '\n')
        # Privileged calls run in this process (the tests run as root).
        privileged.sidecar_pctxt.set_client_mode(False)
        self.addCleanup(privileged.sidecar_pctxt.set_client_mode, True)

        # oslo.messaging's RabbitMQ listeners wait for messages in turns
        # that grow to ACK_REQUEUE_EVERY_SECONDS_MAX (5 s), and stopping
        # one waits for its turn to end: about 4 s of each test's cleanup
        # spent idle. Shorter turns here; nothing else changes.
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_messaging._drivers.amqpdriver.'
            'ACK_REQUEUE_EVERY_SECONDS_MAX', 0.25))
        self.conf = make_conf(['--config-file', self.config_path])
        transport = messaging.get_rpc_transport(self.conf,
                                                url=self.transport_url)
        self.addCleanup(transport.cleanup)
        self.sidecar = factory.build(self.conf, transport=transport,
                                     connect=self.connect)
        self.sidecar.start()
        self.addCleanup(self.sidecar.stop)

    def cycle(self):
        """Run one discovery cycle now; True if a report was sent."""
        sends = self.sidecar.reporter.sends
        self.sidecar.run_cycle()
        return self.sidecar.reporter.sends > sends
