"""Live migration of a server with accelerators: the computes' part.

The conductor bound the destination's ARQs under the server's other ARQ
owner (:mod:`nova_cyborg.flows.live_migration.conductor`). Then:

* source, ``check_can_live_migrate_source`` (:func:`source_check`): the
  move is refused if ``[libvirt] live_migration_permit_post_copy`` is set
  (the device state of a VFIO device cannot be post-copied) or libvirt and
  QEMU are older than Nova asks for its own migration of such devices
  (``MIN_VFIO_PCI_VARIANT_*`` for PCI functions; Nova's own check of both
  hosts' versions for mdevs). Cyborg's mdevs are left out of Nova's vGPU
  data, so that the destination never allocates mdevs from Nova's own
  VGPU inventory for them;
* destination, ``pre_live_migration`` (:func:`pre_live_migration`): the
  destination's mdevs are created, and the guest XML remap is added to
  Nova's own in the migrate data: ``pci_dev_map_src_dst`` (source ARQ's
  PCI address -> the destination ARQ's of the same device profile group)
  and ``target_mdevs`` (mdev UUIDs), from validated attach handles;
* source, ``_post_live_migration`` (:func:`succeeded`): the source's ARQs
  are deleted (Cyborg frees their devices and asks the source's sidecar to
  remove their mdevs) and the other owner becomes the server's;
* source, ``_rollback_live_migration`` (:func:`rolled_back`): the
  destination's ARQs are deleted (and with them its mdevs), the owner
  stays, and the source's ARQs are checked to be still Bound on it;
* source, restarted in the middle of the move (``_reset_live_migration``):
  :mod:`nova_cyborg.flows.live_migration.reset`, which uses both above.
"""

from oslo_log import log as logging

import nova.conf
from nova.compute import utils as compute_utils
from nova import exception as nova_exception

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import exception
from nova_cyborg.flows.live_migration import conductor as live_migration
from nova_cyborg.i18n import _
from nova_cyborg.model import attach_handle
from nova_cyborg.model import bookkeeping
from nova_cyborg.model.objects import accelerator_request as arq_obj
from nova_cyborg.virt import libvirt as nc_libvirt

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

POST_COPY_REFUSED = _(
    '[libvirt] live_migration_permit_post_copy is True on the source host: '
    'the device state of the server\'s accelerators (VFIO devices) cannot '
    'be post-copied; set it to False to live-migrate servers with '
    'accelerators')


def _driver_module():
    # Imported at call time: the libvirt driver imports the hooks.
    from nova.virt.libvirt import driver
    return driver


def _bound_here(arqs, hostnames, what):
    for arq in arqs:
        if arq.state != 'Bound' or (hostnames is not None and
                                    arq.hostname not in hostnames):
            raise exception.AcceleratorRequestNotBound(
                arq=arq.uuid, state=_('%(state)s on %(host)s, not Bound on '
                                      'the %(what)s') % {
                    'state': arq.state, 'host': arq.hostname, 'what': what})
    return arqs


def _source_arqs(cyclient, instance):
    return _bound_here(attach_handle.validate_for_attach(
        cyclient.get_arqs_for_instance(bookkeeping.arq_owner(instance))),
        bookkeeping.hostnames(instance), _('source host'))


def _check_versions(driver, instance, arqs, dest_check_data=None):
    mod = _driver_module()
    types = {arq.attach_type for arq in arqs}
    if arq_obj.ATTACH_TYPE_PCI in types and not driver._host.has_min_version(
            lv_ver=mod.MIN_VFIO_PCI_VARIANT_LIBVIRT_VERSION,
            hv_ver=mod.MIN_VFIO_PCI_VARIANT_QEMU_VERSION,
            hv_type=mod.host.HV_DRIVER_QEMU):
        raise nova_exception.MigrationPreCheckError(reason=_(
            'live migration of PCI accelerators needs libvirt %(lv)s and '
            'QEMU %(qemu)s or newer on host %(host)s') % {
                'lv': mod.libvirt_utils.version_to_string(
                    mod.MIN_VFIO_PCI_VARIANT_LIBVIRT_VERSION),
                'qemu': mod.libvirt_utils.version_to_string(
                    mod.MIN_VFIO_PCI_VARIANT_QEMU_VERSION),
                'host': CONF.host})
    if arq_obj.ATTACH_TYPE_MDEV in types and dest_check_data is not None:
        # Nova's own check of both hosts for its vGPUs.
        driver._assert_source_can_live_migrate_mdevs(instance,
                                                     dest_check_data)


