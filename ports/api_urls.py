from django.urls import path

from ports import api

urlpatterns = [
    path("instances/<uuid:instance_id>/ports/", api.PortListView.as_view(), name="api-instance-ports"),
    path("instances/<uuid:instance_id>/ports/<int:port_id>/", api.PortDetailView.as_view(), name="api-instance-port"),
    path(
        "instances/<uuid:instance_id>/ports/<int:port_id>/shares/",
        api.ShareCreateView.as_view(),
        name="api-instance-port-shares",
    ),
    path(
        "instances/<uuid:instance_id>/ports/<int:port_id>/shares/<int:share_id>/revoke/",
        api.ShareRevokeView.as_view(),
        name="api-instance-port-share-revoke",
    ),
]
