"""vGPU 17 types set at bind, written back after a host reboot.

``nvidia/current_vgpu_type`` does not survive a host reboot or a reload
of ``nvidia``: every VF reads 0 afterwards, and NVIDIA vgpu-device-manager
applies its configuration at every boot for that reason
(``pkg/vgpu/vfio/sysfs.go``). The types an operator set are the
operator's to apply (the same tool, a unit before the sidecar); those the
sidecar set at bind (:data:`sidecar.drivers.gpu_vfio.SET_AT_BIND_FILE`)
it writes back itself, under the card's lock and through privsep as at
bind, while an ARQ still holds the VF's handle, so that the guest finds
its vGPU when Nova starts it again. Until then the gpu driver reports the
VF with the handle of its ARQ (never as idle) and its health check says
the vGPU is missing.
"""

from oslo_log import log as logging

from sidecar import exception
from sidecar.drivers import gpu_vfio

LOG = logging.getLogger(__name__)


class Restorer:
    """:meth:`restore` of :class:`sidecar.program.vgpu_types.
    VgpuTypeSetter` (which it is mixed into)."""

    def restore(self):
        """Write back the type of each VF given one at bind that reads 0
        while an ARQ still holds its handle: ``current_vgpu_type`` does
        not survive a host reboot or a reload of ``nvidia`` (NVIDIA
        vgpu-device-manager applies its configuration at every boot,
        ``pkg/vgpu/vfio/sysfs.go``), and the guest must find its vGPU when
        Nova starts it again. Runs every cycle, the first before the
        sidecar reports anything; a VF whose card is busy, which is not on
        ``nvidia`` yet, or which a running domain holds is left for the
        next one. A record no ARQ holds any more (its unbind never reached
        the sidecar) is dropped when the VF reads 0: the VF is idle.
        Returns the VFs written."""
        records = [(a, g) for a, g in self._given.items()
                   if isinstance(g, dict)]
        if not records:
            return []
        try:
            handles = {str(arq.get('attach_handle_uuid')).lower()
                       for arq in self._cyborg.all_arqs()
                       if isinstance(arq, dict)}
        except exception.SidecarError as exc:
            LOG.warning('Cannot read the ARQs (%s): the vGPU types set at '
                        'bind are written back all the same', exc)
            handles = None
        written = []
        for address, given in records:
            with self._idle(given.get('card') or address) as idle:
                if idle and self._restore(address, given, handles):
                    written.append(address)
        for card in sorted({g.get('card') for a, g in records
                            if a in written}):
            self._inventory.refresh_device(card)
        return written

    def _restore(self, address, given, handles):
        try:
            driver, current, creatable = gpu_vfio.read_state(self._root,
                                                             address)
        except exception.DeviceBusy as exc:
            LOG.warning('Cannot restore the vGPU type of %s: %s', address,
                        exc)
            return False
        if str(current) == given.get('type'):
            return False
        if handles is not None and given.get('handle') not in handles:
            if current == 0:
                LOG.info('VF %(vf)s reads type 0 and no ARQ holds its '
                         'handle any more: it is idle',
                         {'vf': address})
                self._given.pop(address)
            return False
        if driver != gpu_vfio.NVIDIA_DRIVER or current is None:
            LOG.warning('VF %(vf)s was given vGPU type %(name)s at bind and '
                        'is not a VF on nvidia now (%(driver)s): its type '
                        'is written back once it is',
                        {'vf': address, 'name': given.get('name'),
                         'driver': driver or 'no driver'})
            return False
        if current:
            LOG.warning('VF %(vf)s holds vGPU type %(now)s, not %(id)s it '
                        'was given at bind; left as it is',
                        {'vf': address, 'now': current,
                         'id': given.get('type')})
            return False
        running = self._domains.devices_running()
        if address in running:
            LOG.warning('VF %(vf)s has no vGPU type and domain %(dom)s runs '
                        'with it: its type is written back once it stops',
                        {'vf': address, 'dom': running[address]})
            return False
        by_name = {n: i for i, n in creatable.items()}
        # Ids may change with the driver; the name does not.
        type_id = by_name.get(given.get('name'))
        if type_id is None:
            LOG.error('VF %(vf)s lost vGPU type %(name)s (host reboot or '
                      'driver reload) and its card cannot host it now '
                      '(nvidia/creatable_vgpu_types lists %(list)s): the '
                      'server using it has no vGPU',
                      {'vf': address, 'name': given.get('name'),
                       'list': ', '.join(sorted(by_name)) or 'nothing'})
            return False
        LOG.warning('VF %(vf)s lost vGPU type %(name)s (host reboot or '
                    'driver reload); writing it back',
                    {'vf': address, 'name': given.get('name')})
        self._jobs.put(address, {'card': given.get('card'), 'type': type_id,
                                 'name': given.get('name'),
                                 'started': self._clock()})
        try:
            self._write(self._root, address, type_id)
            now = gpu_vfio.read_state(self._root, address)[1]
        except (OSError, exception.DeviceBusy) as exc:
            LOG.error('Writing back vGPU type %(id)s on VF %(vf)s failed: '
                      '%(exc)s; retried next cycle',
                      {'id': type_id, 'vf': address, 'exc': exc})
            return False
        finally:
            self._jobs.pop(address)
        if str(now) != type_id:
            LOG.error('VF %(vf)s reads type %(now)s after writing back '
                      '%(id)s; retried next cycle',
                      {'vf': address, 'now': now, 'id': type_id})
            return False
        if type_id != given.get('type'):
            self._given.put(address, dict(given, type=type_id))
        return True
