"""Programming an Intel DFL card: ``DFL_FPGA_FME_PORT_PR`` on its FME.

The deployable's function (the PF, or the VF of a released port; see
:mod:`sidecar.drivers.fpga`) names the port; its card's FME character
device ``<[fpga] dfl_dev_dir>/dfl-fme.N`` takes the ioctl
(:func:`sidecar.privileged.dfl_port_pr`) with the raw partial bitstream.

A bitstream in OPAE's ``.gbs`` container (:mod:`sidecar.program.gbs`) is
checked and unwrapped first, as OPAE's ``fpgaconf`` does:

- before: its ``afu-image`` ``interface-uuid`` must be the ``compat_id``
  of the port's PR region (``dfl-fme-region.P/fpga_region/regionY``),
  else nothing is written and the job fails naming both;
- an image that asks for AFU user clocks (``clock-frequency-high`` or
  ``-low`` above 0) is refused before anything is written: OPAE's
  ``fpgaconf`` sets them after the load (``reconf.c``
  ``set_afu_userclock``) by computing the user-clock PLL's register
  commands from its own frequency tables (``usrclk/user_clk.c``); the
  kernel offers only those raw commands (``dfl-port.M/userclk_freqcmd``,
  ``userclk_freqcntrcmd``, and on ports whose header revision is 0
  only: ``dfl-afu-main.c`` ``port_hdr_attrs_visible``), no frequency.
  Such an image is programmed with ``[fpga] programmer = command`` and
  ``fpgaconf``;
- the port's errors are cleared (each value read, written back to
  ``dfl-port.M/errors/errors``), as ``fpgaconf`` does before it loads
  (``reconf.c`` ``clear_port_errors``): a refusal stops the job;
- only the raw bitstream behind its metadata reaches the kernel: the
  privileged daemon reads the file from that offset on;
- after: the port's ``afu_id`` (``dfl-port.M/afu_id``) must be one of its
  ``accelerator-clusters`` ``accelerator-type-uuid``.

A file that is not a GBS is written as it is (a raw bitstream has no
interface id to check). In every case the caller then reads the function
back from the port and compares it with the image's ``accel:function_id``
(:mod:`sidecar.program.manager`).

A port released to a VF (SR-IOV) is loaded as Intel's OPAE driver guide
(683857, "Partial Reconfiguration") and the kernel
(drivers/fpga/dfl.c ``dfl_fpga_cdev_assign_port``: "a mandatory step
after disable SRIOV support") ask: :mod:`sidecar.program.dfl_sriov`
disables the card's SR-IOV, assigns its ports back to the PF, and after
the load releases them and enables SR-IOV again; it refuses while a VF
of the card is not on ``dfl-pci`` (a guest holds it).
"""

import errno
import os

from oslo_log import log as logging

from sidecar import exception
from sidecar import privileged
from sidecar.drivers import dfl_health
from sidecar.program import dfl_sriov as sriov
from sidecar.program import gbs
from sidecar.program import programmers
from sidecar.sources import base as sources
from sidecar.sources import dfl

LOG = logging.getLogger(__name__)


