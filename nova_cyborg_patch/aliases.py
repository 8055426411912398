"""The alias check of ``nova-cyborg-patch revert`` and ``aliases``.

Reads Nova's configuration as Nova's services do and lists the servers
whose accelerator requests are bound under their alias
(:mod:`nova_cyborg.model.aliases`): every cell's where the API database is
configured, else this host's through nova-conductor. Nova is imported
only here, so that the patch tool itself never imports the package it
patches unless a check is asked for.
"""

import os

#: Where Nova's services read their configuration by default.
DEFAULT_CONFIG = '/etc/nova/nova.conf'


class CheckFailed(Exception):
    """The servers could not be listed (configuration, database, RPC)."""


def default_config_files():
    """``[/etc/nova/nova.conf]`` where it exists, else none."""
    return [DEFAULT_CONFIG] if os.path.isfile(DEFAULT_CONFIG) else []


def find(config_files):
    """List the servers whose ARQs are under their alias.

    :returns: ``(scope, servers)``: what was searched (``'every cell'`` or
        ``'host <name>'``) and a list of dicts (``uuid``, ``name``,
        ``host``, ``project_id``).
    :raises: CheckFailed with the reason.
    """
    try:
        from nova.conductor import rpcapi as conductor_rpcapi
        from nova import config
        from nova import context as nova_context
        import nova.conf
        from nova import objects
        from nova.objects import base as objects_base
        from nova import rpc

        from nova_cyborg.model import aliases
    except Exception as e:  # a broken or half-patched Nova
        raise CheckFailed('cannot import Nova: %s' % e)
    conf = nova.conf.CONF
    try:
        config.parse_args(['nova-cyborg-patch'] + [
            '--config-file=%s' % path for path in config_files])
        objects.register_all()
        context = nova_context.get_admin_context()
        if conf.api_database.connection:
            scope = 'every cell'
            servers = aliases.in_cells(context)
        else:
            # As nova-compute: its objects reach the database through
            # nova-conductor.
            scope = 'host %s' % conf.host
            objects_base.NovaObject.indirection_api = \
                conductor_rpcapi.ConductorAPI()
            servers = aliases.on_host(context, conf.host)
    except CheckFailed:
        raise
    except Exception as e:
        raise CheckFailed('%s: %s' % (type(e).__name__, e))
    finally:
        try:
            rpc.cleanup()
        except Exception:
            pass  # nothing was initialized
    return scope, [{'uuid': s.uuid, 'name': s.display_name,
                    'host': s.host, 'project_id': s.project_id}
                   for s in servers]


def describe(servers):
    """One line per server, for the operator."""
    return ['%s (%s) on %s, project %s'
            % (s['uuid'], s['name'], s['host'], s['project_id'])
            for s in servers]


#: What to do about them; the removal guide says the same.
REMEDY = ('Live-migrate each of them once more (as an admin: openstack '
          'server migrate --live-migration <server>): the move binds its '
          'accelerator requests under its own UUID. Then revert again.')
