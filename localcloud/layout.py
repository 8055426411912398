"""Where the local cloud keeps its state, and the ports it serves on."""

import dataclasses
import json
import os
import sys

DEFAULT_DIR = os.environ.get('NOVA_CYBORG_CLOUD_DIR',
                             '/tmp/nova-cyborg-cloud')
DEFAULT_PORT_BASE = int(os.environ.get('NOVA_CYBORG_CLOUD_PORT_BASE', 25000))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Port offsets from the base, one per listening service.
PORTS = ('keystone', 'placement', 'glance', 'nova', 'cyborg', 'neutron',
         'mariadb', 'rabbit')

#: Databases of the cloud (MariaDB), one per service (Nova has three).
DATABASES = ('keystone', 'placement', 'glance', 'nova_api', 'nova_cell0',
             'nova_cell1', 'cyborg')

#: Service users of Keystone's "service" project.
SERVICE_USERS = ('nova', 'placement', 'glance', 'cyborg', 'neutron')

REGION = 'RegionOne'
PASSWORD = 'nova-cyborg'          # loopback only: every account's password
DB_USER = 'openstack'

#: A file ``<uuid><MIGRATION_FAIL_SUFFIX>`` in the domain directory makes
#: the next live migration of that domain fail at the source (tests use it;
#: localcloud.migration honours it).
MIGRATION_FAIL_SUFFIX = '.fail-migration'

#: The VFs one FPGA PF may have: its card's ports, one released to each VF
#: (drivers/fpga/dfl.h MAX_DFL_FPGA_PORT_NUM; sidecar_simulator.dfl).
MAX_FPGA_VFS_PER_PF = 4


def check_fpgas(pfs, vfs):
    """Raise ValueError unless ``pfs`` FPGA PFs with ``vfs`` VFs in all
    can be simulated: an Intel DFL card serves at most
    :data:`MAX_FPGA_VFS_PER_PF` VFs, one port each."""
    per_pf = vfs // pfs if pfs else 0
    if per_pf > MAX_FPGA_VFS_PER_PF:
        raise ValueError(
            '%d FPGA VFs on %d PFs is %d VFs per PF: an FPGA card has at '
            'most %d ports, one per VF (give --vfs at most %d, or more '
            '--pfs)' % (vfs, pfs, per_pf, MAX_FPGA_VFS_PER_PF,
                        MAX_FPGA_VFS_PER_PF * pfs))


@dataclasses.dataclass
class Layout:
    """Paths and ports of one cloud; saved in ``<root>/layout.json``."""

    root: str = DEFAULT_DIR
    port_base: int = DEFAULT_PORT_BASE
    computes: int = 2
    pfs: int = 1
    vfs: int = 4
    #: mdev-capable GPUs (vGPUs) per host (localcloud.devices).
    gpus: int = 1
    #: NVIDIA vGPU 17 cards (H100s: a type written to each VF) per host.
    vgpu17: int = 1
    #: Hosts whose nova-compute is unpatched Nova (localcloud.pristine).
    unpatched: int = 0
    #: The Python executable each process runs: ``control`` for the
    #: control plane's services (and their tools), a host's name for its
    #: nova-compute and sidecar; missing: this interpreter. ``upgrade``
    #: moves them to another environment (localcloud.upgrade).
    pythons: dict = dataclasses.field(default_factory=dict)

    def port(self, name):
        return self.port_base + PORTS.index(name)

    def url(self, name, path=''):
        return 'http://127.0.0.1:%d%s' % (self.port(name), path)

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    @property
    def auth_url(self):
        return self.url('keystone', '/v3')

    @property
    def cyborg_url(self):
        return self.url('cyborg', '/accelerator/v2')

    @property
    def transport_url(self):
        return 'rabbit://guest:guest@127.0.0.1:%d/' % self.port('rabbit')

    def db_url(self, database):
        return ('mysql+pymysql://%s:%s@127.0.0.1:%d/%s?charset=utf8mb4' %
                (DB_USER, PASSWORD, self.port('mariadb'), database))

    @property
    def hosts(self):
        """Every compute host: the patched ones, then the unpatched."""
        return ['compute%d' % (i + 1) for i in range(self.computes)] + (
            self.unpatched_hosts)

    @property
    def unpatched_hosts(self):
        """``compute-old``, ``compute-old2``, ...: nova-compute from
        pristine Nova (:mod:`localcloud.pristine`)."""
        return ['compute-old%s' % (i + 1 if i else '')
                for i in range(self.unpatched)]

    def host_address(self, host):
        """The compute host's own address: its ``my_ip`` and live
        migration address, on the loopback range (Linux routes all of
        127.0.0.0/8 to ``lo``). Two hosts with one address would be one
        host to Nova (shared storage); the middle bytes are the port
        base's, so that two clouds' hosts differ too."""
        return '127.%d.%d.%d' % ((self.port_base >> 8) & 255,
                                 self.port_base & 255,
                                 self.hosts.index(host) + 2)

    def instances_path(self, host):
        """The host's ``instances_path``: its own disk."""
        return self.path('hosts', host, 'nova', 'instances')

    @property
    def domain_xml_dir(self):
        return self.path('domains')

    @property
    def python(self):
        """The control plane's Python."""
        return self.pythons.get('control') or sys.executable

    def python_for(self, process):
        """The Python that runs ``process`` (a host's name, or a control
        plane service's)."""
        return self.pythons.get(process) or self.python

    def bin(self, name):
        """A console script of the control plane's environment."""
        return os.path.join(os.path.dirname(self.python), name)

    def save(self):
        os.makedirs(self.root, exist_ok=True)
        with open(self.path('layout.json'), 'w') as f:
            json.dump(dataclasses.asdict(self), f, indent=1)

    @classmethod
    def load(cls, root=DEFAULT_DIR):
        try:
            with open(os.path.join(root, 'layout.json')) as f:
                fields = json.load(f)
        except FileNotFoundError:
            return None
        # A cloud started before its hosts had GPUs keeps its devices.
        fields.setdefault('gpus', 0)
        fields.setdefault('vgpu17', 0)
        return cls(**fields)
