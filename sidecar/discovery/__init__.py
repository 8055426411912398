"""Discovery beyond the drivers: the merged inventory, device health, the
devices Nova manages itself and the devices libvirt domains use."""
