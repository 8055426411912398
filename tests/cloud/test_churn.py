"""A randomized churn of server operations by three identities (issue 26).

A member of project A (the owner), a member of project B (another
tenant) and an admin of project C (the operator) work on the cloud for a
bounded number of steps drawn from a seed: boot (flavors with an FPGA or
a live-migratable VF profile, and plain ones), delete, stop/start,
pause/unpause, suspend/resume, rescue/unrescue, shelve/unshelve, resize
with confirm or revert, and, by the operator on anyone's server, cold
and live migration and evacuation (the host stopped, then started
again); addAccelerator and removeAccelerator. Each step picks an action
for a server in its current state; a clean 400 or 409 refusal is a valid
outcome if nothing changed. After every step (:mod:`tests.cloud.churn`):
no device is in two domains of a host, each server's ``<hostdev>`` are
its Bound ARQs' devices and its allocation holds exactly those; at the
end, once everything is deleted, nothing is left.

``NOVA_CYBORG_CHURN_SEED`` and ``NOVA_CYBORG_CHURN_STEPS`` choose the run
(CI: :data:`churn.DEFAULT_SEED`, :data:`churn.DEFAULT_STEPS`); the seed is
printed first and a failure gives the command that replays it.
``NOVA_CYBORG_CHURN_CHAOS=1`` (``tox -e churn-chaos``) kills one service
with SIGKILL during some steps and starts it again (:mod:`churn_chaos`).
"""

import random

from tests.cloud import base
from tests.cloud import churn
from tests.cloud import churn_cloud
from tests.cloud import churn_chaos

#: Seconds the per-server invariants may take to settle after a step
#: (a migration's source cleans up after the server is ACTIVE again).
CONVERGE = 120


class Server:
    def __init__(self, server_id, user, flavor):
        self.id, self.user, self.flavor = server_id, user, flavor
        self.before = None          # the status before a resize
        self.pending = None         # the flavor of a resize to confirm
        self.attached = []          # profiles added with addAccelerator
        self.profile = None         # of the attach or detach under way


