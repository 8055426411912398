"""Configuration of the sidecar daemon.

Options are registered on the ``ConfigOpts`` object the caller passes, never
implicitly on the global ``cfg.CONF``: the daemon's ``main`` passes
``cfg.CONF``; tests build one ``ConfigOpts`` per simulated host.
"""

import copy
import importlib
import socket

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_privsep import priv_context

from sidecar.report import objects as report_objects

DEFAULT_OPTS = [
    cfg.StrOpt('host',
               default=socket.gethostname(),
               sample_default='<current_hostname>',
               help='Name of this compute host. It must equal '
                    'nova-compute\'s ``[DEFAULT] host``: cyborg-conductor '
                    'calls the sidecar on the RPC server of that name '
                    '(topic ``cyborg-agent``), '
                    'and deployables are named ``<host>_<pci address>``.'),
]

SIDECAR_OPTS = [
    cfg.ListOpt('enabled_drivers',
                default=['pci'],
                help='Discovery drivers to load, by entry point name in the '
                     '``nova_cyborg.sidecar.drivers`` namespace. Shipped: '
                     '``pci`` (generic, selected by ``[pci] device_spec``), '
                     '``fpga``, ``gpu`` and ``fake``.'),
    cfg.StrOpt('discovery_source',
               default='sysfs',
               choices=[('sysfs', 'Read PCI devices under ``sysfs_root``.'),
                        ('libvirt', 'Read PCI node devices from libvirt at '
                                    '``libvirt_uri``.')],
               help='Where drivers read the host\'s PCI devices from. FPGA '
                    'and mdev details always come from sysfs.'),
    cfg.StrOpt('sysfs_root',
               default='/sys',
               help='Root of the sysfs tree. Tests and demos point it at a '
                    'generated tree.'),
    cfg.StrOpt('libvirt_uri',
               default='qemu:///system',
               help='libvirt connection (read-only) used to list node devices '
                    'and to find which devices running domains use.'),
    cfg.StrOpt('resource_provider_name',
               help='Name of this host\'s compute node resource provider in '
                    'Placement, sent as the host name of every report. '
                    'Defaults to ``[DEFAULT] host``. Until it is in '
                    'Placement nothing is reported.'),
    cfg.IntOpt('report_interval',
               default=60, min=1,
               help='Seconds between discovery cycles once Placement '
                    'matches the host. Each cycle sends a report only when '
                    'the devices changed, and checks this host\'s device '
                    'providers in Placement (two reads while nothing '
                    'changed), repairing what is wrong. After a cycle that '
                    'left something wrong, the next one comes after 1 s, '
                    'doubling up to this interval, with jitter.'),
    cfg.IntOpt('resync_interval',
               default=0, min=0,
               help='Seconds after which an unchanged device list is sent '
                    'to cyborg-conductor again anyway. 0 (the default) '
                    'never does: the sidecar checks Placement every cycle '
                    'instead, and a converged host sends no RPC. To make '
                    'a conductor whose database was restored from a backup '
                    'relearn a host\'s devices, send the daemon SIGHUP.'),
    cfg.StrOpt('state_path',
               default='/var/lib/nova-cyborg-sidecar',
               help='Directory for the sidecar\'s state: the programming '
                    'journal, the devices\' admin state (``holds.json``), '
                    'the last discovered devices and the host CLI\'s '
                    'socket. It must survive restarts of the daemon.'),
    cfg.StrOpt('admit_new_devices',
               default='disabled',
               choices=[('disabled',
                         'A device discovered for the first time is '
                         'reported with its providers fully reserved '
                         '(held ``new``) until an operator runs '
                         '``nova-cyborg-sidecar-manage device enable``.'),
                        ('enabled',
                         'A new device is offered for scheduling at once '
                         '(the behaviour of earlier releases).')],
               help='Whether newly discovered devices are offered for '
                    'scheduling. The default, ``disabled``, suits new '
                    'installs. Upgrades: at the first start of this '
                    'release (no ``holds.json`` under ``state_path``) '
                    'every device whose resource provider already exists '
                    'in Placement is admitted, so devices in service stay '
                    'in service; set ``enabled`` to keep admitting every '
                    'new device as earlier releases did. Enable and '
                    'disable are kept in ``holds.json`` and survive '
                    'restarts and cyborg-conductor\'s inventory '
                    'rewrites.'),
    cfg.IntOpt('program_lease',
               default=600, min=0,
               deprecated_for_removal=True,
               deprecated_reason='A device is no longer promised for a '
                                 'fixed time: it is promised to the '
                                 'function of every server holding a '
                                 'Placement allocation on it, read from '
                                 'Placement and Cyborg (``[cyborg]``) '
                                 'before each programming.',
               help='Ignored.'),
    cfg.IntOpt('program_timeout',
               default=900, min=1,
               help='Seconds one programming job may take before it is '
                    'considered failed.'),
    cfg.IntOpt('rpc_response_timeout',
               default=120, min=1,
               help='Seconds to wait for cyborg-conductor to answer a '
                    'report.'),
    cfg.StrOpt('nova_config_file',
               default='/etc/nova/nova.conf',
               help='nova-compute\'s configuration file on this host. The '
                    'sidecar reads its ``[pci] device_spec`` (and '
                    '``passthrough_whitelist``), ``[pci] alias`` and '
                    '``[devices] enabled_mdev_types`` whenever it changes, '
                    'and never reports a device one of whose functions '
                    'Nova manages itself: it logs a WARNING naming the '
                    'device and the Nova entry instead. A missing file '
                    'means Nova manages no device. Empty: do not read '
                    'it.'),
]

