"""The one Cyborg v2 client of nova-cyborg.

It keeps the method names and return shapes of Nova's own
``nova.accelerator.cyborg._CyborgClient`` so that every Nova call site
(conductor, compute manager, compute utils, API) works unchanged once
``nova.accelerator.cyborg.get_client`` is routed here, and it differs in
what matters:

* every failure raises an exception that names the operation, the HTTP
  status and Cyborg's own message; nothing is swallowed or logged twice;
* a server's ARQs belong to the server's project, whoever acts (Cyborg 17
  takes the caller's): binding for a server of another project is done as
  the ``[service_user]`` with the server's ``project_id`` (API 2.1), and
  reads, unbinding and deletions as the ``[service_user]``, who sees every
  project's ARQs (see :mod:`nova_cyborg.clients.cyborg_auth` for who calls, and
  the service token: binding, unbinding and deleting an instance's ARQs
  require it; deleting never-bound ARQs by UUID does not, so that a boot
  refused for want of it still leaves nothing behind);
* deleting by UUID tolerates ARQs that are already gone, so cleanup is
  idempotent;
* ``get_arqs_for_instance`` returns an empty list for an instance that has
  none instead of raising, so cleanup paths never fail on it;
* only calls that may safely be repeated are retried (see
  :data:`RETRIED_METHODS`).

The HTTP side (session, auth, retries, errors) is
:mod:`nova_cyborg.clients.cyborg_http`.
"""

from oslo_log import log as logging

import nova.conf

from nova_cyborg.clients import cyborg_auth as client_auth
from nova_cyborg.clients import cyborg_http
from nova_cyborg.clients.cyborg_http import DEFAULT_RETRIES  # noqa: F401
from nova_cyborg.clients.cyborg_http import RETRIED_METHODS  # noqa: F401
from nova_cyborg import exception
from nova_cyborg.i18n import _
from nova_cyborg.model import bookkeeping
from nova_cyborg.model import request_groups

LOG = logging.getLogger(__name__)
CONF = nova.conf.CONF

DEVICE_PROFILE_URL = '/device_profiles'
ARQ_URL = '/accelerator_requests'

#: Cyborg's API microversion from which an admin may set an ARQ's
#: ``project_id`` when binding it; sent only with such a bind. Cyborg 17
#: reads the API-WG form (``accelerator 2.1``); Cyborg 16 reads only the
#: bare version, takes the API-WG form for 2.0 and answers 406 to
#: ``/project_id``: then the bind is sent again with the bare version,
#: which this process keeps using (Cyborg 17 accepts it too, with a
#: deprecation warning in its log).
PROJECT_ID_VERSION = {'OpenStack-API-Version': 'accelerator 2.1'}
PROJECT_ID_VERSION_BARE = {'OpenStack-API-Version': '2.1'}
_version_header = [PROJECT_ID_VERSION]

#: ARQ states in which Cyborg has finished binding, one way or the other.
RESOLVED_STATES = frozenset(('Bound', 'BindFailed', 'Deleting'))


def _in_service_project():
    """Whether ARQs are made in the service user's project
    (``[nova_cyborg] arq_project``)."""
    return CONF.nova_cyborg.arq_project == 'service'


def get_client(context, instance=None):
    """A client calling Cyborg for ``context``.

    :param instance: the server whose ARQs the client binds: they are bound
        in its project (see :meth:`CyborgClient.bind_arqs`).
    """
    project_id = None
    # Nova loads every instance with its project; an instance made without
    # one binds in the caller's project.
    if instance is not None and instance.obj_attr_is_set('project_id'):
        project_id = instance.project_id
    return CyborgClient(context, project_id=project_id)


def get_device_profile_request_groups(context, dp_name, owner=None):
    """Fetch the device profile from Cyborg; return its request groups.

    :param owner: the suffix of the requester IDs (a port's UUID), or None.
    :returns: list of nova.objects.RequestGroup, validated
        (nova_cyborg.model.request_groups.build_request_groups).
    :raises: DeviceProfileError, CyborgError
    """
    groups = get_client(context).get_device_profile_groups(dp_name)
    return request_groups.build_request_groups(groups, owner,
                                               dp_name=dp_name)


