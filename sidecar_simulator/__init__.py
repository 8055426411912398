"""Simulated compute hosts (a sysfs tree and libvirt node device XML) for
tests, benchmarks and the local cloud. Test tooling: the sidecar daemon
never imports it."""