def source_check(driver, context, instance, dest_check_data, instance_mdevs):
    """Check the source can live-migrate the server's accelerators.

    :param driver: the LibvirtDriver.
    :param dest_check_data: the LibvirtLiveMigrateData of the destination's
        checks (``dst_supports_mdev_live_migration``).
    :param instance_mdevs: {mdev uuid: instance uuid} of the guest's mdevs.
    :returns: ``instance_mdevs`` without Cyborg's mdevs (Nova's vGPU data).
    :raises: MigrationPreCheckError saying why.
    """
    if CONF.libvirt.live_migration_permit_post_copy:
        LOG.warning('Refusing to live-migrate the server: %s',
                    POST_COPY_REFUSED, instance=instance)
        raise nova_exception.MigrationPreCheckError(reason=POST_COPY_REFUSED)
    try:
        arqs = _source_arqs(nc_client.get_client(context), instance)
    except (exception.CyborgError, exception.InvalidAttachHandle,
            exception.AcceleratorRequestNotBound) as e:
        raise nova_exception.MigrationPreCheckError(reason=_(
            'the server\'s accelerators cannot be read: %s') %
            e.format_message())
    _check_versions(driver, instance, arqs, dest_check_data)
    cyborg_mdevs = {arq.attach_handle.uuid for arq in arqs
                    if arq.attach_type == arq_obj.ATTACH_TYPE_MDEV}
    return {mdev: owner for mdev, owner in instance_mdevs.items()
            if mdev not in cyborg_mdevs}


def _pairs(source, dest):
    """[(source ARQ, destination ARQ)], by device profile group; within a
    group, a device at the same address or mdev UUID pairs first."""
    def key(arq):
        handle = arq.attach_handle
        return (handle.address.bdf if arq.attach_type ==
                arq_obj.ATTACH_TYPE_PCI else handle.uuid)

    pairs = []
    groups = sorted({arq.device_profile_group_id for arq in source + dest})
    for group in groups:
        src = [a for a in source if a.device_profile_group_id == group]
        dst = [a for a in dest if a.device_profile_group_id == group]
        if len(src) != len(dst):
            raise exception.AcceleratorRequestNotBound(
                arq=(src or dst)[0].uuid, state=_(
                    'in device profile group %(g)d of which the source has '
                    '%(s)d and the destination %(d)d devices') % {
                        'g': group, 's': len(src), 'd': len(dst)})
        same = [(s, d) for s in src for d in dst if key(s) == key(d)]
        for s, d in same:
            if s in src and d in dst:
                pairs.append((s, d))
                src.remove(s)
                dst.remove(d)
        pairs.extend(zip(src, dst))
    for s, d in pairs:
        if s.attach_type != d.attach_type:
            raise exception.AcceleratorRequestNotBound(
                arq=d.uuid, state=_('of attach type %(d)s where the source '
                                    'has %(s)s') % {'d': d.attach_type,
                                                    's': s.attach_type})
    return pairs


def ordered_pci_map(pci_map):
    """``pci_map`` in an order Nova's XML update can apply one by one.

    Nova rewrites the hostdev at each source address in turn, so a pair
    whose source address is another pair's destination goes before it.

    :raises: ValueError for a cycle (devices swapping their addresses).
    """
    todo = dict(pci_map)
    ordered = {}
    while todo:
        ready = [src for src, dst in todo.items()
                 if dst == src or dst not in todo]
        if not ready:
            raise ValueError(_('the PCI addresses %s swap between the hosts')
                             % ', '.join(sorted(todo)))
        for src in ready:
            ordered[src] = todo.pop(src)
    return ordered


def remap(pairs, migrate_data):
    """Add the pairs' PCI addresses and mdev UUIDs to Nova's remap."""
    pci = dict(migrate_data.pci_dev_map_src_dst
               if 'pci_dev_map_src_dst' in migrate_data else {})
    mdevs = dict(migrate_data.target_mdevs
                 if 'target_mdevs' in migrate_data else {})
    for s, d in pairs:
        if s.attach_type == arq_obj.ATTACH_TYPE_PCI:
            table, src, dst = (pci, s.attach_handle.address.bdf,
                               d.attach_handle.address.bdf)
        else:
            table, src, dst = mdevs, s.attach_handle.uuid, d.attach_handle.uuid
        if src in table:
            raise ValueError(_('device %s of accelerator request %s is '
                               'also one of Nova\'s') % (src, s.uuid))
        table[src] = dst
    migrate_data.pci_dev_map_src_dst = ordered_pci_map(pci)
    if mdevs:
        migrate_data.target_mdevs = mdevs
    return migrate_data


