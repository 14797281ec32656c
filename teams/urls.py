from django.urls import path

from core.urls import slug_converter_except
from teams import views
from teams.services import RESERVED_SLUGS

slug_converter_except("team_slug", RESERVED_SLUGS)  # /teams/switch/ is a page, never a team

urlpatterns = [
    path("", views.teams_index, name="teams"),
    path("switch/", views.switch, name="team_switch"),
    path("invitations/<str:token>/", views.invitation, name="team_invitation"),
    path("<team_slug:slug>/", views.team_detail, name="team_detail"),
    path("<team_slug:slug>/audit/", views.team_audit, name="team_audit"),
    path("<team_slug:slug>/wallet/", views.team_wallet, name="team_wallet"),
    path("<team_slug:slug>/wallet/move/", views.team_wallet_move, name="team_wallet_move"),
    path("<team_slug:slug>/rename/", views.team_rename, name="team_rename"),
    path("<team_slug:slug>/delete/", views.team_delete, name="team_delete"),
    path("<team_slug:slug>/leave/", views.team_leave, name="team_leave"),
    path("<team_slug:slug>/invite/", views.team_invite, name="team_invite"),
    path(
        "<team_slug:slug>/invitations/<int:invitation_id>/revoke/",
        views.team_invitation_revoke,
        name="team_invitation_revoke",
    ),
    path("<team_slug:slug>/members/<int:member_id>/role/", views.team_member_role, name="team_member_role"),
    path("<team_slug:slug>/members/<int:member_id>/limits/", views.team_member_limits, name="team_member_limits"),
    path("<team_slug:slug>/members/<int:member_id>/remove/", views.team_member_remove, name="team_member_remove"),
]
