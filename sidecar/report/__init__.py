"""Reporting: Cyborg's wire objects, the reports to cyborg-conductor and
the Placement checks that keep this host's providers true."""
