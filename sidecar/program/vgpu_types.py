"""A vGPU 17 type set on an idle VF at bind.

NVIDIA vGPU 17 and later (vendor-specific VFIO) give a VF its vGPU by
writing a type id from ``<VF>/nvidia/creatable_vgpu_types`` into
``<VF>/nvidia/current_vgpu_type`` (NVIDIA vgpu-device-manager
``pkg/vgpu/vfio/sysfs.go``). The ``gpu`` driver offers the idle VFs of
a card through one VGPU provider per type of ``[gpu] vfio_vgpu_types``
the card can host, of the type's capacity, with that type's trait and a
vendor-VFIO MDEV attach handle per VF
(:mod:`sidecar.drivers.gpu_vfio_card`), so that cyborg-conductor 17 calls the
sidecar's ``create_vgpu_mdev`` when it binds an ARQ to the VF and
``remove_vgpu_mdev`` when it unbinds it; :mod:`sidecar.program.mdev`
hands those to :meth:`VgpuTypeSetter.bind` and
:meth:`VgpuTypeSetter.unbind`, which write the type, and 0 back.

The rules are the FPGA programming rules of
:mod:`sidecar.program.manager`:

* one job at a time per card (the card's lock, shared with FPGA
  programming so that no report runs in between); what the card can host
  is read again under the lock, so of two binds asking two types at once
  the second sees the card as the first left it, and is refused cleanly
  when the card no longer lists its type;
* a VF that holds a type never gets another one (only type 0 is
  written over): a type is never changed under a server;
* the card lists the type now, and it is one ``[gpu] vfio_vgpu_types``
  names for the card's product (a VF that holds the asked type already
  is bound as it is);
* never while a domain holds the VF; the handle's type is its
  provider's, which the server's profile asked, so no other consumer's
  wish is at stake;
* the write goes through oslo.privsep
  (:func:`sidecar.privileged.set_vgpu_type`, which checks the type is
  creatable again), is read back, and the job is journaled
  (``vgpu_types.json`` beside the programming journal) while it runs, so
  a sidecar killed mid-write logs what the VF holds when it comes back;
* a type set at bind is recorded (:data:`gpu_vfio.SET_AT_BIND_FILE`)
  before it is written, so that the VF keeps its MDEV handle (the one of
  its ARQ in Cyborg) while it holds it; only such a type is written back
  to 0, at unbind, and only when no domain holds the VF and no ARQ but
  the unbound one holds a handle of it. Otherwise the type is
  kept (and the VF offered again as it is): never removed under a server.
"""

import os
import threading
import time
import types

from oslo_log import log as logging
from oslo_utils import uuidutils

from sidecar import exception
from sidecar import model
from sidecar import privileged
from sidecar.drivers import gpu
from sidecar.drivers import gpu_vfio
from sidecar.program import journal as journal_mod
from sidecar.program import manager
from sidecar.program import vgpu_restore

LOG = logging.getLogger(__name__)

JOURNAL_FILE = 'vgpu_types.json'
#: A vGPU type name as the gpu driver reports it.
_NAME = gpu_vfio.TYPE_NAME


def type_trait(vendor_id, product_id, name):
    """The trait the ``gpu`` driver gives a VF of type ``name``."""
    return gpu._name_trait(types.SimpleNamespace(
        vendor_id=vendor_id, product_id=product_id), name, '')


def _info_address(info):
    """The PCI address an attach_info names, or None."""
    try:
        return '%s:%s:%s.%s' % (info['domain'], info['bus'], info['device'],
                                info['function'])
    except (KeyError, TypeError):
        return None


def _check_address(address):
    try:
        model.parse_bdf(address)
    except (TypeError, ValueError):
        raise exception.InvalidArgument(name='VF address',
                                        reason='not a PCI address')


