"""Operations that give a server new ARQs: resize, cold migration, shelve.

doc/source/operations.rst: a resize or cold migration binds the new
flavor's ARQs on the destination while the source's are parked; confirm
deletes the parked ones, revert deletes the destination's and binds the
parked ones again. Shelve offload deletes the ARQs and frees the devices;
unshelve creates and binds new ones.
"""

from tempest import config
from tempest.lib import decorators
import testtools

from tempest_plugin.tests.scenario import base

CONF = config.CONF
FEATURES = CONF.compute_feature_enabled
BOOT = base.BOOT
step = base.step

COLD_MIGRATION = (FEATURES.cold_migration and
                  CONF.compute.min_compute_nodes >= 2)


class AcceleratorResizeTest(base.LifecycleTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not FEATURES.resize:
            raise cls.skipException('Resize is not available.')

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.resize_flavor = cls.create_flavor(cls.profile)

    @decorators.idempotent_id('1b288ef2-1d49-46fa-916d-a6a104fca75b')
    def test_resize_confirm(self):
        self.run_steps(step('resize', 'VERIFY_RESIZE', arqs='resized'),
                       step('confirm', 'ACTIVE', arqs='resized',
                            gone=[BOOT]))

    @decorators.idempotent_id('2d3bb39e-b473-4759-89f4-0498512c5ae3')
    def test_resize_revert(self):
        self.run_steps(step('resize', 'VERIFY_RESIZE', arqs='resized'),
                       step('revert', 'ACTIVE', arqs=BOOT, host=BOOT,
                            gone=['resized']))


@testtools.skipUnless(COLD_MIGRATION, 'Cold migration is not available, or '
                      '[compute] min_compute_nodes is less than 2.')
class AcceleratorColdMigrationTest(base.LifecycleTest):

    @decorators.idempotent_id('8660dec4-a755-4a93-8f7f-9bd4a4ef5704')
    def test_cold_migrate_confirm(self):
        self.run_steps(step('migrate', 'VERIFY_RESIZE', arqs='moved',
                            host='destination'),
                       step('confirm', 'ACTIVE', arqs='moved',
                            host='destination', gone=[BOOT]))

    @decorators.idempotent_id('9a3e1250-daf6-4491-8294-fedaa4249fe3')
    def test_cold_migrate_revert(self):
        self.run_steps(step('migrate', 'VERIFY_RESIZE', arqs='moved',
                            host='destination'),
                       step('revert', 'ACTIVE', arqs=BOOT, host=BOOT,
                            gone=['moved']))


class AcceleratorShelveTest(base.LifecycleTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not FEATURES.shelve:
            raise cls.skipException('Shelve is not available.')

    @decorators.idempotent_id('14a08bce-5d1e-4302-adc8-743de28917c4')
    def test_shelve_offload_unshelve(self):
        self.run_steps(step('shelve_offload', 'SHELVED_OFFLOADED', arqs=None,
                            gone=[BOOT]),
                       step('unshelve', 'ACTIVE', arqs='unshelved'))
