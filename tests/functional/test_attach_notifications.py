"""Versioned notifications of the accelerator actions' task states.

With ``[notifications] notify_on_state_change = vm_and_task_state`` and
versioned notifications, Nova sends ``instance.update`` for every task
state change. ``addAccelerator`` and ``removeAccelerator`` hold the task
states ``adding_accelerator`` and ``removing_accelerator`` (members of
Nova's ``InstanceTaskState`` through patch 0025): a consumer (Watcher,
Searchlight, a billing system) sees each transition of a user's server,
and the payload is one Nova's own schema accepts (before patch 0025
building it raised "Field value adding_accelerator is invalid" and
nothing was sent).

The harness's nova-api publishes its notifications on the real message
bus, not to the test's notifier (so does upstream's own ``os-stop``
here): the test reads what nova-compute sends, the updates while the
action holds its task state and the transition that ends it.
"""

# Nova picks its threading mode when the base is imported: first.
from tests.functional import attach_base  # noqa: I100

from nova_cyborg.model import actions


class AttachNotificationsTest(attach_base.AttachTestBase):

    def setUp(self):
        super().setUp()
        self.flags(notification_format='versioned',
                   notify_on_state_change='vm_and_task_state',
                   group='notifications')
        self.plain = self._create_flavor(name='plain')

    def task_transitions(self, server):
        """(old, new) task states of the server's instance.update
        notifications, in the order sent."""
        transitions = []
        for notification in self.notifier.versioned_notifications:
            if notification['event_type'] != 'instance.update':
                continue
            payload = notification['payload']['nova_object.data']
            if payload['uuid'] != server['id']:
                continue
            state = payload['state_update']['nova_object.data']
            transitions.append((state['old_task_state'],
                                state['new_task_state']))
        return transitions

    def test_every_transition_is_notified(self):
        with self.acting(self.owner_api):
            server = self.boot(self.plain)
        self.notifier.reset()
        self.accelerator_action(self.owner_api, server, 'addAccelerator',
                                self.dp)
        self.accelerator_action(self.owner_api, server, 'removeAccelerator',
                                self.dp)
        # The compute's clearing save notifies before the action's event
        # is recorded as a success.
        transitions = self.task_transitions(server)
        self.assertIn((actions.ADDING, actions.ADDING), transitions)
        self.assertIn((actions.REMOVING, actions.REMOVING), transitions)
        self.assertEqual([(actions.ADDING, None), (actions.REMOVING, None)],
                         [t for t in transitions if t[0] != t[1]])
        # In order: every update of the attach before the detach's.
        self.assertEqual(
            sorted(transitions, key=lambda t: actions.REMOVING in t),
            transitions)
