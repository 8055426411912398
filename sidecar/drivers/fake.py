"""Fake driver: one made-up FPGA-like device, for demos without hardware.

Like Cyborg's fake driver it needs no sysfs and no libvirt: the device,
its control path ``0000:0c:00.0`` and its attach handles (the next
``NUM_ACCELERATORS`` functions) exist only in the report.
"""

import os_resource_classes as orc
import os_traits

from sidecar.drivers import base
from sidecar import model

ADDRESS = '0000:0c:00.0'
TRAIT = 'CUSTOM_FAKE_DEVICE'


def _function(index):
    """The address ``index`` functions after ADDRESS (8 per slot)."""
    return '0000:0c:%02x.%x' % (index // 8, index % 8)


class FakeDriver(base.DiscoveryDriver):
    """Always report the same fake device."""

    name = 'fake'
    NUM_ACCELERATORS = 16

    def _handles(self):
        return tuple(model.AttachHandle('PCI', _function(index))
                     for index in range(1, self.NUM_ACCELERATORS + 1))

    def _discover(self):
        deployable = model.Deployable(
            name=ADDRESS,
            resource_class=orc.FPGA,
            num_accelerators=self.NUM_ACCELERATORS,
            traits=tuple(sorted((os_traits.OWNER_CYBORG, TRAIT))),
            attach_handles=self._handles(),
            driver_name=self.name)
        return [model.Device(
            type='FPGA', vendor='abcd', model='abcd', address=ADDRESS,
            deployables=(deployable,),
            std_board_info=(('product_id', 'abcd'),),
            driver_name=self.name)]