class DflProgrammer(programmers.Programmer):
    """``[fpga] programmer = dfl``."""

    def _port(self, address):
        for card in dfl.cards(self.conf.sidecar.sysfs_root).values():
            ports = [p for p in card.ports if p.address == address]
            if len(ports) == 1:
                return card, ports[0]
            if ports:
                raise exception.ProgrammingFailed(
                    address=address, reason='several DFL ports (%s) are '
                    'under this function' % ', '.join(p.name for p in ports))
        raise exception.ProgrammingFailed(
            address=address, reason='no port of a DFL card is under this '
            'PCI function (%s/class/fpga_region)'
            % self.conf.sidecar.sysfs_root)

    def program(self, address, bitstream_path):
        bitstream_path = self._check(address, bitstream_path)
        card, port = self._port(address)
        if port.number is None and len(card.ports) > 1:
            raise exception.ProgrammingFailed(
                address=address, reason='%s/id is unreadable: which of the '
                'card\'s %d ports to program is unknown; nothing was written'
                % (port.name, len(card.ports)))
        number = port.number if port.number is not None else 0
        image = self._read_gbs(address, bitstream_path)
        if image is not None:
            self._check_interface(address, card, port, image)
            self._check_clocks(address, image)
        if port.address == card.address:
            self._load(address, card, port, number, bitstream_path, image)
        else:
            with sriov.assigned_back(self.conf, address, card):
                card, port = sriov.port_on_pf(self.conf, address, card,
                                              number)
                self._load(address, card, port, number, bitstream_path,
                           image)
        LOG.info('Programmed %s', address)

    def _load(self, address, card, port, number, bitstream_path, image):
        """Clear the port's errors, load, check the port's afu_id."""
        self._clear_errors(address, port)
        LOG.info('Programming %(address)s: DFL_FPGA_FME_PORT_PR on '
                 '%(fme)s, port %(port)d%(gbs)s',
                 {'address': address, 'fme': card.fme_name, 'port': number,
                  'gbs': ' (GBS unwrapped)' if image else ''})
        try:
            privileged.dfl_port_pr(self.conf.fpga.dfl_dev_dir,
                                   card.fme_name, number, bitstream_path,
                                   image.offset if image else 0)
        except (OSError, exception.InvalidArgument) as e:
            reason = '%s refused the partial reconfiguration of port %d: ' \
                '%s' % (card.fme_name, number, programmers._reason(e))
            if isinstance(e, OSError) and e.errno == errno.EIO and \
                    card.manager:
                status = sources.read_file(os.path.join(card.manager,
                                                        'status'))
                reason += ' (FPGA manager status: %s)' % (status or 'empty')
            raise exception.ProgrammingFailed(address=address, reason=reason)
        if image is not None and image.afu_ids:
            self._check_afu(address, port, image)

    # -- the GBS container ----------------------------------------------

    @staticmethod
    def _read_gbs(address, path):
        """The parsed GBS at ``path``, None if the file is no GBS."""
        try:
            with open(path, 'rb') as f:
                if not gbs.is_gbs(f.read(16)):
                    return None
                f.seek(0)
                data = f.read(privileged.MAX_PR_BITSTREAM + 1)
        except OSError as e:
            raise exception.ProgrammingFailed(
                address=address, reason='cannot read the bitstream: %s'
                % programmers._reason(e))
        try:
            image = gbs.parse(data)
        except exception.InvalidArgument as e:
            raise exception.ProgrammingFailed(address=address, reason=str(e))
        if image.offset >= len(data):
            raise exception.ProgrammingFailed(
                address=address, reason='the GBS file holds no bitstream '
                'after its metadata')
        return image

    @staticmethod
    def _check_clocks(address, image):
        if not image.user_clock:
            return
        LOG.error('Not programming %(address)s with [fpga] programmer = '
                  'dfl: its GBS asks for AFU user clocks %(high)g/%(low)g '
                  'MHz, which the kernel cannot set', {
                      'address': address, 'high': image.clocks[0],
                      'low': image.clocks[1]})
        raise exception.ProgrammingFailed(
            address=address, reason='the bitstream asks for AFU user clocks '
            'of %g MHz (clock-frequency-high) and %g MHz '
            '(clock-frequency-low); the kernel offers no interface that '
            'sets a frequency (only the raw PLL commands OPAE\'s fpgaconf '
            'computes), so the dfl programmer cannot load it: use [fpga] '
            'programmer = command with fpgaconf for this card; nothing was '
            'written' % image.clocks)

    def _clear_errors(self, address, port):
        try:
            cleared = dfl_health.clear_port_errors(
                self.conf.sidecar.sysfs_root, port)
        except (OSError, exception.InvalidArgument) as e:
            raise exception.ProgrammingFailed(
                address=address, reason='cannot clear the errors of %s '
                'before loading (as fpgaconf does): %s; nothing was written'
                % (port.name, programmers._reason(e)))
        for relpath, value in cleared:
            LOG.info('Cleared %s (0x%x) before programming %s', relpath,
                     value, address)

    def _check_interface(self, address, card, port, image):
        region = card.pr_region(port)
        compat = region and sources.read_file(
            os.path.join(region, 'compat_id'))
        if not compat:
            raise exception.ProgrammingFailed(
                address=address, reason='the PR region of %s has no '
                'readable compat_id to check the bitstream\'s '
                'interface-uuid %s against' % (port.name, image.interface_id))
        try:
            compat = gbs.hex_id(compat, 'compat_id')
        except exception.InvalidArgument as e:
            raise exception.ProgrammingFailed(address=address, reason=str(e))
        if compat != image.interface_id:
            raise exception.ProgrammingFailed(
                address=address, reason='the bitstream was built for FPGA '
                'interface %s (its interface-uuid), but the PR region %s of '
                '%s has compat_id %s; nothing was written'
                % (image.interface_id, os.path.basename(region), port.name,
                   compat))

    @staticmethod
    def _check_afu(address, port, image):
        path = os.path.join(port.path, 'afu_id')
        value = sources.read_file(path)
        try:
            afu_id = gbs.hex_id(value or '', 'afu_id')
        except exception.InvalidArgument:
            afu_id = None
        if afu_id not in image.afu_ids:
            raise exception.ProgrammingFailed(
                address=address, reason='after programming, %s/afu_id reads '
                '%s, not the bitstream\'s accelerator-type-uuid %s'
                % (port.name, value or 'nothing',
                   ' or '.join(image.afu_ids) or '(none)'))
