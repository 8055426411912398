"""Discovery drivers, loaded with stevedore from the
``nova_cyborg.sidecar.drivers`` entry point namespace."""
