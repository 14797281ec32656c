from django.urls import path
from rest_framework.routers import SimpleRouter

from storage import api, files_api

router = SimpleRouter()
router.register("volumes", api.VolumeViewSet, basename="api-volume")

urlpatterns = [
    path("volumes/<uuid:volume_id>/files/", files_api.VolumeFilesView.as_view(), name="api-volume-files"),
    path("volumes/<uuid:volume_id>/files/stat/", files_api.VolumeFileStatView.as_view(), name="api-volume-file-stat"),
    path("volumes/<uuid:volume_id>/files/folder/", files_api.VolumeFolderView.as_view(), name="api-volume-folder"),
    path(
        "volumes/<uuid:volume_id>/files/content/",
        files_api.VolumeFileContentView.as_view(),
        name="api-volume-file-content",
    ),
    *router.urls,
]
