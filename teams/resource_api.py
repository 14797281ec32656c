"""The one shape of an API viewset over an account's resources (volumes, deployments, instances) in the
acting context, so each resource app states only what differs: its selector and its messages.

- The list and every lookup are the acting principal's (``request_acting``): another account's object
  is a 404 by construction.
- A role that sees no resources (a billing viewer) is refused with a 403 and a message saying why.
- ``get_object(operate=True)`` is a 403 for a person who may only see the object (another member's),
  as ``teams.access.require_access`` decides.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils.translation import gettext_lazy
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, viewsets

from idempotency.decorators import IDEMPOTENCY_KEY_PARAMETER
from teams.access import request_acting, require_access, require_permission
from teams.roles import Permission


def resource_schema(*, tag: str, noun: str, nouns: str, create: dict, destroy: dict | None = None):
    """The OpenAPI of a ``TeamResourceViewSet``: list and retrieve named for the resource, create with
    the ``Idempotency-Key`` header (and ``create``'s summary, request and answers), destroy if allowed."""
    views = {
        "list": extend_schema(summary=f"List your {nouns}", tags=[tag]),
        "retrieve": extend_schema(summary=f"Get one {noun}", tags=[tag]),
        "create": extend_schema(tags=[tag], parameters=[IDEMPOTENCY_KEY_PARAMETER], **create),
    }
    if destroy is not None:
        views["destroy"] = extend_schema(tags=[tag], **destroy)
    return extend_schema_view(**views)


class TeamResourceViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    # List, retrieve and create an account's resources of one kind (a subclass adds what else it allows).
    # (A comment, not a docstring: drf-spectacular would print a docstring into every operation.)

    lookup_value_converter = "uuid"
    #: The 403 for a role that sees none of the team's resources.
    view_refused = gettext_lazy("Your role in this team does not show its resources.")
    #: The 403 for a change asked by a person who may only see the object.
    change_refused = ""

    def resources_for(self, principal) -> QuerySet:
        """The principal's objects of this kind (the app's selector)."""
        raise NotImplementedError

    def view_required(self) -> None:
        """Refuse a role that sees no resources (the 403)."""
        require_permission(self.request, Permission.RESOURCES_VIEW, str(self.view_refused))

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user
            return self.get_serializer_class().Meta.model.objects.none()
        self.view_required()
        return self.resources_for(request_acting(self.request)[0])

    def get_object(self, *, operate: bool = False):
        """The object (404 for another account's, or for a role that sees no resources); 403 when
        ``operate`` is asked of a person who may only see it."""
        found = super().get_object()
        require_access(
            self.request,
            owner_id=found.owner_id,
            created_by_id=found.created_by_id,
            operate=operate,
            message=str(self.change_refused),
        )
        return found
