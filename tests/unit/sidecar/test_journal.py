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

    def test_corrupt_file_is_quarantined(self):
        # Kept for the operator under another name, with an ERROR; the
        # sidecar starts without it (its reconciler gives back what a
        # lost job left reserved).
        with open(os.path.join(self.path, 'programming.json'), 'w') as f:
            f.write('{not json')
        log = self.useFixture(fixtures.FakeLogger())
        j = journal.Journal(self.path)
        self.assertEqual([], j.jobs.items())
        self.assertIn('programming.json is corrupt', log.output)
        (kept,) = [n for n in os.listdir(self.path)
                   if n.startswith('programming.json.corrupt-')]
        with open(os.path.join(self.path, kept)) as f:
            self.assertEqual('{not json', f.read())
        # The journal works on.
        j.jobs.put('a', {'x': 1})
        self.assertEqual({'x': 1}, journal.Journal(self.path).jobs.get('a'))

    def test_not_an_object_is_quarantined(self):
        with open(os.path.join(self.path, 'programming.json'), 'w') as f:
            f.write('[1, 2]')
        self.assertEqual([], journal.Journal(self.path).jobs.items())
        self.assertEqual(1, len([n for n in os.listdir(self.path) if
                                 n.startswith('programming.json.corrupt-')]))

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
