"""State kept on the host: the devices held out of scheduling and the
atomic state files under ``[sidecar] state_path``."""