def pre_live_migration(driver, context, instance, migrate_data):
    """At the destination: the mdevs exist, the remap is in migrate_data.

    :param driver: the LibvirtDriver of the destination.
    :param migrate_data: the LibvirtLiveMigrateData the driver returns.
    :returns: migrate_data.
    :raises: MigrationError saying why (Nova then rolls back).
    """
    cyclient = nc_client.get_client(context)
    try:
        source = _source_arqs(cyclient, instance)
        recorded = live_migration.recorded(instance)
        dest = [arq for arq in cyclient.get_arqs_for_instance(
                    bookkeeping.other_owner(instance))
                if arq.get('uuid') in recorded]
        if len(dest) != len(recorded):
            raise exception.AcceleratorRequestNotBound(
                arq=','.join(sorted(set(recorded) - {
                    arq.get('uuid') for arq in dest})), state=_('gone'))
        dest = _bound_here(attach_handle.validate_for_attach(dest), None,
                           _('destination host'))
        _check_versions(driver, instance, dest)
        pairs = _pairs(source, dest)
        nc_libvirt.allocate_mdevs(driver, [d for _s, d in pairs])
        remap(pairs, migrate_data)
    except (exception.CyborgError, exception.InvalidAttachHandle,
            exception.AcceleratorRequestNotBound, ValueError,
            nova_exception.MigrationPreCheckError) as e:
        reason = (e.format_message() if hasattr(e, 'format_message')
                  else str(e))
        LOG.error('Live migration: the accelerators cannot move to this '
                  'host: %s', reason, instance=instance)
        raise nova_exception.MigrationError(reason=_(
            'the accelerators cannot move to %(host)s: %(err)s') % {
                'host': CONF.host, 'err': reason})
    LOG.info('Live migration remaps accelerators: PCI %s, mdevs %s',
             migrate_data.pci_dev_map_src_dst,
             migrate_data.target_mdevs if 'target_mdevs' in migrate_data
             else {}, instance=instance)
    return migrate_data


def succeeded(context, instance):
    """At the source, once the guest runs on the destination: the source's
    ARQs go, the destination's owner becomes the server's (saved). Never
    raises: ARQs that could not be deleted go with the server, or at its
    next move."""
    old = bookkeeping.arq_owner(instance)
    new = bookkeeping.other_owner(instance)
    arq_uuids = []
    try:
        cyclient = nc_client.get_client(context)
        arq_uuids = [arq['uuid']
                     for arq in cyclient.get_arqs_for_instance(old)]
        cyclient.delete_arqs_strictly(arq_uuids)
        LOG.info('Deleted the source\'s accelerator requests %s',
                 ','.join(arq_uuids), instance=instance)
    except Exception as e:  # noqa: B902 (the guest has moved already)
        LOG.error('Could not delete the source\'s accelerator requests '
                  '%(arqs)s after the live migration: %(err)s',
                  {'arqs': ','.join(arq_uuids), 'err': e}, instance=instance)
        if arq_uuids:
            bookkeeping.remember_retired(instance, arq_uuids)
    bookkeeping.set_owner(instance, new)
    bookkeeping.store(instance, live_migration.DEST_PREFIX, [])
    instance.save()


def rolled_back(context, instance):
    """At the source, when the live migration failed or was aborted: the
    destination's ARQs go, the owner stays; the source's ARQs must still
    be Bound here (checked, and a fault recorded if not). Never raises."""
    live_migration.forget_destination(context, instance)
    try:
        arqs = _source_arqs(nc_client.get_client(context), instance)
        LOG.info('Live migration rolled back; the accelerator requests %s '
                 'are still Bound on this host', ','.join(
                     arq.uuid for arq in arqs), instance=instance)
    except Exception as e:  # noqa: B902 (a rollback must go on)
        LOG.error('After the live migration rolled back, the server\'s '
                  'accelerators are not all Bound on this host: %s', e,
                  instance=instance)
        compute_utils.add_instance_fault_from_exc(context, instance, e)