PCI_OPTS = [
    cfg.MultiStrOpt('device_spec',
                    default=[],
                    help='A JSON object selecting PCI functions the ``pci`` '
                         'driver reports, in the spirit of Nova\'s '
                         '``[pci] device_spec``. Keys: ``vendor_id``, '
                         '``product_id`` (hex, or ``*``), ``address`` (a '
                         'glob such as ``0000:81:*``), ``resource_class`` '
                         '(default ``PCI``, becomes ``CUSTOM_PCI``), '
                         '``traits`` (a list, normalized to ``CUSTOM_`` '
                         'names unless standard), ``physical_function`` '
                         '(true: report PFs; false (default): report VFs '
                         'of matched PFs, or the function itself when it '
                         'has none), ``live_migratable`` (true, or '
                         '``"yes"`` as in Nova\'s own option: the functions\' '
                         'driver supports VFIO migration; the device\'s '
                         'provider gets the trait ``HW_PCI_LIVE_MIGRATABLE`` '
                         'and a server using it may be live migrated; false '
                         '(default): such a server is refused live '
                         'migration). May be repeated.'),
]

GPU_OPTS = [
    cfg.ListOpt('enabled_mdev_types',
                default=[],
                help='mdev types (for example ``nvidia-35``) the ``gpu`` '
                     'driver offers as VGPU. A GPU with none of these '
                     'types is offered whole, as PGPU.'),
    cfg.ListOpt('live_migratable_mdev_types',
                default=[],
                help='Those of ``enabled_mdev_types`` whose vendor driver '
                     'supports VFIO migration of the mdev\'s device state '
                     '(check the vendor\'s documentation for the driver '
                     'version the host runs). The VGPU provider of a GPU '
                     'offering one of them gets the trait '
                     '``HW_PCI_LIVE_MIGRATABLE``, and a server using it may '
                     'be live migrated to a host offering the same type. '
                     'Empty (the default): servers with vGPUs are refused '
                     'live migration.'),
    cfg.ListOpt('device_selector',
                default=[],
                help='The GPUs the ``gpu`` driver may report: each item is '
                     'either ``<vendor_id>:<product_id>`` (hex, either may '
                     'be ``*``), for example ``10de:1eb8`` or ``10de:*``, '
                     'or a PCI address glob with a dot, for example '
                     '``0000:81:00.0`` or ``0000:3b:*.*``. Empty (the '
                     'default): no GPU is reported. Whatever it selects, '
                     'the host\'s own display (a VGA controller with '
                     '``boot_vga`` 1) and BMC display controllers (ASPEED, '
                     'Matrox) are never reported.'),
    cfg.DictOpt('mdev_max_instances',
                default={},
                help='How many vGPUs of an mdev type one GPU with SR-IOV '
                     'can host, as ``<mdev type>:<count>`` items, for '
                     'example ``nvidia-474:4``: what Nova\'s '
                     '``[mdev_<type>] max_instances`` says. On such a GPU '
                     '(vGPU 16 and earlier on A100, A30, A40, A16) each VF '
                     'is the mdev parent of at most one vGPU and says 1 '
                     'available while the GPU is not full, so only the '
                     'operator knows how many fit (the GPU\'s framebuffer '
                     'over the type\'s). The ``gpu`` driver reports such a '
                     'GPU as one VGPU provider of this many (at most one '
                     'per VF offering the type). Without an entry it '
                     'reports what the VFs say, summed, and warns that it '
                     'may be more than the GPU hosts.'),
    cfg.ListOpt('passthrough_drivers',
                default=['vfio-pci'],
                help='The host drivers a GPU offered whole (PGPU) may be '
                     'bound to: ``vfio-pci`` or a vendor\'s VFIO variant '
                     'driver. A GPU bound to any other driver (``nvidia``, '
                     '``nouveau``, ``amdgpu``) is used by the host and is '
                     'not offered; a GPU bound to no driver is. The other '
                     'functions of its IOMMU group must be bridges, or '
                     'functions of the same card bound to one of these or '
                     'to none.'),
    cfg.ListOpt('vfio_vgpu_types',
                default=[],
                help='vGPU types (NVIDIA vGPU 17 and later) the ``gpu`` '
                     'driver may set on an idle VF at bind, as '
                     '``<product_id>:<type name>`` items, for example '
                     '``2331:NVIDIA H100-4C``. A VF of such a card bound to '
                     '``nvidia`` without a type (``nvidia/current_vgpu_type`` '
                     '0) whose ``nvidia/creatable_vgpu_types`` lists one of '
                     'them (the first, in option order) is offered as a '
                     'VGPU with that type\'s trait. Its attach handle is '
                     'an MDEV handle marked ``vgpu_framework=vendor-vfio``, '
                     '``managed=no``: cyborg-conductor asks the sidecar '
                     '(``create_vgpu_mdev``) to write the type when it binds '
                     'an ARQ to the VF, refused cleanly when the card can no '
                     'longer host it or a server, an allocation or another '
                     'type holds the VF, and Nova passes the VF through as '
                     'a PCI function with ``managed=\'no\'``. At unbind the '
                     'sidecar writes 0 back, unless a domain or another '
                     'consumer still holds the VF. VFs whose type an '
                     'operator set keep a PCI handle and their type. Empty '
                     '(the default): only those are offered.'),
]

