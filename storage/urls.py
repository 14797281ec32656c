from django.urls import path

from storage import views

urlpatterns = [
    path("", views.volume_list, name="storage"),
    path("<uuid:pk>/", views.volume_detail, name="volume_detail"),
    path("<uuid:pk>/files/", views.volume_files, name="volume_files"),
    path("<uuid:pk>/resize/", views.volume_resize, name="volume_resize"),
    path("<uuid:pk>/delete/", views.volume_delete, name="volume_delete"),
    path("<uuid:pk>/attach/", views.volume_attach, name="volume_attach"),
    path("<uuid:pk>/attachments/<int:attachment_id>/detach/", views.volume_detach, name="volume_detach"),
]