class ChurnTest(churn_cloud.ChurnCloudTest):

    def setUp(self):
        super().setUp()
        if self.layout.computes < 2:
            self.skipTest('the churn moves servers between two hosts')
        self.seed, self.steps, self.chaos, self.excluded = churn.settings()
        self.rng = random.Random(self.seed)
        self.log = churn.StepLog(self.seed, self.steps, self.chaos,
                                 self.excluded, out=self._print)
        self.users = {'A': self.owner, 'B': self._owner(),
                      'C': self._operator()}
        fpga = self._profile_of(base.PROFILE_GROUPS)
        vf = self._profile_of([{'resources:CUSTOM_MIGRATABLE_VF': '1'}])
        self.profiles = [fpga, vf]
        self.resource_class = {fpga: 'FPGA', vf: 'CUSTOM_MIGRATABLE_VF'}
        self.flavors = {'plain': self.create_flavor(None, 256),
                        'plain-large': self.create_flavor(None, 512),
                        'fpga': self.create_flavor(fpga, 512),
                        'vf': self.create_flavor(vf, 256)}
        self.servers = {}           # id: Server, in creation order
        self.chaos_monkey = (churn_chaos.Chaos(self.layout, self.rng,
                                               self.log)
                             if self.chaos else None)
        self.mdevs_at_start = churn.mdevs(self.sysfs_roots())
        self.deleted = []
        self.addCleanup(self._delete_all_quietly)

    def flavor_profile(self, flavor):
        return {'fpga': self.profiles[0], 'vf': self.profiles[1]}.get(flavor)

    # -- what the cloud shows ------------------------------------------------

    def problems(self):
        """Every broken invariant now: (double assignments, the rest)."""
        domains = churn.read_domains(self.layout.domain_xml_dir)
        doubles = churn.double_assignments(domains)
        others = []
        for server in list(self.servers.values()):
            view = self.server(server.id)
            if view is None:
                others.append('server %s vanished' % server.id)
                continue
            others += churn.server_problems(
                view, domains.get(server.id), self.all_arqs(server.id),
                self.allocations(server.id), self.resource_class)
        for server_id in self.deleted:
            others += churn.gone_problems(
                server_id, domains, self.all_arqs(server_id),
                self.allocations(server_id))
        return doubles, others

    def check(self):
        """After every step: a device in two guests fails at once; the
        rest must hold once the step's cleanups have run."""
        found = {}

        def holds():
            doubles, others = self.problems()
            if doubles:
                self.fail(self.log.failure(doubles))
            found['last'] = others
            return not others
        try:
            base.wait_until(holds, 'invariants', timeout=CONVERGE)
        except AssertionError:
            self.fail(self.log.failure(found['last']))

    # -- the run ---------------------------------------------------------

    def test_churn(self):
        counts = {}
        for step in range(1, self.steps + 1):
            self.log.step = step
            if self.chaos_monkey:
                self.chaos_monkey.struck = False
            server, action = self.choose()
            outcome = self.run_step(server, action)
            counts[outcome] = counts.get(outcome, 0) + 1
            self.check()
        self.log.step = self.steps + 1
        self.log('end: deleting %d servers (outcomes %s)' % (
            len(self.servers), counts))
        for server in list(self.servers.values()):
            if ('delete_suspended' in self.excluded and
                    self.server(server.id)['status'] == 'SUSPENDED'):
                self.run_step(server, 'resume')
            self.delete_server(server)
        self.check()
        leaks = self.leaks()
        if leaks:
            self.fail(self.log.failure(leaks))

    def choose(self):
        """A (server, action) for the servers' states now, or (None,
        'boot'); only the seed and the observed states decide."""
        servers = [(server, self.server(server.id)['status'],
                    server.attached)
                   for server in self.servers.values()]
        found, weights = churn.choices(
            servers, self.excluded,
            can_boot=len(self.servers) < churn.MAX_SERVERS)
        return self.rng.choices(found, weights)[0]

    def run_step(self, server, action):
        if action == 'boot':
            return self.boot_one()
        if action in ('delete', 'delete_suspended'):
            self.log('%s deletes %s' % (server.user, server.id))
            self.delete_server(server, chaos=True)
            return 'deleted'
        if action == 'evacuate':
            return self.evacuate(server)
        body, expected = self.request(server, action)
        who = churn.ACTIONS[action][0]
        conn = self.users['C' if who == 'operator' else server.user]
        before = self.snapshot(server.id)
        self.log('%s: %s %s %s (%s %s on %s)' % (
            'C' if who == 'operator' else server.user, action, server.id,
            server.pending if action == 'resize' else body, server.flavor,
            before[0], before[1]))
        response = self._compute(conn, 'post', '/servers/%s/action' %
                                 server.id, json=body)
        if response.status_code in (400, 409):
            self.log('  refused %d: %s' % (response.status_code,
                                           response.text[:300]))
            self.assertEqual(before, self.snapshot(server.id),
                             self.log.failure(['a refused %s changed the '
                                               'server' % action]))
            return 'refused'
        self.assertIn(response.status_code, (200, 202, 204),
                      self.log.failure(['%s answered %d: %s' % (
                          action, response.status_code, response.text)]))
        if self.chaos_monkey:
            self.chaos_monkey.strike()
        view = self.settle(server.id, action)
        return self.judge(server, action, before, view, expected,
                          response.headers.get('x-openstack-request-id'))

    def request(self, server, action):
        """The action's body, and the status expected after it."""
        status = self.server(server.id)['status']
        expected = churn.ACTIONS[action][3] or status
        if action in ('confirm', 'revert'):
            expected = server.before
        others = sorted(set(self.flavors) - {server.flavor})
        body, flavor = churn.body(action, self.rng, others, self.profiles,
                                  server.attached)
        if action.startswith(('attach', 'detach')):
            server.profile = body[next(iter(body))]['device_profile']
        if action in ('resize', 'migrate'):
            server.pending = flavor or server.flavor
            if flavor:
                body['resize']['flavorRef'] = self.flavors[flavor]
        return body, expected

    def settle(self, server_id, action):
        """Wait until the server has no task and is out of BUILD (and out
        of VERIFY_RESIZE after a confirm, which sets no task)."""
        def settled():
            view = self.server(server_id)
            if view is None:
                return {'status': 'DELETED'}
            if view['OS-EXT-STS:task_state'] or view['status'] == 'BUILD':
                return None
            if action == 'confirm' and view['status'] == 'VERIFY_RESIZE':
                return None
            if action == 'evacuate' and not self.evacuation_ended(server_id):
                # Nova clears the task state before it moves the server
                # to its new host (ResourceTracker.finish_evacuation).
                return None
            return view
        return self.wait(settled, 'server %s to settle after %s' % (
            server_id, action))

    def wait(self, predicate, what):
        """base.wait_until, failing with the step log."""
        try:
            return base.wait_until(predicate, what)
        except AssertionError as exc:
            self.fail(self.log.failure([str(exc)]))

    def judge(self, server, action, before, view, expected, request_id):
        """Success, a lack of room that changed nothing, or a failure."""
        errors = self.errors(server.id, request_id)
        status = view['status']
        host = view.get('OS-EXT-SRV-ATTR:host')
        self.log('  -> %s on %s%s' % (status, host, ''.join(
            '\n  error event %s' % e for e in errors)))
        if action in ('resize', 'migrate') and status == 'VERIFY_RESIZE':
            server.before = before[0]
        if action == 'confirm' and status != 'VERIFY_RESIZE':
            server.flavor = server.pending
        if status == expected and not errors:
            if action.startswith('attach'):
                server.attached.append(server.profile)
            elif action.startswith('detach'):
                server.attached.remove(server.profile)
            if action == 'live_migrate' and host == before[1]:
                self.fail(self.log.failure(['live migration of %s stayed '
                                            'on %s' % (server.id, host)]))
            return 'done'
        if (errors and all(any(n in e for n in churn.NO_ROOM) for e in errors)
                and status == before[0] and host == before[1]):
            self.log('  no room: nothing changed')
            return 'no room'
        if self.chaos_monkey and self.chaos_monkey.struck:
            # Rolled back, or ERROR, under a killed service: accepted;
            # the invariants decide.
            self.log('  under chaos: %s, fault %s' % (
                status, view.get('fault')))
            return 'chaos: %s' % status
        self.fail(self.log.failure([
            '%s of %s ended %s on %s, expected %s%s; fault %s' % (
                action, server.id, status, host, expected,
                ''.join('; ' + e for e in errors), view.get('fault'))]))

    # -- steps that are not one server action -------------------------------

    def boot_one(self):
        user = self.rng.choice(sorted(self.users))
        flavor = self.rng.choice(sorted(self.flavors))
        self.log('%s boots a %s server' % (user, flavor))
        response = self._compute(self.users[user], 'post', '/servers', json={
            'server': {'name': base._name('churn'),
                       'imageRef': self.image_id(),
                       'flavorRef': self.flavors[flavor],
                       'networks': 'none'}})
        self.assertEqual(202, response.status_code, self.log.failure([
            'boot answered %d: %s' % (response.status_code,
                                      response.text)]))
        server = Server(response.json()['server']['id'], user, flavor)
        self.servers[server.id] = server
        if self.chaos_monkey:
            self.chaos_monkey.strike()
        view = self.settle(server.id, 'boot')
        self.log('  -> %s %s on %s' % (server.id, view['status'],
                                       view.get('OS-EXT-SRV-ATTR:host')))
        if view['status'] == 'ACTIVE':
            return 'done'
        fault = str(view.get('fault'))
        if view['status'] == 'ERROR' and (
                any(n in fault for n in churn.NO_ROOM) or (
                    self.chaos_monkey and self.chaos_monkey.struck)):
            # Documented (doc/source/faults.rst): ERROR, no ARQ, no
            # allocation; checked, then deleted to make room.
            self.log('  ERROR: %s' % fault[:300])
            self.check()
            self.delete_server(server)
            return 'no room' if 'alid host' in fault else 'error (chaos)'
        self.fail(self.log.failure(['boot of %s ended %s: %s' % (
            server.id, view['status'], fault)]))

    def delete_server(self, server, chaos=False):
        response = self._compute(self.users[server.user], 'delete',
                                 '/servers/%s' % server.id)
        self.assertEqual(204, response.status_code, self.log.failure([
            'delete of %s answered %d: %s' % (
                server.id, response.status_code, response.text)]))
        if chaos and self.chaos_monkey:
            self.chaos_monkey.strike()
        self.wait(lambda: self.server(server.id) is None,
                  'server %s deleted' % server.id)
        del self.servers[server.id]
        self.deleted.append(server.id)

    def evacuate(self, server):
        """The operator stops the server's host (forced down), evacuates
        the server, and starts the host again."""
        before = self.snapshot(server.id)
        host = before[1]
        self.log('C: evacuate %s (%s %s on %s): host stop %s' % (
            server.id, server.flavor, before[0], host, host))
        self.stop_host(host)
        response = self._compute(self.users['C'], 'post',
                                 '/servers/%s/action' % server.id,
                                 json={'evacuate': {}})
        request_id = response.headers.get('x-openstack-request-id')
        if response.status_code in (200, 202):
            view = self.settle(server.id, 'evacuate')
        else:
            self.log('  refused %d: %s' % (response.status_code,
                                           response.text[:300]))
        self.log('  host start %s' % host)
        self.start_host(host)
        if response.status_code not in (200, 202):
            self.assertIn(response.status_code, (400, 409), response.text)
            self.assertEqual(before, self.snapshot(server.id),
                             self.log.failure(['a refused evacuation '
                                               'changed the server']))
            return 'refused'
        outcome = self.judge(server, 'evacuate', before, view, before[0],
                             request_id)
        if outcome == 'done' and view['OS-EXT-SRV-ATTR:host'] == host:
            self.fail(self.log.failure(['evacuation of %s stayed on %s' % (
                server.id, host)]))
        return outcome

    def _delete_all_quietly(self):
        """At cleanup (a failed run): the servers go before the flavors,
        profiles and accounts."""
        for server_id in list(self.servers):
            view = self.server(server_id)
            if view and view['status'] == 'SUSPENDED':    # fakelibvirt
                self._compute(self.admin, 'post', '/servers/%s/action' %
                              server_id, json={'resume': None})
                self.settle(server_id, 'resume')
            self._compute(self.admin, 'delete', '/servers/%s' % server_id)
        for server_id in list(self.servers):
            base.wait_until(lambda: self.server(server_id) is None,
                            'server %s deleted' % server_id)