FPGA_OPTS = [
    cfg.StrOpt('programmer',
               default='dfl',
               choices=[('dfl',
                         'An Intel DFL card (PAC A10, D5005, N3000, '
                         'N6000): the ``DFL_FPGA_FME_PORT_PR`` ioctl on '
                         '``<dfl_dev_dir>/dfl-fme.N`` with a raw partial '
                         'bitstream for the port of the deployable.'),
                        ('command',
                         'A vendor command, ``program_command``.'),
                        ('fpga_manager',
                         'Removed: the sidecar refuses to start with it. '
                         'It wrote the FPGA manager\'s ``firmware`` file, '
                         'which only Xilinx\'s downstream kernel has; use '
                         '``dfl`` or ``command``.')],
               help='How a bitstream is written to an FPGA. Runs through '
                    'oslo.privsep.'),
    cfg.StrOpt('dfl_dev_dir',
               default='/dev',
               help='Where the DFL character devices (``dfl-fme.N``) are, '
                    'for ``programmer = dfl``.'),
    cfg.DictOpt('driver_programmers',
                default={},
                help='The programmer of each FPGA driver, for a host with '
                     'cards of several vendors: ``<driver>:<programmer>`` '
                     'pairs, the driver being the deployable\'s '
                     '``driver_name`` (``intel``, ``xilinx``, ``inspur`` or '
                     'the PCI vendor id), the programmer one of '
                     '``programmer``\'s choices; for example '
                     '``intel:dfl,xilinx:command``. A driver not '
                     'named here uses ``programmer``.'),
    cfg.StrOpt('program_command',
               help='Vendor programming command for ``programmer = '
                    'command``. ``{address}`` and ``{bitstream}`` are '
                    'replaced by the PCI address and the bitstream file, '
                    '``{segment}``, ``{bus}``, ``{device}`` and '
                    '``{function}`` by the address\'s parts in hex (OPAE: '
                    '``fpgaconf --segment 0x{segment} -B 0x{bus} -D '
                    '0x{device} {bitstream}``); the command is split with '
                    'shlex and never run through a shell.'),
    cfg.StrOpt('firmware_path',
               default='/lib/firmware',
               deprecated_for_removal=True,
               deprecated_reason='Only the removed ``fpga_manager`` '
                                 'programmer read it.',
               help='Unused: the directory the removed ``fpga_manager`` '
                    'programmer installed bitstreams in.'),
    cfg.IntOpt('max_bitstream_size',
               default=1024, min=1,
               help='Largest bitstream (MiB) the sidecar downloads.'),
]

