"""Who sees and who may change an image an account saved (``Image.owner``), as one rule.

Catalogue images (no owner) are everyone's, and are read through ``selectors.images_active``. A saved
image belongs to the account it was saved in. On a personal account only its owner sees it. On a
team's, the member who saved it and the team's admins see and change it; once it is ``shared``, every
member who sees the team's instances sees it too, and may launch from it (only its saver and the
admins rename, share or delete it). Anyone else, whatever their credential, gets a 404: the lookups
below are scoped to the asking person, so another account's image is never found.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from instances.models import Image
from teams.access import Access, membership_access
from teams.roles import Permission, membership_can


def images_saved_for(*, principal, membership, user) -> QuerySet[Image]:
    """The saved images ``user`` sees acting for ``principal`` (through ``membership`` on a team's
    account, None on their own), deleted ones left out, newest first."""
    qs = Image.objects.filter(owner_id=principal.pk).exclude(status=Image.Status.DELETED)
    if membership is not None:
        if not membership_can(membership, Permission.RESOURCES_VIEW):
            return qs.none()  # a billing viewer sees none of the team's resources
        if not membership_can(membership, Permission.RESOURCES_OPERATE_ANY):
            qs = qs.filter(Q(shared=True) | Q(created_by_id=user.pk))
    return qs.select_related("source_instance", "created_by").order_by("-created_at", "-pk")


def image_access(*, image: Image, membership, user) -> Access:
    """``user``'s access to a saved image already found through ``images_saved_for``."""
    if membership is None:
        return Access.OPERATE
    return membership_access(membership=membership, user_id=user.pk, created_by_id=image.created_by_id)


def image_launchable_for(*, slug: str, principal, membership, user) -> Image | None:
    """A READY saved image of ``slug`` the person may launch from in this context, or None."""
    return (
        images_saved_for(principal=principal, membership=membership, user=user)
        .filter(slug=slug, status=Image.Status.READY)
        .first()
    )
