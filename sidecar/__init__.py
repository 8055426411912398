"""nova-cyborg sidecar: the compute-host daemon that takes cyborg-agent's
place (device discovery, reporting to cyborg-conductor, programming)."""