GROUPS = {
    'sidecar': SIDECAR_OPTS,
    'pci': PCI_OPTS,
    'gpu': GPU_OPTS,
    'fpga': FPGA_OPTS,
}

#: Default ``[placement] timeout`` (seconds) of the sidecar's requests.
PLACEMENT_TIMEOUT = 30

KSA_GROUPS = {
    'cyborg': 'accelerator',
    'glance': 'image',
    'placement': 'placement',
}

#: Groups whose requests time out after PLACEMENT_TIMEOUT by default: an
#: ``fpga_program`` call reads them while holding the device.
TIMED_GROUPS = ('cyborg', 'placement')


def _register_messaging_globals(conf):
    # oslo.messaging 18 reads [oslo_messaging_tracing] and
    # [oslo_messaging_metrics] from the conf it is given but registers them
    # on the global CONF only, so a private ConfigOpts (one per simulated
    # host in the tests) needs them too.
    for module, group in (('_tracing.client', 'oslo_messaging_tracing'),
                          ('_metrics.client', 'oslo_messaging_metrics')):
        try:
            mod = importlib.import_module('oslo_messaging.' + module)
        except ImportError:
            continue
        conf.register_opts(getattr(mod, group), group=group)


def register_opts(conf):
    conf.register_opts(DEFAULT_OPTS)
    _register_messaging_globals(conf)
    for group, opts in GROUPS.items():
        conf.register_opts(opts, group=group)
    for group, service_type in KSA_GROUPS.items():
        ks_loading.register_session_conf_options(conf, group)
        ks_loading.register_auth_conf_options(conf, group)
        # Without the deprecated ``interface``, as Nova registers its own:
        # keystoneauth refuses ``interface`` beside a ``valid_interfaces``
        # default, and deployment tools still write it.
        ks_loading.register_adapter_conf_options(conf, group,
                                                 include_deprecated=False)
        conf.set_default('service_type', service_type, group=group)
        conf.set_default('valid_interfaces', ['internal', 'public'],
                         group=group)
    # A Placement or Cyborg request that never answers must not hold the
    # discovery cycle (or an fpga_program call) for good: it fails, and the
    # next cycle (or the next call) tries again.
    for group in TIMED_GROUPS:
        conf.set_default('timeout', PLACEMENT_TIMEOUT, group=group)


