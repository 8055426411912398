"""Small helpers shared by the sidecar's unit tests."""

import os

from oslo_config import cfg

from sidecar import conf as sidecar_conf


def write(path, content=''):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(content)


def read(path):
    with open(path) as f:
        return f.read()


def make_conf():
    """A parsed ConfigOpts with the sidecar's options and no files."""
    conf = cfg.ConfigOpts()
    sidecar_conf.register_opts(conf)
    conf([], default_config_files=[], default_config_dirs=[])
    return conf
