"""A flavor carries the accelerators: ``accel:device_profile=<name>``."""

from tempest.lib import decorators

from tempest_plugin.tests import base


class FlavorDeviceProfileTest(base.BaseNovaCyborgTest):
    """The extra spec round-trips, validated (microversion 2.86)."""

    min_microversion = '2.86'

    @decorators.idempotent_id('947a7463-cbd9-4df4-8539-97f47227e87f')
    def test_device_profile_extra_spec_round_trip(self):
        profile = self.create_device_profile(cleanup=self.addCleanup)
        shown = self.accelerator_client.show_device_profile(
            profile.uuid)['device_profile']
        self.assertEqual(profile.name, shown['name'])
        self.assertEqual(profile.groups, shown['groups'])

        flavor_id = self.create_flavor(profile, cleanup=self.addCleanup)
        expected = {base.DP_EXTRA_SPEC: profile.name}
        self.assertEqual(expected, self.flavors_client.list_flavor_extra_specs(
            flavor_id)['extra_specs'])
        self.assertEqual(expected, self.flavors_client.show_flavor_extra_spec(
            flavor_id, base.DP_EXTRA_SPEC))
