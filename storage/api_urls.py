from django.urls import path
from rest_framework.routers import SimpleRouter

from storage import api

router = SimpleRouter()
router.register("volumes", api.VolumeViewSet, basename="api-volume")

urlpatterns = [
    path("volumes/<uuid:volume_id>/files/", api.VolumeFilesView.as_view(), name="api-volume-files"),
    path("volumes/<uuid:volume_id>/files/stat/", api.VolumeFileStatView.as_view(), name="api-volume-file-stat"),
    path("volumes/<uuid:volume_id>/files/folder/", api.VolumeFolderView.as_view(), name="api-volume-folder"),
    path(
        "volumes/<uuid:volume_id>/files/content/",
        api.VolumeFileContentView.as_view(),
        name="api-volume-file-content",
    ),
    *router.urls,
]
