"""The cloud's WSGI applications, for gunicorn.

``localcloud.wsgi:application`` is the one ``LOCALCLOUD_WSGI_APP`` names.

gunicorn passes its own command line in ``sys.argv``, and some of these
applications parse ``sys.argv`` as their own (Keystone, Cyborg), so the
application named by ``LOCALCLOUD_WSGI_APP`` is loaded with a clean one.
Cyborg also needs oslo.service's threading backend chosen before it is
imported (its own ``cyborg-api`` script fails under that backend), and
reads its config file from ``CYBORG_CONFIG_FILE``.
"""

import importlib
import os
import sys

APPS = {
    'keystone': 'keystone.wsgi.api',
    'placement': 'placement.wsgi.api',
    'glance': 'glance.wsgi.api',
    'nova': 'nova.wsgi.osapi_compute',
    'cyborg': 'cyborg.wsgi.api',
    'neutron': 'localcloud.neutron_standin',
}


def _load(name):
    sys.argv = [name]
    if name == 'cyborg':
        from oslo_service import backend
        backend.init_backend(backend.BackendType.THREADING)
        sys.argv += ['--config-file', os.environ['CYBORG_CONFIG_FILE']]
    return importlib.import_module(APPS[name]).application


application = _load(os.environ['LOCALCLOUD_WSGI_APP'])
