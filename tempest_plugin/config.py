"""Options of the nova-cyborg tempest plugin.

``[service_available] nova_cyborg`` turns the tests on; ``[nova_cyborg]``
says which device profile they create, where the Cyborg API is and what
the cloud lets them inspect. Lifecycle scenarios are also gated on
tempest's own ``[compute-feature-enabled]`` flags and on ``[compute]
min_compute_nodes``.
"""

import json

from oslo_config import cfg

service_available_group = cfg.OptGroup(
    name='service_available', title='Available OpenStack Services')

ServiceAvailableGroup = [
    cfg.BoolOpt('nova_cyborg', default=False,
                help='Whether the cloud runs Nova patched by nova-cyborg '
                     'with Cyborg, so that servers get accelerators from '
                     'the accel:device_profile flavor extra spec through '
                     'every supported lifecycle operation. The nova-cyborg '
                     'tests are skipped when false.'),
]

DEFAULT_PROFILE_GROUPS = json.dumps(
    [{'resources:FPGA': '1', 'trait:CUSTOM_FPGA_INTEL': 'required'}])

nova_cyborg_group = cfg.OptGroup(
    name='nova_cyborg', title='nova-cyborg tempest plugin options')

NovaCyborgGroup = [
    cfg.StrOpt('device_profile_groups', default=DEFAULT_PROFILE_GROUPS,
               help='The groups of the device profile the tests create, as '
                    'a JSON list of objects in Cyborg\'s format: '
                    '"resources:<RC>": "<amount>", "trait:<TRAIT>": '
                    '"required" or "forbidden". A server booted with it '
                    'gets one accelerator request per unit of resource. '
                    'The cloud needs twice that many free devices on one '
                    'host for resize tests (source and destination are '
                    'both allocated until the resize is confirmed). '
                    'Related options: hostdev_type.'),
    cfg.StrOpt('hostdev_type', default='pci', choices=['pci', 'mdev'],
               help='How the devices of the profile reach the guest: pci '
                    '(a PCI function; ARQs of attach handle type PCI, '
                    'matched to <hostdev type="pci"> by their BDF) or mdev '
                    '(a mediated device; ARQs of type MDEV, matched to '
                    '<hostdev type="mdev"> by their attach handle UUID). '
                    'Mediated devices are never hot-plugged, so the '
                    'hot-plug test is skipped for mdev. Related options: '
                    'domain_xml_dir.'),
    cfg.StrOpt('domain_xml_dir', default=None,
               help='A directory, readable by tempest, where the cloud '
                    'writes the libvirt domain XML of each server as '
                    '<domain_xml_dir>/<server uuid>.xml whenever the '
                    'domain is defined or started. When set, the tests '
                    'check that the <hostdev> elements of the domain are '
                    'exactly the attach handles of the server\'s '
                    'accelerator requests; when unset these checks are '
                    'skipped (and the test that only checks the domain '
                    'is skipped with a message saying so).'),
    cfg.StrOpt('fpga_sysfs_dir', default=None,
               help='A directory, readable by tempest, where a cloud of '
                    'simulated hosts keeps the sysfs tree of each host as '
                    '<fpga_sysfs_dir>/<host>/sys, and whose FPGAs load '
                    'test bitstreams: an image whose data is the '
                    'accel:function_id it declares, as text (the local '
                    'cloud\'s stand-in card). When set, the tests that '
                    'program FPGAs run: they upload such bitstreams and '
                    'check the function each FPGA region reports '
                    '(afu_id) as well as its trait in Placement. Unset on '
                    'a cloud of real FPGAs, whose bitstreams tempest '
                    'cannot make: those tests are skipped.'),
    cfg.StrOpt('catalog_type', default='accelerator',
               help='Catalog type of the Cyborg (accelerator) service.'),
    cfg.StrOpt('endpoint_type', default='publicURL',
               choices=['public', 'admin', 'internal',
                        'publicURL', 'adminURL', 'internalURL'],
               help='The endpoint type to use for the Cyborg service.'),
    cfg.StrOpt('region', default='',
               help='The Cyborg region name to use. If empty, the value '
                    'of [identity] region is used instead.'),
    cfg.IntOpt('build_timeout', default=None,
               help='Timeout in seconds to wait for accelerator requests '
                    'and allocations to be released, and for instance '
                    'actions of addAccelerator and removeAccelerator to '
                    'end. Defaults to [compute] build_timeout.'),
    cfg.IntOpt('build_interval', default=None,
               help='Time in seconds between checks while waiting. '
                    'Defaults to [compute] build_interval.'),
]


#: Every option group of the plugin with its options.
GROUPS = [
    (service_available_group, ServiceAvailableGroup),
    (nova_cyborg_group, NovaCyborgGroup),
]


def list_opts():
    """The plugin's options, by group name, for tempest's sample config."""
    return [(group.name, options) for group, options in GROUPS]
