"""Configuration of the sidecar daemon.

Options are registered on the ``ConfigOpts`` object the caller passes, never
implicitly on the global ``cfg.CONF``: the daemon's ``main`` passes
``cfg.CONF``; tests build one ``ConfigOpts`` per simulated host. The
devices' groups (``[pci]``, ``[gpu]``, ``[fpga]``, ``[health]``) are in
:mod:`sidecar.conf.devices`; the daemon's and its services' here.
"""

import copy
import importlib
import socket

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg
from oslo_privsep import priv_context

from sidecar.conf import devices
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

GROUPS = {
    'sidecar': SIDECAR_OPTS,
    'pci': devices.PCI_OPTS,
    'gpu': devices.GPU_OPTS,
    'fpga': devices.FPGA_OPTS,
    'health': devices.HEALTH_OPTS,
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
                    'version. A device of a type it does not know goes as '
                    'the type that release\'s own agent gives such '
                    'devices (the ``pci`` driver\'s PCI as GPU below 1.2, '
                    'as Cyborg 16\'s pci driver reports them) or, with '
                    'none (MDEV, NVME), is left out with a warning naming '
                    'it, until the conductor is upgraded and this option '
                    'raised or unset.'),
]

GROUPS['upgrade_levels'] = UPGRADE_LEVELS_OPTS
