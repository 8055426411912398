"""The reconciler: what it finds wrong in Placement, and how it repairs it.

Placement is a small in-memory model here, with the generation semantics
the reconciler relies on (every write bumps the provider's generation); the
functional tests run the same code against the real Placement and
cyborg-conductor.
"""

import contextlib

import testtools

from sidecar import model
from sidecar.program import manager as program
from sidecar.report import reconcile

ROOT = 'c0c0c0c0-0000-4000-8000-000000000000'
F_OLD = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_0ABC'
F_NEW = 'CUSTOM_FPGA_FUNCTION_ID_INTEL_0DEF'
TRAITS = ('OWNER_CYBORG', 'CUSTOM_FPGA_INTEL', F_OLD)


def _device(address='0000:81:00.0', total=4, traits=TRAITS):
    dep = model.Deployable(name=address, resource_class='FPGA',
                           num_accelerators=total, traits=tuple(traits),
                           driver_name='intel')
    return model.Device(type='FPGA', vendor='8086', model='09c4',
                        address=address, deployables=(dep,))


class MemoryPlacement:
    """The PlacementClient calls the reconciler makes, in memory."""

    def __init__(self):
        self.providers = {}
        self.traits = set()
        self.writes = []

    def add(self, uuid, name, parent=ROOT, inventories=None, traits=()):
        self.providers[uuid] = {'uuid': uuid, 'name': name,
                                'parent_provider_uuid': parent,
                                'generation': 0,
                                'inventories': dict(inventories or {}),
                                'traits': set(traits)}
        self.traits |= set(traits)

    def _bump(self, uuid, what):
        self.providers[uuid]['generation'] += 1
        self.writes.append((what, uuid))

    def providers_in_tree(self, root):
        return [dict(rp) for rp in self.providers.values()
                if rp['parent_provider_uuid'] == root]

    def get_provider(self, uuid):
        return self.providers.get(uuid)

    def read_provider(self, uuid):
        rp = self.providers[uuid]
        return dict(rp['inventories']), set(rp['traits'])

    def create_provider(self, uuid, name, parent):
        self.add(uuid, name, parent)
        self.writes.append(('create', uuid))

    def set_parent(self, uuid, name, parent):
        self.providers[uuid]['parent_provider_uuid'] = parent
        self._bump(uuid, 'parent')

    def ensure_traits(self, traits):
        self.traits |= set(traits)

    def set_inventory(self, uuid, rc, total, reserved):
        inv = self.providers[uuid]['inventories']
        new = dict(inv.get(rc, {}), total=total, max_unit=total,
                   reserved=reserved)
        if inv.get(rc) != new:
            inv[rc] = new
            self._bump(uuid, 'inventory')

    def replace_traits_with_prefix(self, uuid, prefix, traits):
        # As the client: the custom traits are created first.
        self.ensure_traits(traits)
        rp = self.providers[uuid]
        new = {t for t in rp['traits'] if not t.startswith(prefix)}
        new |= set(traits)
        if new != rp['traits']:
            rp['traits'] = new
            self._bump(uuid, 'traits')


def _inv(total, reserved=0):
    return {'FPGA': {'total': total, 'max_unit': total,
                     'reserved': reserved, 'min_unit': 1, 'step_size': 1,
                     'allocation_ratio': 1.0}}


class ReconcilerTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.placement = MemoryPlacement()
        self.busy = set()
        self.reconciler = reconcile.Reconciler(
            'compute1', self.placement, idle=self._idle)
        self.devices = [_device()]
        self.name = 'compute1_0000:81:00.0'
        self.uuid = program.provider_uuid(self.name)
        self.reports = 0

    @contextlib.contextmanager
    def _idle(self, address):
        yield address not in self.busy

    def _good(self, **kwargs):
        values = dict(inventories=_inv(4), traits=TRAITS)
        values.update(kwargs)
        self.placement.add(self.uuid, self.name, **values)

    def _report_again(self):
        self.reports += 1

    def converge(self):
        return self.reconciler.converge(ROOT, self.devices,
                                        self._report_again)

    def test_matching_provider_writes_nothing(self):
        self._good()
        self.assertEqual({}, self.converge())
        self.assertEqual([], self.placement.writes)
        self.assertEqual(0, self.reports)

    def test_missing_provider_is_reported_again_first(self):
        def conductor_recreates():
            self.reports += 1
            self._good()
        self._report_again = conductor_recreates
        self.assertEqual({}, self.converge())
        self.assertEqual(1, self.reports)
        # The conductor re-created it: nothing written directly, and no
        # extra report next cycle.
        self.assertEqual([], self.placement.writes)
        self.assertFalse(self.reconciler.report_due())

    def test_missing_provider_is_created_when_a_report_does_not(self):
        self.assertEqual({}, self.converge())
        self.assertEqual(1, self.reports)
        rp = self.placement.providers[self.uuid]
        self.assertEqual((self.name, ROOT),
                         (rp['name'], rp['parent_provider_uuid']))
        self.assertEqual(_inv(4)['FPGA']['total'],
                         rp['inventories']['FPGA']['total'])
        self.assertEqual(set(TRAITS), rp['traits'])
        # The next cycle reports once more, in case the conductor had lost
        # the device itself.
        self.assertTrue(self.reconciler.report_due())
        self.assertFalse(self.reconciler.report_due())

    def test_wrong_inventory_is_set(self):
        for inventories in ({}, _inv(3), _inv(4, reserved=4),
                            {'FPGA': dict(_inv(4)['FPGA'], max_unit=1)}):
            self.placement.providers.clear()
            self._good(inventories=inventories)
            self.assertEqual({}, self.converge(), inventories)
            inv = self.placement.providers[self.uuid]['inventories']['FPGA']
            self.assertEqual((4, 4, 0), (inv['total'], inv['max_unit'],
                                         inv['reserved']))
        self.assertEqual(0, self.reports)

    def test_other_inventories_are_kept(self):
        extra = {'CUSTOM_FPGA_MEM': {'total': 8, 'max_unit': 8,
                                     'reserved': 8}}
        self._good(inventories=dict(_inv(2), **extra))
        self.converge()
        inventories = self.placement.providers[self.uuid]['inventories']
        self.assertEqual(extra['CUSTOM_FPGA_MEM'],
                         inventories['CUSTOM_FPGA_MEM'])

    def test_missing_and_stale_traits(self):
        self._good(traits=('OWNER_CYBORG', F_NEW, 'CUSTOM_OPERATOR_TAG'))
        drift = self.reconciler.check(ROOT, self.devices)
        self.assertEqual(
            ['traits %s, CUSTOM_FPGA_INTEL are missing' % F_OLD,
             'stale traits %s' % F_NEW],
            drift[next(iter(drift))].problems)
        self.assertEqual({}, self.converge())
        # An operator's own trait is not the sidecar's to remove.
        self.assertEqual(set(TRAITS) | {'CUSTOM_OPERATOR_TAG'},
                         self.placement.providers[self.uuid]['traits'])

    def test_wrong_parent(self):
        self._good(parent='d0d0d0d0-0000-4000-8000-000000000000')
        self.assertEqual({}, self.converge())
        self.assertEqual(ROOT, self.placement.providers[self.uuid][
            'parent_provider_uuid'])
        # Not under the compute node, it looked missing: reported first.
        self.assertEqual(1, self.reports)

    def test_device_being_programmed_is_left_alone(self):
        self._good(inventories=_inv(4, reserved=4))
        self.busy.add('0000:81:00.0')
        self.assertEqual({}, self.converge())
        self.assertEqual([], self.placement.writes)
        self.busy.clear()
        self.assertEqual({}, self.converge())
        self.assertEqual([('inventory', self.uuid)], self.placement.writes)

    def test_unchanged_generation_is_not_read_again(self):
        self._good()
        reads = []
        read = self.placement.read_provider
        self.placement.read_provider = lambda u: reads.append(u) or read(u)
        self.converge()
        self.converge()
        self.assertEqual(1, len(reads))
        # Any write to the provider bumps its generation: read again.
        self.placement.set_inventory(self.uuid, 'FPGA', 3, 0)
        self.assertEqual({}, self.converge())
        self.assertEqual(3, len(reads))
        inv = self.placement.providers[self.uuid]['inventories']['FPGA']
        self.assertEqual(4, inv['total'])

    def test_a_changed_device_is_checked_again(self):
        self._good()
        self.converge()
        self.devices = [_device(total=2)]
        self.assertEqual({}, self.converge())
        inv = self.placement.providers[self.uuid]['inventories']['FPGA']
        self.assertEqual(2, inv['total'])

    def test_drift_left_is_returned(self):
        self._good(inventories=_inv(3))
        # Placement accepts the write but something puts it back.
        self.placement.set_inventory = lambda *args, **kwargs: None
        drift = self.converge()
        self.assertEqual(['FPGA total/max_unit/reserved are 3/3/0, not '
                          '4/4/0'], [str(d) for d in drift.values()])

    def test_no_accelerators_no_inventory_check(self):
        self.devices = [_device(total=0)]
        self._good(inventories={})
        self.assertEqual({}, self.converge())
        self.assertEqual([], self.placement.writes)
