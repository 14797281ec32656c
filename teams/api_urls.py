from django.urls import path
from rest_framework.routers import SimpleRouter

from teams import api

router = SimpleRouter()
router.register("", api.TeamViewSet, basename="api-team")

_SLUG = "<slug:slug>"
members = api.MemberViewSet.as_view({"get": "list"})
member = api.MemberViewSet.as_view({"patch": "partial_update", "delete": "destroy"})
invitations = api.InvitationViewSet.as_view({"get": "list", "post": "create"})
invitation_revoke = api.InvitationViewSet.as_view({"post": "revoke"})
events = api.TeamEventViewSet.as_view({"get": "list"})

urlpatterns = [
    path(f"{_SLUG}/members/", members, name="api-team-members"),
    path(f"{_SLUG}/members/<int:pk>/", member, name="api-team-member"),
    path(f"{_SLUG}/invitations/", invitations, name="api-team-invitations"),
    path(f"{_SLUG}/invitations/<int:pk>/revoke/", invitation_revoke, name="api-team-invitation-revoke"),
    path(f"{_SLUG}/audit/", events, name="api-team-audit"),
    path(f"{_SLUG}/wallet/", api.TeamWalletView.as_view(), name="api-team-wallet"),
    path(f"{_SLUG}/wallet/transfers/", api.TeamMoneyMoveView.as_view(), name="api-team-wallet-transfers"),
    *router.urls,
]
