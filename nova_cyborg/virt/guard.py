"""One device, one guest: the check every start of a guest crosses.

A PCI function or mediated device belongs in a guest's definition only
while something gives it to that guest: the server's own ARQs Bound to
this host, or Nova's own claims (its PCI devices, its vGPUs). A definition
that holds anything else would, once started, pass through a device that
Placement and Cyborg consider free, and that another server may hold: a
device hot-plugged then removed while the guest was off and redefined
later, a definition saved for unrescue before a detach, one written by
another tool.

Every path that defines or starts a guest crosses :func:`checked_xml`
(patched into ``LibvirtDriver._create_guest``: spawn, hard reboot, power
on, resume, rescue and unrescue, host boot, rebuild and evacuation, the end
of a resize, a migration or their revert; and ``_soft_reboot``, which
starts the existing definition again). It returns the XML to define:

* a device nothing gives the guest (a *stray*) is removed, with a WARNING
  and an instance action event (``nova_cyborg_removed_stray_devices``);
* a device of a Bound ARQ the definition lacks is added, its mdev created
  (event ``nova_cyborg_added_missing_devices``), so the guest has every
  device it holds;
* when this cannot be known (Cyborg unreachable, an ARQ with an invalid
  attach handle, an unreadable definition) the start is refused with
  :class:`GuestDevicesUnchecked`: the compute manager records the fault.

A server without accelerators and without a ``<hostdev>`` costs a
substring test; one with Nova's own PCI devices is compared with its
claims, without asking Cyborg. Mediated devices are Nova's to manage
wherever Nova may have made them: every mdev of a server without
accelerators, and on a server with accelerators every mdev when its flavor
asks for a resource class the libvirt driver serves with mdevs (``VGPU``,
or any ``[mdev_<type>] mdev_class``, ``CUSTOM_*`` included); they are
never treated as strays.
"""

import re

from nova import context as nova_context
from nova import exception as nova_exception
from nova import objects
from oslo_log import log as logging

from nova_cyborg.clients import cyborg as nc_client
from nova_cyborg import conf
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import handoff
from nova_cyborg.model.objects import accelerator_request as arq_obj
from nova_cyborg.virt import domain_devices as dd
from nova_cyborg.virt import libvirt as nc_libvirt

LOG = logging.getLogger(__name__)
CONF = conf.CONF

EVENT_REMOVED = 'nova_cyborg_removed_stray_devices'
EVENT_ADDED = 'nova_cyborg_added_missing_devices'
#: The instance action the events go under when the start was not asked
#: by a request that has one (a host boot).
ACTION = 'nova_cyborg_check_devices'
#: A flavor's resource request: ``resources[<suffix>]:<class>``.
_RESOURCE = re.compile(r'^resources[\w-]*:(?P<rc>[A-Z0-9_]+)$')
#: Nova's libvirt driver serves VGPU with mdevs whatever its configuration.
_VGPU = 'VGPU'


class GuestDevicesUnchecked(nova_exception.NovaException):
    """The guest is not started: its devices could not be checked."""

    msg_fmt = _("Not starting the guest: its devices cannot be checked "
                "against its accelerators (%(reason)s)")


def _here(driver, instance):
    """The names Cyborg may know this host by: its compute node's (the
    driver's), and its service's where that is the instance's host (the
    services of one process share ``CONF.host``, as in Nova's functional
    tests, where it names the last one started)."""
    names = set(driver.get_available_nodes())
    if CONF.host in bookkeeping.hostnames(instance):
        names.add(CONF.host)
    return names


def _bound_here(context, driver, instance):
    """The validated ARQs of the instance Bound to this host: those the
    compute manager read for this request when it waited for their
    binding (a build, rebuild, evacuation or unshelve:
    nova_cyborg.model.handoff), else read now."""
    if not bookkeeping.has_accelerators(instance):
        return []
    arqs = handoff.take(context, instance.uuid)
    if arqs is None:
        arqs = nc_client.get_client(context).get_arqs_for_instance(
            bookkeeping.arq_owner(instance))
    here = _here(driver, instance)
    return nc_libvirt.validated(
        [arq for arq in arqs
         if arq.get('state') == 'Bound' and arq.get('hostname') in here])


def _arq_key(arq):
    handle = arq.attach_handle
    if arq.attach_type == arq_obj.ATTACH_TYPE_MDEV:
        return dd.MDEV, handle.uuid.lower()
    return dd.pci_key(*handle.address.hex_parts)


def _nova_pci(instance):
    """Keys of the PCI devices Nova claimed for the instance."""
    return {dd.key_of_address(dev.address)
            for dev in instance.get_pci_devices()}


def _mdev_classes(driver):
    """The resource classes ``driver`` gives guests as mediated devices:
    VGPU and every ``[mdev_<type>] mdev_class`` it was configured with
    (``LibvirtDriver._get_supported_mdev_resource_classes``)."""
    supported = getattr(driver, '_get_supported_mdev_resource_classes',
                        None)
    classes = set(supported() or ()) if supported else set()
    return classes | {_VGPU}


def _nova_mdevs(driver, instance):
    """True if Nova may give the guest mediated devices itself.

    Always for a server without accelerators: nova-cyborg gave it none, so
    any mdev its definition holds is Nova's (a vGPU or a generic-class
    mdev). For a server with accelerators, when its flavor asks for a
    resource class the driver serves with mdevs.
    """
    if not bookkeeping.has_accelerators(instance):
        return True
    flavor = instance.flavor
    if not flavor:
        return False
    classes = _mdev_classes(driver)
    for key, value in flavor.extra_specs.items():
        match = _RESOURCE.match(key)
        if match and match.group('rc') in classes and value != '0':
            return True
    return False


