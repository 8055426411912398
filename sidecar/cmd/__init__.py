"""The sidecar's console scripts: the daemon and its host CLI."""
