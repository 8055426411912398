"""The churn's invariant checks (tests/cloud/churn.py) catch planted
faults: a test that cannot fail would prove nothing."""

import os

import fixtures
import testtools

from tests.cloud import churn

DOMAIN = """<domain type='kvm'><name>instance-%(n)s</name><uuid>%(uuid)s</uuid>
<devices><disk type='file' device='disk'/>%(hostdevs)s</devices></domain>"""
PCI = """<hostdev mode='subsystem' type='pci' managed='yes'><source>
<address domain='0x%s' bus='0x%s' slot='0x%s' function='0x%s'/></source>
</hostdev>"""
MDEV = """<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source>
<address uuid='%s'/></source></hostdev>"""

P1 = 'a0000000-0000-4000-8000-000000000001'
Q1 = 'a0000000-0000-4000-8000-000000000002'
RP = 'b0000000-0000-4000-8000-00000000000f'


def arq(uuid, bdf=('0000', '81', '01', '1'), state='Bound', host='compute1',
        profile='vf', rp=RP):
    domain, bus, device, function = bdf
    return {'uuid': uuid, 'state': state, 'hostname': host,
            'device_profile_name': profile, 'device_rp_uuid': rp,
            'attach_handle_type': 'PCI',
            'attach_handle_info': {'domain': domain, 'bus': bus,
                                   'device': device, 'function': function}}


def allocation(rp=RP, amount=1):
    result = {'cn': {'resources': {'VCPU': 1, 'MEMORY_MB': 256}}}
    if amount:
        result[rp] = {'resources': {'CUSTOM_MIGRATABLE_VF': amount}}
    return result


def server(uuid=P1, status='ACTIVE', host='compute1'):
    return {'id': uuid, 'status': status, 'OS-EXT-SRV-ATTR:host': host}


RC = {'vf': 'CUSTOM_MIGRATABLE_VF'}


class DomainFilesTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path

    def write(self, uuid, host, *hostdevs):
        with open(os.path.join(self.dir, uuid + '.xml'), 'w') as f:
            f.write(DOMAIN % {'n': uuid[-1], 'uuid': uuid,
                              'hostdevs': ''.join(hostdevs)})
        with open(os.path.join(self.dir, uuid + '.host'), 'w') as f:
            f.write(host)

    def test_one_bdf_in_two_domains_of_a_host_is_caught(self):
        # The planted double assignment: issue 26's P and Q, one running,
        # one stopped (the files do not say, and it does not matter).
        self.write(P1, 'compute2', PCI % ('0000', '81', '01', '1'))
        self.write(Q1, 'compute2', PCI % ('0000', '81', '01', '1'),
                   PCI % ('0000', '81', '00', '2'))
        domains = churn.read_domains(self.dir)
        self.assertEqual({'0000:81:01.1'}, domains[P1][1])
        self.assertEqual(
            ['0000:81:01.1 on compute2 is in the domains of %s, %s' % (
                P1, Q1)], churn.double_assignments(domains))

    def test_same_bdf_on_two_hosts_is_no_double_assignment(self):
        self.write(P1, 'compute1', PCI % ('0000', '81', '01', '1'))
        self.write(Q1, 'compute2', PCI % ('0000', '81', '01', '1'))
        self.assertEqual(
            [], churn.double_assignments(churn.read_domains(self.dir)))

    def test_one_mdev_in_two_domains_is_caught(self):
        mdev = 'C0FFEE00-0000-4000-8000-000000000000'
        self.write(P1, 'compute1', MDEV % mdev)
        self.write(Q1, 'compute1', MDEV % mdev.lower())
        self.assertEqual(1, len(churn.double_assignments(
            churn.read_domains(self.dir))))


class ServerProblemsTest(testtools.TestCase):

    def problems(self, view, domain, arqs, allocations):
        return churn.server_problems(view, domain, arqs, allocations, RC)

    def test_consistent_server(self):
        self.assertEqual([], self.problems(
            server(), ('compute1', {'0000:81:01.1'}), [arq('x')],
            allocation()))

    def test_stray_hostdev_without_arq(self):
        # The stopped server of issue 26 after removeAccelerator.
        found = self.problems(server(status='SHUTOFF'),
                              ('compute1', {'0000:81:01.1'}), [],
                              allocation(amount=0))
        self.assertEqual(1, len(found), found)
        self.assertIn("<hostdev> ['0000:81:01.1'] but its Bound ARQs give "
                      "[]", found[0])

    def test_bound_arq_missing_from_the_guest(self):
        found = self.problems(server(status='SHUTOFF'), ('compute1', set()),
                              [arq('x')], allocation())
        self.assertEqual(1, len(found), found)

    def test_allocation_without_the_device_or_without_arq(self):
        self.assertEqual(1, len(self.problems(
            server(), ('compute1', {'0000:81:01.1'}), [arq('x')],
            allocation(amount=0))))
        self.assertEqual(1, len(self.problems(
            server(), ('compute1', set()), [arq('x', state='Unbound')],
            allocation())))

    def test_arq_bound_on_another_host(self):
        found = self.problems(server(), ('compute1', {'0000:81:01.1'}),
                              [arq('x'), arq('y', host='compute2',
                                             bdf=('0000', '81', '01', '2'))],
                              allocation(amount=2))
        self.assertTrue(any('another host' in p for p in found), found)

    def test_suspended_guest_may_lack_but_never_add(self):
        self.assertEqual([], self.problems(
            server(status='SUSPENDED'), ('compute1', set()), [arq('x')],
            allocation()))
        self.assertEqual(1, len(self.problems(
            server(status='SUSPENDED'), ('compute1', {'0000:81:01.2'}),
            [arq('x')], allocation())))

    def test_failed_build_without_guest(self):
        # ERROR before a host (chaos seed 7 step 2: Cyborg's API killed
        # during the bind): no domain, no ARQ, no allocation.
        self.assertEqual([], self.problems(
            server(status='ERROR', host=None), None, [], {}))
        self.assertEqual(1, len(self.problems(
            server(status='ACTIVE'), None, [], {})))

    def test_offloaded_server_has_no_domain(self):
        self.assertEqual(1, len(self.problems(
            server(status='SHELVED_OFFLOADED', host=None),
            ('compute1', set()), [], allocation(amount=0))))

    def test_deleted_server_leaves_nothing(self):
        self.assertEqual([], churn.gone_problems(P1, {}, [], {}))
        self.assertEqual(3, len(churn.gone_problems(
            P1, {P1: ('compute1', set())}, [arq('x')], allocation())))


class SettingsTest(testtools.TestCase):

    def test_defaults_leave_out_the_known_defects(self):
        seed, steps, chaos, excluded = churn.settings({})
        self.assertEqual((churn.DEFAULT_SEED, churn.DEFAULT_STEPS, False),
                         (seed, steps, chaos))
        self.assertEqual(set(churn.KNOWN_DEFECTS), excluded)

    def test_replay_names_what_differs(self):
        settings = churn.settings({'NOVA_CYBORG_CHURN_SEED': '7',
                                   'NOVA_CYBORG_CHURN_EXCLUDE': '',
                                   'NOVA_CYBORG_CHURN_CHAOS': '1'})
        self.assertEqual((7, churn.DEFAULT_STEPS, True, frozenset()),
                         settings)
        self.assertEqual(
            'NOVA_CYBORG_CHURN_SEED=7 NOVA_CYBORG_CHURN_STEPS=%d '
            'NOVA_CYBORG_CHURN_EXCLUDE= tox -e churn-chaos' %
            churn.DEFAULT_STEPS, churn.replay_command(*settings))