class VgpuTypeSetter(vgpu_restore.Restorer):
    """Serve "give VF ``address`` its vGPU type" for this host's cards."""

    def __init__(self, host, sysfs_root, inventory, placement, domains,
                 journal, cyborg, offers, lock_for=None, clock=time.time,
                 write=None, clear=None, held=None):
        self._host = host
        self._root = sysfs_root
        self._inventory = inventory
        self._placement = placement
        self._domains = domains
        self._jobs = journal_mod.JsonStore(
            os.path.join(journal.path, JOURNAL_FILE))
        #: VF address -> the type set at bind (read by the gpu driver).
        self._given = journal_mod.JsonStore(
            os.path.join(journal.path, gpu_vfio.SET_AT_BIND_FILE))
        self._offers = offers
        self._clock = clock
        self._write = write or privileged.set_vgpu_type
        self._clear = clear or privileged.clear_vgpu_type
        self._held = held or (lambda address: False)
        self._lock_for = lock_for or self._own_lock
        self._locks = {}
        self._guard = threading.Lock()
        self._cyborg = cyborg

    def _own_lock(self, address):
        with self._guard:
            return self._locks.setdefault(address, threading.Lock())

    def _vf(self, address, name=None):
        """``(card, deployable)`` of the vGPU 17 VF ``address``: the
        deployable of its type ``name`` on the card (a vendor-VFIO handle
        of the VF), or its own (the PCI handle of a type an operator set).
        """
        found = [(device, dep, h) for device in self._inventory.devices()
                 if device.type == 'GPU' for dep in device.deployables
                 for h in dep.attach_handles
                 if h.address == address and h.managed == 'no']
        for device, dep, handle in found:
            if name is None or not handle.vendor_vfio or \
                    handle.mdev_type == name:
                return device, dep
        if found:
            # No longer offered for ``name`` (the card took another type):
            # the checks on what the card lists say why.
            return found[0][:2]
        raise exception.UnknownDevice(kind='vGPU 17 VF', address=address)

    def serves(self, address):
        """Whether ``address`` is a VF this setter gives its type at bind
        (reported with a vendor-VFIO handle) or gave one."""
        if self._given.get(address) is not None:
            return True
        return any(h.address == address and h.vendor_vfio
                   for device in self._inventory.devices()
                   for dep in device.deployables for h in dep.attach_handles)

    # -- bind -------------------------------------------------------------

    def bind(self, address, name, handle_uuid):
        """``create_vgpu_mdev`` of a vendor-VFIO handle: give VF
        ``address`` the type ``name`` it was offered for (or bound as it
        is when it holds it already). Raises as :meth:`set_type`."""
        _check_address(address)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise exception.InvalidArgument(name='asked_type',
                                            reason='not a vGPU type name')
        if not uuidutils.is_uuid_like(handle_uuid):
            raise exception.InvalidArgument(name='ah_uuid',
                                            reason='not a UUID')
        return self.set_type(address, name, handle=str(handle_uuid).lower())

    def set_type(self, address, name=None, handle=None):
        """Give the VF ``address`` the vGPU type ``name`` (None: the type
        it is offered for); return the type id it holds.

        :raises: InvalidArgument (bad address; the card cannot host the
            type now, or the option does not name it), UnknownDevice,
            DeviceBusy (a domain, an allocation or another type holds it,
            the card is held), ProgrammingFailed (the driver refused the
            write or reads back another type).
        """
        _check_address(address)
        card = self._vf(address, name)[0].address
        with self._lock_for(card):
            device, dep = self._vf(address, name)
            driver, current, creatable = gpu_vfio.read_state(self._root,
                                                             address)
            if driver != gpu_vfio.NVIDIA_DRIVER or current is None:
                raise exception.DeviceBusy(
                    address=address, reason='it is not a VF on nvidia (%s)'
                    % (driver or 'no driver'))
            by_name = {n: i for i, n in creatable.items()}
            offered = self._offers.get(device.model, ())
            if name is None:
                name = next((n for n in offered if n in by_name), None)
                if name is None and current:
                    return str(current)
            given = self._given.get(address) or {}
            if current and handle and given.get('handle') not in (None,
                                                                  handle):
                raise exception.DeviceBusy(
                    address=address, reason='its vGPU was given at bind to '
                    'another ARQ\'s handle')
            if current:
                # A full card lists nothing, a configured VF's own type
                # included: the record names it then.
                if name in (creatable.get(str(current)),
                            given.get('name') if given.get('type') ==
                            str(current) else None):
                    LOG.info('VF %(vf)s already holds vGPU type %(name)s',
                             {'vf': address, 'name': name})
                    return str(current)
                raise exception.DeviceBusy(
                    address=address, reason='it holds vGPU type %s, which '
                    'is never changed here' % current)
            if name is None or name not in offered:
                raise exception.InvalidArgument(
                    name='vGPU type', reason='%s names %s for GPU %s' % (
                        gpu_vfio.OFFER_OPTION,
                        ', '.join(repr(n) for n in offered) or 'no type',
                        card) + ('' if name is None else
                                 ', not %r' % (name,)))
            if name not in by_name:
                raise exception.InvalidArgument(
                    name='vGPU type', reason='GPU %s cannot host %r on %s '
                    'now (nvidia/creatable_vgpu_types lists %s)' % (
                        card, name, address,
                        ', '.join(sorted(by_name)) or 'nothing'))
            if self._held(card):
                raise exception.DeviceBusy(
                    address=address, reason='GPU %s is held (device list '
                    'says why)' % card)
            self._check_free(address)
            self._set(card, address, by_name[name], name, handle)
        self._inventory.refresh_device(card)
        return by_name[name]

    def _check_free(self, address):
        """A VF a domain names is never given a type. Who else may want it
        needs no check: the VF is offered by its type's provider of the
        card only (:mod:`sidecar.drivers.gpu_vfio_card`), so the server
        whose ARQ cyborg-conductor binds to its handle asked that type,
        and no other ARQ holds the handle."""
        users = self._domains.devices_in_use()
        if address in users:
            raise exception.DeviceBusy(
                address=address, reason='used by domain %s' % users[address])

    def _set(self, card, address, type_id, name, handle):
        job = {'card': card, 'type': type_id, 'name': name,
               'started': self._clock()}
        self._jobs.put(address, job)
        if handle is not None:
            # Before the write: a sidecar killed after it still reports
            # the VF with the handle its ARQ holds.
            self._given.put(address, {'card': card, 'type': type_id,
                                      'name': name, 'handle': handle})
        try:
            LOG.info('Setting vGPU type %(id)s (%(name)s) on VF %(vf)s',
                     {'id': type_id, 'name': name, 'vf': address})
            try:
                self._write(self._root, address, type_id)
            except OSError as exc:
                raise exception.ProgrammingFailed(
                    address=address, reason='the driver refused vGPU type '
                    '%s: %s' % (type_id, exc.strerror or exc))
            current = gpu_vfio.read_state(self._root, address)[1]
            if str(current) != type_id:
                raise exception.ProgrammingFailed(
                    address=address, reason='nvidia/current_vgpu_type reads '
                    '%s after writing %s' % (current, type_id))
            LOG.info('VF %(vf)s now holds vGPU type %(name)s',
                     {'vf': address, 'name': name})
        except Exception:
            if handle is not None:
                self._given.pop(address)
            raise
        finally:
            self._jobs.pop(address)

    # -- unbind -----------------------------------------------------------

    def unbind(self, address, name, handle_uuid):
        """``remove_vgpu_mdev`` of a vendor-VFIO handle: write 0 back on
        VF ``address`` when it holds the type ``name`` it got at bind, no
        domain holds it and no consumer but the unbound ARQ's holds an
        allocation on it. Any other case keeps the type and returns (the
        ARQ is freed either way; the VF is offered again as it is)."""
        _check_address(address)
        if not uuidutils.is_uuid_like(handle_uuid):
            raise exception.InvalidArgument(name='ah_uuid',
                                            reason='not a UUID')
        given = self._given.get(address)
        if not isinstance(given, dict) or given.get('name') != name:
            LOG.info('VF %(vf)s: no vGPU type %(name)r was set here at '
                     'bind; it is left as it is',
                     {'vf': address, 'name': name})
            return False
        card = given.get('card') or address
        with self._lock_for(card):
            current = gpu_vfio.read_state(self._root, address)[1]
            if str(current) != given.get('type'):
                LOG.info('VF %(vf)s holds vGPU type %(now)s, not the one '
                         'set at bind; left as it is',
                         {'vf': address, 'now': current})
                self._given.pop(address)
                return False
            why = self._kept_because(address, str(handle_uuid).lower())
            if why:
                LOG.warning('VF %(vf)s keeps vGPU type %(name)s: %(why)s; '
                            'it is offered again with it',
                            {'vf': address, 'name': name, 'why': why})
                return False
            LOG.info('Removing vGPU type %(id)s (%(name)s) from VF %(vf)s',
                     {'id': given['type'], 'name': name, 'vf': address})
            try:
                self._clear(self._root, address, given['type'])
            except OSError as exc:
                raise exception.ProgrammingFailed(
                    address=address, reason='the driver refused type 0: %s'
                    % (exc.strerror or exc))
            current = gpu_vfio.read_state(self._root, address)[1]
            if current != 0:
                raise exception.ProgrammingFailed(
                    address=address, reason='nvidia/current_vgpu_type reads '
                    '%s after writing 0' % current)
            self._given.pop(address)
        self._inventory.refresh_device(card)
        return True

    def _kept_because(self, address, handle_uuid):
        """Why the type of VF ``address`` must stay, or None: a domain
        names it, or an ARQ other than the unbound one holds a handle of
        it (or who holds it cannot be read)."""
        users = self._domains.devices_in_use()
        if address in users:
            return 'domain %s holds it' % users[address]
        try:
            arqs = self._cyborg.all_arqs()
        except exception.SidecarError as exc:
            return 'who holds it cannot be read (%s)' % exc
        for arq in arqs:
            if not isinstance(arq, dict):
                continue
            other = str(arq.get('attach_handle_uuid')).lower()
            info = arq.get('attach_handle_info')
            if (other not in ('none', handle_uuid) and
                    isinstance(info, dict) and _info_address(info) ==
                    address):
                return 'ARQ %s holds it' % arq.get('uuid')
        return None

    # -- housekeeping -----------------------------------------------------

    def jobs(self):
        """``[(VF address, job)]`` started and not finished."""
        return self._jobs.items()

    def recover(self):
        """Close the jobs a killed sidecar left, saying what each VF holds
        (a type is never undone: a server may have it by now)."""
        for address, job in self._jobs.items():
            with self._idle(job.get('card')) as idle:
                if not idle:
                    continue
                current = gpu_vfio.read_state(self._root, address)[1]
                LOG.warning('Setting vGPU type %(id)s on VF %(vf)s did not '
                            'finish; it holds type %(now)s',
                            {'id': job.get('type'), 'vf': address,
                             'now': current})
                self._jobs.pop(address)

    def _idle(self, card):
        return manager.held_if_free(self._lock_for(card))
