from django.urls import path

from gateway import api

urlpatterns = [
    path("instances/<uuid:instance_id>/files/", api.FilesView.as_view(), name="api-instance-files"),
    path("instances/<uuid:instance_id>/files/stat/", api.FileStatView.as_view(), name="api-instance-file-stat"),
    path("instances/<uuid:instance_id>/files/folder/", api.FolderView.as_view(), name="api-instance-folder"),
    path(
        "instances/<uuid:instance_id>/files/content/", api.FileContentView.as_view(), name="api-instance-file-content"
    ),
]