class CyborgClient(cyborg_http.CyborgHTTPClient):
    """Cyborg v2 REST client bound to one request context."""

    # Device profiles

    def get_device_profile_groups(self, dp_name):
        """Return the request groups of the device profile named dp_name.

        :raises: DeviceProfileError if the profile is missing or ambiguous,
            or Cyborg cannot be asked.
        """
        try:
            resp = self._call(_('get'), 'get', DEVICE_PROFILE_URL, (200,),
                              params={'name': dp_name})
            profiles = self._json_list(_('get'), resp, 'device_profiles')
        except exception.CyborgError as e:
            raise exception.DeviceProfileError(name=dp_name,
                                               msg=e.format_message())
        # Cyborg filters by name, but never trust that it did.
        profiles = [p for p in profiles
                    if isinstance(p, dict) and p.get('name') == dp_name]
        if not profiles:
            raise exception.DeviceProfileError(
                name=dp_name, msg=_('no such device profile in Cyborg'))
        if len(profiles) > 1:
            raise exception.DeviceProfileError(name=dp_name, msg=_(
                'Cyborg has %d device profiles with this name') %
                len(profiles))
        return profiles[0].get('groups')

    def get_device_request_groups(self, dp_groups, owner):
        return request_groups.build_request_groups(dp_groups, owner)

    # ARQ creation and binding

    def create_arqs(self, dp_name):
        """Create the ARQs of one device profile; return them.

        In the caller's project, or with ``[nova_cyborg] arq_project =
        service`` as the service user, in its project.
        """
        LOG.info('Creating ARQs for device profile %s', dp_name)
        resp = self._call(_('create'), 'post', ARQ_URL, (200, 201),
                          json={'device_profile_name': dp_name},
                          as_service=_in_service_project())
        arqs = self._json_list(_('create'), resp, 'arqs')
        if not arqs:
            raise exception.CyborgError(op=_('create'), msg=_(
                'Cyborg created no accelerator request for device profile '
                '%s') % dp_name)
        return arqs

    def get_arq_device_rp_uuid(self, arq, rg_rp_map, owner):
        """Return the provider the scheduler allocated for the ARQ's group."""
        group_id = arq.get('device_profile_group_id')
        requester_id = request_groups.requester_id(group_id, owner)
        providers = (rg_rp_map or {}).get(requester_id)
        if not providers or len(providers) != 1:
            raise exception.ProviderMappingError(
                group=requester_id, name=arq.get('device_profile_name'))
        return providers[0]

    def _bind_call(self, patch, kwargs):
        try:
            return self._call(_('bind'), 'patch', ARQ_URL, (200, 202),
                              json=patch, **kwargs)
        except exception.CyborgError as e:
            if (e.status != 406 or
                    kwargs.get('headers') is not PROJECT_ID_VERSION):
                raise
            LOG.info('Cyborg refused API version %(std)s for the bind (%(e)s);'
                     ' sending the bare version %(bare)s, as Cyborg 16 '
                     'reads it', {
                         'std': PROJECT_ID_VERSION['OpenStack-API-Version'],
                         'bare': PROJECT_ID_VERSION_BARE[
                             'OpenStack-API-Version'], 'e': e})
            _version_header[0] = PROJECT_ID_VERSION_BARE
            return self._call(_('bind'), 'patch', ARQ_URL, (200, 202),
                              json=patch, **dict(
                                  kwargs, headers=PROJECT_ID_VERSION_BARE))

    def bind_arqs(self, bindings, project_id=None):
        """Ask Cyborg to bind ARQs; binding completes asynchronously.

        :param bindings: {arq_uuid: {"hostname", "device_rp_uuid",
            "instance_uuid"}}
        :param project_id: the instance's project (by default the one the
            client was made for). The ARQs are bound in it: if the
            context's project is another (an admin acting on a user's
            server), as the service user, with ``/project_id`` at Cyborg's
            API 2.1; Cyborg would otherwise put them in the caller's
            project, where the server's owner never sees them. With
            ``[nova_cyborg] arq_project = service``, as the service user,
            in its own project, whoever acts.
        :raises: AcceleratorRequestBindingFailed listing every ARQ.
        """
        project_id = project_id or self._project_id
        other_project = (project_id is not None and
                         project_id != self._context.project_id and
                         not _in_service_project())
        if other_project:
            bindings = {arq_uuid: dict(binding, project_id=project_id)
                        for arq_uuid, binding in bindings.items()}
        patch = {
            arq_uuid: [{'path': '/' + field, 'op': 'add', 'value': value}
                       for field, value in sorted(binding.items())]
            for arq_uuid, binding in bindings.items()}
        kwargs = {}
        if other_project:
            kwargs = {'as_service': True, 'headers': _version_header[0]}
        elif _in_service_project():
            # Bound where they were created, the service user's project.
            kwargs = {'as_service': True}
        LOG.info('Binding ARQs %s', ','.join(sorted(bindings)))
        try:
            client_auth.require_service_token(_('bind'))
            self._bind_call(patch, kwargs)
        except exception.CyborgError as e:
            if e.status != 400 or not self._bound_as_asked(bindings):
                raise exception.AcceleratorRequestBindingFailed(
                    arqs=list(bindings), msg=e.kwargs['msg'])
            # A bind without programming completes inside Cyborg's PATCH,
            # which then sends Nova the bind event and answers 400 when
            # Nova refuses it: 404 for a UUID Nova does not know (a live
            # migration's alias), 500 for a server not yet mapped to its
            # cell (nova_cyborg.flows.boot.early_arqs). The ARQs are bound all
            # the same, and whoever waits for the event reads them.
            LOG.warning('Cyborg answered %(status)s to the bind of ARQs '
                        '%(arqs)s, yet they are Bound as asked: %(err)s',
                        {'status': e.status, 'arqs': ','.join(sorted(
                            bindings)), 'err': e.kwargs['msg']})

    def _bound_as_asked(self, bindings):
        """Whether every ARQ of ``bindings`` is Bound to the host, device
        provider and instance asked (read back as the service user)."""
        found = {}
        try:
            for owner in {b['instance_uuid'] for b in bindings.values()}:
                found.update((arq.get('uuid'), arq) for arq in
                             self.get_arqs_for_instance(owner))
        except Exception as e:  # noqa: B902 (the bind's error is raised)
            LOG.warning('Could not read back ARQs %(arqs)s: %(err)s',
                        {'arqs': ','.join(sorted(bindings)), 'err': e})
            return False
        for arq_uuid, binding in bindings.items():
            arq = found.get(arq_uuid) or {}
            if arq.get('state') != 'Bound' or any(
                    arq.get(field) != binding[field] for field in
                    ('hostname', 'device_rp_uuid', 'instance_uuid')):
                return False
        return True

    def unbind_arqs(self, arq_uuids):
        """Unbind ARQs, keeping them; Cyborg frees their attach handles.

        Used to park the ARQs of a resize's source host (see
        nova_cyborg.flows.move.resize); they can be bound again later.

        :raises: CyborgError
        """
        if not arq_uuids:
            return
        patch = {arq_uuid: [{'path': '/' + field, 'op': 'remove'}
                            for field in ('device_rp_uuid', 'hostname',
                                          'instance_uuid')]
                 for arq_uuid in arq_uuids}
        LOG.info('Unbinding ARQs %s', ','.join(sorted(arq_uuids)))
        client_auth.require_service_token(_('unbind'))
        self._call(_('unbind'), 'patch', ARQ_URL, (200, 202), json=patch,
                   as_service=True)

    # Queries: as the service user, who sees the ARQs of every project.

    def get_arqs_for_instance(self, instance_uuid, only_resolved=False):
        """Return the instance's ARQs (only resolved ones if asked).

        An instance without ARQs gets an empty list.
        """
        resp = self._call(_('get'), 'get', ARQ_URL, (200,), as_service=True,
                          params={'instance': instance_uuid})
        arqs = self._json_list(_('get'), resp, 'arqs')
        if only_resolved:
            arqs = [arq for arq in arqs if arq.get('state') in RESOLVED_STATES]
        return arqs

    def list_arqs(self):
        """Every ARQ of every project."""
        resp = self._call(_('get'), 'get', ARQ_URL, (200,), as_service=True)
        return self._json_list(_('get'), resp, 'arqs')

    def get_arq_uuids_for_instance(self, instance):
        # Under the UUID that holds them now: the server's own, or its
        # alias after a live migration (nova_cyborg.model.bookkeeping).
        return [arq['uuid'] for arq in self.get_arqs_for_instance(
            bookkeeping.arq_owner(instance))]

    # Deletion: as the service user, so that the ARQs of every project go.

    def delete_arqs_for_instance(self, instance_uuid, owners=None):
        """Unbind and delete every ARQ of the instance (idempotent).

        :param owners: the UUIDs its ARQs may be bound under, where the
            caller knows them from the server's system metadata
            (:func:`nova_cyborg.model.bookkeeping.holders`: one call for a
            server that never live-migrated). By default both its UUID and its
            alias (:func:`nova_cyborg.model.bookkeeping.owners`): a live
            migration binds the destination's ARQs under the owner that
            holds none, and every caller (upstream's included) that
            deletes a server's ARQs by its UUID alone means all of them.
        """
        client_auth.require_service_token(_('delete'))
        for owner in owners or bookkeeping.owners(instance_uuid):
            self._call(_('delete'), 'delete', ARQ_URL, (204,),
                       as_service=True, params={'instance': owner})

    def delete_arqs_by_uuid(self, arq_uuids):
        """Delete the given ARQs, tolerating those already gone.

        Used on failure paths before the ARQs were bound to an instance,
        so no service token is required (Cyborg asks for one only to
        delete a bound ARQ; one is sent if configured). Cyborg answers 404
        for the whole call if one ARQ is missing; the others are deleted
        one by one then, so none is left behind. Failures are logged, not
        raised: cleanup must not mask the error that caused it.

        :returns: the UUIDs that could not be deleted.
        """
        arq_uuids = [u for u in (arq_uuids or []) if u]
        if not arq_uuids:
            return []
        try:
            self._call(_('delete'), 'delete', ARQ_URL, (204,),
                       as_service=True,
                       params={'arqs': ','.join(arq_uuids)})
            return []
        except exception.CyborgError as e:
            if len(arq_uuids) == 1 and e.status == 404:
                return []
            LOG.info('Deleting ARQs %s together failed (%s); deleting them '
                     'one by one', ','.join(arq_uuids), e)
        failed = []
        for arq_uuid in arq_uuids:
            try:
                self._call(_('delete'), 'delete', ARQ_URL, (204, 404),
                           as_service=True, params={'arqs': arq_uuid})
            except exception.CyborgError as e:
                LOG.error('Failed to delete ARQ %s: %s', arq_uuid, e)
                failed.append(arq_uuid)
        return failed

    def delete_arqs_strictly(self, arq_uuids):
        """Delete the given bound ARQs; those already gone count as deleted.

        Unlike :meth:`delete_arqs_by_uuid`, for ARQs that an instance no
        longer uses (the source's after a confirmed move): the caller keeps
        track of them until this succeeds.

        :raises: CyborgError if one could not be deleted.
        """
        arq_uuids = [u for u in (arq_uuids or []) if u]
        if not arq_uuids:
            return
        client_auth.require_service_token(_('delete'))
        try:
            self._call(_('delete'), 'delete', ARQ_URL, (204,),
                       as_service=True,
                       params={'arqs': ','.join(arq_uuids)})
            return
        except exception.CyborgError as e:
            if e.status != 404:
                raise
        for arq_uuid in arq_uuids:
            self._call(_('delete'), 'delete', ARQ_URL, (204, 404),
                       as_service=True, params={'arqs': arq_uuid})