def adapter(conf, group, **kwargs):
    """A keystoneauth1 Adapter configured by the ``group`` options (its
    session, auth and adapter options); errors are answers, not raised."""
    session = ks_loading.load_session_from_conf_options(conf, group)
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    return ks_loading.load_adapter_from_conf_options(
        conf, group, session=session, auth=auth, raise_exc=False,
        client_name='nova-cyborg-sidecar', **kwargs)


def _ksa_opts(group):
    session = ks_loading.get_session_conf_options()
    if group in TIMED_GROUPS:
        # The sample shows the default register_opts sets.
        session = [copy.copy(opt) for opt in session]
        for opt in session:
            if opt.dest == 'timeout':
                opt.default = PLACEMENT_TIMEOUT
    opts = (session +
            ks_loading.get_auth_common_conf_options() +
            ks_loading.get_adapter_conf_options(include_deprecated=False))
    return ks_loading.get_auth_plugin_conf_options('password') + opts


def list_opts():
    """oslo-config-generator entry point."""
    result = [('DEFAULT', DEFAULT_OPTS)]
    result.extend((group, opts) for group, opts in GROUPS.items())
    result.extend((group, _ksa_opts(group)) for group in KSA_GROUPS)
    result.append(('sidecar_privsep', priv_context.OPTS))
    return result


HEALTH_OPTS = [
    cfg.IntOpt('unknown_after',
               default=600, min=1,
               help='Seconds without a good reading of a device\'s health '
                    '(its sysfs health files unreadable, or its check '
                    'failing) after which the device is Unknown: held out '
                    'of scheduling like an unhealthy one, with the trait '
                    '``CUSTOM_HEALTH_UNKNOWN`` and a reason giving the age '
                    'of the last good reading. Until then it keeps its '
                    'last verdict.'),
    cfg.ListOpt('link_speed_exempt_classes',
                default=['03'],
                help='PCI class prefixes (hex, as in the ``class`` file '
                     'without ``0x``) of devices whose PCIe link speed '
                     'below its maximum is no fault: display controllers '
                     '(``03``) lower their link speed when idle to save '
                     'power. A link narrower than it can be, or down, is a '
                     'fault for every device.'),
    cfg.ListOpt('nvml_fault_xids',
                item_type=cfg.types.Integer(min=1),
                default=[48, 63, 64, 74, 79, 92, 94, 95, 119, 120],
                help='NVIDIA XIDs that make a GPU unhealthy where the host '
                     'has NVML (the ``nvidia`` driver holds the GPU, and '
                     'the optional ``nvidia-ml-py`` is installed): by '
                     'default those NVIDIA\'s XID catalogue resolves with '
                     'a GPU reset or a reboot (double-bit ECC, row '
                     'remapping, NVLink, fallen off the bus, contained and '
                     'uncontained ECC, GSP errors). Other critical XIDs, '
                     'such as the application errors 13, 31, 43, 45, 68 '
                     'and 109, are logged. A double-bit ECC event and a '
                     'rise of the volatile uncorrected ECC count are '
                     'faults too. The GPU stays held until the sidecar '
                     'restarts (after the GPU was reset).'),
]

GROUPS['health'] = HEALTH_OPTS

UPGRADE_LEVELS_OPTS = [
    cfg.StrOpt('cyborg_conductor',
               choices=report_objects.PIN_CHOICES,
               help='What cyborg-conductor reads, as Nova\'s '
                    '``[upgrade_levels]`` options: a release (``2026.1``, '
                    'Cyborg 16.0.x; ``2026.2``, Cyborg 17.0.x) or a '
                    '``DriverDevice`` object version (``1.0`` to ``1.4``). '
                    'Unset, the sidecar sends the latest (1.4, Cyborg 17). '
                    'Set it to the conductor\'s release while the '
                    'conductor is older than the sidecar (Cyborg 16 '
                    'refuses 1.4): device reports are backported to its '
                    'version, and a device of a type it does not know '
                    '(MDEV, PCI and NVME are newer than Cyborg 16) is left '
                    'out with a warning naming it, until the conductor is '
                    'upgraded and this option raised or unset.'),
]

GROUPS['upgrade_levels'] = UPGRADE_LEVELS_OPTS
