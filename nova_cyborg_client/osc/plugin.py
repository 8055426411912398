"""OpenStackClient plugin: ``openstack server accelerator add|remove|list``.

The commands talk to Nova and Cyborg through the openstacksdk connection
the client made for its own commands; they are in the command group
``openstack.nova_cyborg.v1`` (python-cyborgclient has ``accelerator ...``).
"""

import logging

from osc_lib import utils

LOG = logging.getLogger(__name__)

DEFAULT_API_VERSION = '1'
API_VERSION_OPTION = 'os_nova_cyborg_api_version'
API_NAME = 'nova_cyborg'
API_VERSIONS = ('1',)


def make_client(instance):
    """The openstacksdk Connection of the client's cloud."""
    LOG.debug('nova-cyborg commands use the openstacksdk connection %s',
              instance.sdk_connection)
    return instance.sdk_connection


def build_option_parser(parser):
    """The plugin's global option (one version so far)."""
    parser.add_argument(
        '--os-nova-cyborg-api-version',
        metavar='<nova-cyborg-api-version>',
        default=utils.env('OS_NOVA_CYBORG_API_VERSION'),
        help='Version of the nova-cyborg commands, default=%s '
             '(Env: OS_NOVA_CYBORG_API_VERSION)' % DEFAULT_API_VERSION)
    return parser


def check_api_version(check_version):
    """Only version 1 exists."""
    return check_version in API_VERSIONS