def strays_and_missing(present, arqs, nova_pci, nova_vgpu,
                       interfaces=frozenset()):
    """Split a definition's devices against what gives them.

    :param present: device keys in the definition's ``<hostdev>``s.
    :param arqs: the validated ARQs Bound to this host.
    :param nova_pci: keys of Nova's own PCI claims.
    :param nova_vgpu: True if Nova gives the guest mediated devices itself
        (its vGPUs or generic-class mdevs): no mdev is a stray.
    :param interfaces: keys of the definition's ``<interface
        type='hostdev'>``s: the ARQ of a port with a device profile is the
        port's interface, never missing (and an interface is never a
        stray: it is Neutron's).
    :returns: (stray keys, ARQs whose device is missing), both sorted.
    """
    given = {_arq_key(arq): arq for arq in arqs}
    strays = sorted(
        key for key in present
        if key not in given and key not in nova_pci and
        not (key[0] == dd.MDEV and nova_vgpu))
    missing = [arq for key, arq in sorted(given.items())
               if key not in present and key not in interfaces]
    return strays, missing


def _record(context, instance, event):
    """Add ``event`` to the instance action of the request (or to one of
    its own); never fails the start."""
    try:
        if objects.InstanceAction.get_by_request_id(
                context, instance.uuid, context.request_id) is None:
            objects.InstanceAction.action_start(
                context, instance.uuid, ACTION, want_result=False)
        objects.InstanceActionEvent.event_start(
            context, instance.uuid, event, want_result=False,
            host=CONF.host)
        objects.InstanceActionEvent.event_finish(
            context, instance.uuid, event, want_result=False)
    except Exception:  # noqa: B902 (the log line says it all)
        LOG.exception('Could not record instance action event %s', event,
                      instance=instance)


def _context(context, instance):
    return (context or getattr(instance, '_context', None) or
            nova_context.get_admin_context())


def checked_xml(driver, context, instance, xml, asked=None):
    """The domain XML to define for ``instance``: ``xml`` with exactly the
    devices the guest is given.

    :param driver: the LibvirtDriver (node names, mdev creation).
    :param context: the request's context, or None (the instance's own,
        else an admin context).
    :param asked: None on a start (a difference is a fault, logged as a
        WARNING with an event); else the action that changed the
        devices on purpose (``addAccelerator``), logged at INFO.
    :returns: ``xml`` itself when nothing changes.
    :raises: GuestDevicesUnchecked
    """
    if '<hostdev' not in xml and not bookkeeping.has_accelerators(instance):
        return xml
    context = _context(context, instance)
    try:
        root = dd.parse(xml)
        present = dd.hostdevs(root)
        arqs = _bound_here(context, driver, instance)
        strays, missing = strays_and_missing(
            present, arqs, _nova_pci(instance) if present else set(),
            _nova_mdevs(driver, instance), dd.interface_keys(root))
        if not strays and not missing:
            return xml
        added = [nc_libvirt.hostdev_config(arq).format_dom()
                 for arq in missing]
        nc_libvirt.allocate_mdevs(driver, missing)
    except (dd.UnreadableDomain, exception.CyborgError,
            exception.InvalidAttachHandle) as e:
        LOG.error('Refusing to start the guest: its devices cannot be '
                  'checked: %s', exception.reason(e), instance=instance)
        raise GuestDevicesUnchecked(reason=exception.reason(e))
    if asked is not None:
        LOG.info('%(action)s: the guest definition gets %(added)s and loses '
                 '%(removed)s', {
                     'action': asked,
                     'added': ', '.join(dd.describe(_arq_key(arq))
                                        for arq in missing) or 'nothing',
                     'removed': ', '.join(dd.describe(key)
                                          for key in strays) or 'nothing'},
                 instance=instance)
        dd.remove(root, strays)
        dd.add(root, added)
        return dd.to_string(root)
    if strays:
        LOG.warning('Removing devices no accelerator request or Nova claim '
                    'gives this server from its guest definition before it '
                    'starts: %s', ', '.join(dd.describe(k) for k in strays),
                    instance=instance)
        dd.remove(root, strays)
        _record(context, instance, EVENT_REMOVED)
    if missing:
        LOG.warning('Adding the devices of Bound accelerator requests the '
                    'guest definition lacked: %s',
                    ', '.join('%s (ARQ %s)' % (dd.describe(_arq_key(arq)),
                                               arq.uuid) for arq in missing),
                    instance=instance)
        dd.add(root, added)
        _record(context, instance, EVENT_ADDED)
    return dd.to_string(root)


def checked_guest(driver, context, instance, guest, asked=None):
    """Redefine a defined guest with exactly the devices it is given, if
    its definition differs (:func:`checked_xml`).

    :param guest: a nova.virt.libvirt.guest.Guest, not running (its
        persistent definition is read and rewritten).
    :returns: the Guest to start: ``guest`` or the redefined one.
    :raises: GuestDevicesUnchecked
    """
    xml = guest.get_xml_desc(dump_inactive=True, dump_sensitive=True)
    checked = checked_xml(driver, context, instance, xml, asked=asked)
    if checked is xml:
        return guest
    return nc_libvirt.define(driver, checked)
