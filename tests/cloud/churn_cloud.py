"""What the churn (tests/cloud/test_churn.py) asks the cloud, and its
accounts: the operator of project C, device profiles and flavors, a
server's ARQs under both its owners, the outcome of an instance action,
and what a finished run may not leave behind."""

import sys

from tests.cloud import base
from tests.cloud import churn

#: Instance actions with events (2.51); ``details`` of events (2.84).
ACTIONS_MICROVERSION = '2.84'
#: Migrations with their uuid and type.
MIGRATIONS_MICROVERSION = '2.59'


class ChurnCloudTest(base.CloudTestCase):

    @staticmethod
    def _print(text):
        sys.stderr.write(text + '\n')
        sys.stderr.flush()

    def _operator(self):
        """An admin of project C of its own (not the cloud's admin)."""
        keystone = self.admin.identity
        project = keystone.create_project(name=base._name('project-c'),
                                          domain_id='default')
        self.addCleanup(keystone.delete_project, project)
        user = keystone.create_user(
            name=base._name('operator'), domain_id='default',
            password=base.layout_mod.PASSWORD, default_project_id=project.id)
        self.addCleanup(keystone.delete_user, user)
        for role in ('member', 'admin'):
            keystone.assign_project_role_to_user(
                project, user, keystone.find_role(role, ignore_missing=False))
        return base.openstack.connect(
            auth_url=self.layout.auth_url, username=user.name,
            password=base.layout_mod.PASSWORD, project_name=project.name,
            user_domain_name='Default', project_domain_name='Default',
            region_name=base.layout_mod.REGION, identity_interface='public')

    def snapshot(self, server_id):
        """What a refused action must not change."""
        view = self.server(server_id)
        if view is None:
            return None
        return (view['status'], view['OS-EXT-SRV-ATTR:host'],
                view['OS-EXT-STS:task_state'],
                sorted((a['uuid'], a['state'], a['device_rp_uuid'])
                       for a in self.all_arqs(server_id)),
                churn.device_allocation(self.allocations(server_id)))

    def evacuation_ended(self, server_id):
        response = self.admin.compute.get(
            '/os-migrations', params={'instance_uuid': server_id,
                                      'migration_type': 'evacuation'},
            microversion=MIGRATIONS_MICROVERSION)
        self.assertEqual(200, response.status_code, response.text)
        migrations = response.json()['migrations']
        return migrations and migrations[0]['status'] in (
            'done', 'completed', 'failed', 'error')

    def errors(self, server_id, request_id):
        """The Error events of the instance action ``request_id``."""
        response = self.admin.compute.get(
            '/servers/%s/os-instance-actions/%s' % (server_id, request_id),
            microversion=ACTIONS_MICROVERSION)
        if response.status_code != 200:
            return []
        action = response.json()['instanceAction']
        return ['%s: %s %s' % (e['event'], e.get('details') or '',
                               action.get('message') or '')
                for e in action.get('events', [])
                if e.get('result') == 'Error']

    def leaks(self):
        """Once every server of the run is deleted: no ARQ of theirs, no
        device allocation without a Bound ARQ, no domain without a
        server, no mdev more than at the start."""
        problems = []
        ours = {o for s in self.deleted for o in churn.owners(s)}
        response = self.admin.accelerator.get('/accelerator_requests')
        self.assertEqual(200, response.status_code, response.text)
        arqs = response.json()['arqs']
        problems += ['ARQ %s (%s) of deleted server %s' % (
            a['uuid'], a['state'], a['instance_uuid'])
            for a in arqs if a.get('instance_uuid') in ours]
        per_provider = {}
        for arq in churn.bound(arqs):
            rp = arq['device_rp_uuid']
            per_provider[rp] = per_provider.get(rp, 0) + 1
        for host in self.layout.hosts:
            for rp, (name, _, inventories, _) in self.device_providers(
                    host).items():
                used = sum(self._placement(
                    '/resource_providers/%s/usages' % rp)['usages'].values())
                if used != per_provider.get(rp, 0):
                    problems.append(
                        'provider %s (%s) has %d allocated, Cyborg %d Bound '
                        'ARQs' % (name, rp, used, per_provider.get(rp, 0)))
        for server_id, (host, _) in churn.read_domains(
                self.layout.domain_xml_dir).items():
            if self.server(server_id) is None:
                problems.append('domain %s on %s has no server' % (
                    server_id, host))
        mdevs = churn.mdevs(self.sysfs_roots())
        if mdevs != self.mdevs_at_start:
            problems.append('mdevs %s, at the start %s' % (
                mdevs, self.mdevs_at_start))
        return problems
