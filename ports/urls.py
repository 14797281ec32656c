from django.urls import path

from ports import views

urlpatterns = [
    path("<uuid:pk>/ports/", views.ports_card, name="instance_ports"),
    path("<uuid:pk>/ports/add/", views.port_add, name="instance_port_add"),
    path("<uuid:pk>/ports/<int:port_id>/state/", views.port_state, name="instance_port_state"),
    path("<uuid:pk>/ports/<int:port_id>/remove/", views.port_remove, name="instance_port_remove"),
    path("<uuid:pk>/ports/<int:port_id>/shares/", views.share_add, name="instance_port_share_add"),
    path(
        "<uuid:pk>/ports/<int:port_id>/shares/<int:share_id>/revoke/",
        views.share_revoke,
        name="instance_port_share_revoke",
    ),
]
