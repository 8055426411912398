"""Virt driver hooks of nova_cyborg."""
