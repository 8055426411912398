"""Live migration: the source's nova-compute restarted in the middle of one.

Upstream's ``_reset_live_migration`` (the source's ``init_host``, the
server still in MIGRATING) aborts the migration if libvirt still runs it,
sets the migration to 'error' and clears the task state; the allocations
and the destination stay as they are. Where the guest is decides what
happens to the server's accelerators (:func:`reset`):

* the guest runs (or is paused) here: the migration did not complete.
  The server's allocation goes back to this host (the migration held it)
  and the destination's ARQs go, as in
  :func:`nova_cyborg.flows.live_migration.compute.rolled_back`;
* no domain of the guest here: it left for the destination (Nova's
  libvirt driver migrates with ``VIR_MIGRATE_UNDEFINE_SOURCE``, so libvirt
  undefines the source's domain once the guest runs on the destination).
  The destination's ARQs and allocation stay; the source's ARQs go if
  nothing of :func:`~nova_cyborg.flows.live_migration.compute.succeeded` ran
  (they are still the server's, Bound on this host), and the migration's
  allocation (this host's resources) is deleted. The server goes to ERROR
  with a fault: its record still names this host, which only an operator
  can put right (doc/source/operations.rst, live migration);
* a domain here that does not run (or libvirt cannot tell): nothing says
  where the guest is. Placement and Cyborg are left as they are; the
  server goes to ERROR with a fault.
"""

from nova.compute import power_state
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import exception as nova_exception
from oslo_log import log as logging

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg.flows.live_migration import compute as live_migration_compute
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping

LOG = logging.getLogger(__name__)

#: Where the guest is, as this host's hypervisor tells.
HERE, GONE, UNKNOWN = 'here', 'gone', 'unknown'


class LiveMigrationLeftHost(nova_exception.NovaException):
    """The guest left for the destination; the move was not recorded.
    (An instance fault keeps 255 characters: what names the move first.)"""

    msg_fmt = _('Live migration %(migration)s to %(dest)s: the guest runs '
                'there with its accelerators (it left %(source)s); the move '
                'was not recorded. An operator must set the server\'s host '
                '(operations guide).')


class LiveMigrationGuestUnknown(nova_exception.NovaException):
    """Nothing says where the guest is."""

    msg_fmt = _('Live migration %(migration)s to %(dest)s: interrupted, '
                'the guest does not run on %(source)s (%(state)s). An '
                'operator must find it; its accelerators were left as they '
                'were (operations guide).')


def guest_state(driver, instance):
    """(HERE, GONE or UNKNOWN, the power state here, what the hypervisor
    said)."""
    try:
        state = driver.get_info(instance).state
    except nova_exception.InstanceNotFound:
        return GONE, power_state.NOSTATE, _('no domain')
    except Exception as e:  # noqa: B902 (the hypervisor cannot tell)
        return UNKNOWN, power_state.NOSTATE, str(e)
    said = power_state.STATE_MAP.get(state, str(state))
    if state in (power_state.RUNNING, power_state.PAUSED):
        return HERE, state, said
    return UNKNOWN, state, said


def _roll_back(manager, context, instance, migration):
    if migration is not None:
        try:
            manager._revert_allocation(context, instance, migration)
        except Exception as e:  # noqa: B902 (the reset must go on)
            LOG.error('Could not give the server its allocation on this '
                      'host back after the interrupted live migration '
                      '%(mig)s: %(err)s', {'mig': migration.uuid, 'err': e},
                      instance=instance)
    live_migration_compute.rolled_back(context, instance)


def _source_arqs_go(context, instance):
    """The source's ARQs go and the destination's owner becomes the
    server's, if nothing of ``succeeded`` ran: the server's ARQs are all
    Bound on this host. Once it ran, the server's ARQs are the
    destination's: kept. Never raises."""
    try:
        arqs = nc_client.get_client(context).get_arqs_for_instance(
            bookkeeping.arq_owner(instance))
    except Exception as e:  # noqa: B902 (the reset must go on)
        LOG.error('Could not read the server\'s accelerator requests after '
                  'its guest left this host: %s; none deleted', e,
                  instance=instance)
        return
    here = bookkeeping.hostnames(instance)
    elsewhere = [arq['uuid'] for arq in arqs
                 if arq.get('state') != 'Bound' or
                 arq.get('hostname') not in here]
    if elsewhere:
        LOG.info('The server\'s accelerator requests %s are not Bound on '
                 'this host: kept', ','.join(elsewhere), instance=instance)
        return
    live_migration_compute.succeeded(context, instance)


def _settle_on_destination(manager, context, instance, migration):
    _source_arqs_go(context, instance)
    try:
        manager._delete_allocation_after_move(context, instance, migration)
        LOG.info('Deleted the allocation of live migration %s on this '
                 'host', migration.uuid, instance=instance)
    except Exception as e:  # noqa: B902 (the reset must go on)
        LOG.error('Could not delete the allocation of live migration '
                  '%(mig)s on this host: %(err)s',
                  {'mig': migration.uuid, 'err': e}, instance=instance)


def _error(context, instance, fault, state):
    LOG.error('%s', fault.format_message(), instance=instance)
    try:
        compute_utils.add_instance_fault_from_exc(context, instance, fault)
    except Exception as e:  # noqa: B902 (the reset must go on)
        LOG.error('Could not record the instance fault: %s', e,
                  instance=instance)
    # Saved by _reset_live_migration with the task state. The power state
    # is this host's: _init_instance then never restarts the guest here
    # ([DEFAULT] resume_guests_state_on_host_boot).
    instance.vm_state = vm_states.ERROR
    instance.power_state = state


def reset(manager, context, instance, migration):
    """At the source, restarted with the server in MIGRATING, after
    upstream's ``_reset_live_migration`` set the migration to 'error'.
    Never raises.

    :param manager: the ComputeManager (its driver, ``_revert_allocation``
        and ``_delete_allocation_after_move``).
    :param migration: the migration upstream found running, or None (the
        allocation is then left as it is).
    """
    where, state, said = guest_state(manager.driver, instance)
    if where == HERE:
        _roll_back(manager, context, instance, migration)
        return
    names = {'migration': migration.uuid if migration else _('(none)'),
             'dest': (migration.dest_compute if migration else None) or
             _('its destination'), 'source': manager.host, 'state': said}
    if where == GONE and migration is not None:
        _settle_on_destination(manager, context, instance, migration)
        _error(context, instance, LiveMigrationLeftHost(**names), state)
    else:
        _error(context, instance, LiveMigrationGuestUnknown(**names), state)
