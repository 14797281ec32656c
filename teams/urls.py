from django.urls import path

from teams import views

urlpatterns = [
    path("", views.teams_index, name="teams"),
    path("switch/", views.switch, name="team_switch"),
    path("invitations/<str:token>/", views.invitation, name="team_invitation"),
    path("<slug:slug>/", views.team_detail, name="team_detail"),
    path("<slug:slug>/audit/", views.team_audit, name="team_audit"),
    path("<slug:slug>/wallet/", views.team_wallet, name="team_wallet"),
    path("<slug:slug>/wallet/move/", views.team_wallet_move, name="team_wallet_move"),
    path("<slug:slug>/rename/", views.team_rename, name="team_rename"),
    path("<slug:slug>/delete/", views.team_delete, name="team_delete"),
    path("<slug:slug>/leave/", views.team_leave, name="team_leave"),
    path("<slug:slug>/invite/", views.team_invite, name="team_invite"),
    path(
        "<slug:slug>/invitations/<int:invitation_id>/revoke/",
        views.team_invitation_revoke,
        name="team_invitation_revoke",
    ),
    path("<slug:slug>/members/<int:member_id>/role/", views.team_member_role, name="team_member_role"),
    path("<slug:slug>/members/<int:member_id>/limits/", views.team_member_limits, name="team_member_limits"),
    path("<slug:slug>/members/<int:member_id>/remove/", views.team_member_remove, name="team_member_remove"),
]
