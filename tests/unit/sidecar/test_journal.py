import os

import fixtures
import testtools

from sidecar import journal


class JournalTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.path = self.useFixture(fixtures.TempDir()).path

    def test_persists(self):
        j = journal.Journal(self.path)
        j.jobs.put('a', {'x': 1})
        again = journal.Journal(self.path)
        self.assertEqual({'x': 1}, again.jobs.get('a'))
        self.assertEqual({'x': 1}, again.jobs.pop('a'))
        self.assertIsNone(journal.Journal(self.path).jobs.get('a'))

    def test_corrupt_file_is_ignored(self):
        with open(os.path.join(self.path, 'programming.json'), 'w') as f:
            f.write('{not json')
        log = self.useFixture(fixtures.FakeLogger())
        self.assertEqual([], journal.Journal(self.path).jobs.items())
        self.assertIn('unreadable state file', log.output)

    def test_no_temporary_files_left(self):
        j = journal.Journal(self.path)
        for i in range(5):
            j.jobs.put(str(i), i)
        self.assertEqual(['programming.json'], sorted(os.listdir(self.path)))

    def test_old_leases_are_removed(self):
        # Timed leases of earlier releases promise nothing any more.
        with open(os.path.join(self.path, 'leases.json'), 'w') as f:
            f.write('{"0000:81:00.0": {"trait": "X", "expires": 1e12}}')
        j = journal.Journal(self.path)
        self.assertFalse(hasattr(j, 'leases'))
        self.assertEqual([], os.listdir(self.path))
