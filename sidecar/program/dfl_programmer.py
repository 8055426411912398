"""Programming an Intel DFL card: ``DFL_FPGA_FME_PORT_PR`` on its FME.

The deployable's function (the PF, or the VF of a released port; see
:mod:`sidecar.drivers.fpga`) names the port; its card's FME character
device ``<[fpga] dfl_dev_dir>/dfl-fme.N`` takes the ioctl
(:func:`sidecar.privileged.dfl_port_pr`). The bitstream must be the raw
partial bitstream the kernel writes to the PR engine: OPAE's ``.gbs``
container (header and JSON metadata) is not unwrapped here, and its
interface id is not checked against the PR region's ``compat_id``; use
``programmer = command`` with ``fpgaconf`` for ``.gbs`` files. The new
function is read back from the port's ``afu_id`` by the caller.
"""

import errno
import os

from oslo_log import log as logging

from sidecar import exception
from sidecar import privileged
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
        number = port.number if port.number is not None else 0
        LOG.info('Programming %(address)s: DFL_FPGA_FME_PORT_PR on '
                 '%(fme)s, port %(port)d', {'address': address,
                                            'fme': card.fme_name,
                                            'port': number})
        try:
            privileged.dfl_port_pr(self.conf.fpga.dfl_dev_dir,
                                   card.fme_name, number, bitstream_path)
        except (OSError, exception.InvalidArgument) as e:
            reason = '%s refused the partial reconfiguration of port %d: ' \
                '%s' % (card.fme_name, number, programmers._reason(e))
            if isinstance(e, OSError) and e.errno == errno.EIO and \
                    card.manager:
                status = sources.read_file(os.path.join(card.manager,
                                                        'status'))
                reason += ' (FPGA manager status: %s)' % (status or 'empty')
            raise exception.ProgrammingFailed(address=address, reason=reason)
        LOG.info('Programmed %s', address)
