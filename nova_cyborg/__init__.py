"""nova-cyborg: accelerator-backed servers for OpenStack Nova.

The package runs inside Nova's own services once the patch series in
``patches/`` routes Nova's accelerator calls here. Nothing in it runs at
import time.
"""
