"""Tests against a running local cloud (``python -m localcloud up --keep``).

``tox -e tempest`` runs them after tempest, on the cloud it started; each
module skips when no cloud runs under ``$NOVA_CYBORG_CLOUD_DIR``.
"""
