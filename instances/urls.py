from django.urls import path

from core.urls import choice_converter
from instances import views

choice_converter("instance_action", views.ACTIONS)
choice_converter("image_action", views.IMAGE_ACTIONS)
choice_converter("snapshot_action", views.SNAPSHOT_ACTIONS)  # only the verbs: never another page under <pk>/

urlpatterns = [
    path("", views.instance_list, name="instances"),
    path("launch/", views.instance_launch, name="instance_launch"),
    path("<uuid:pk>/", views.instance_detail, name="instance_detail"),
    path("images/", views.image_list, name="images"),
    path("images/import/", views.image_import, name="image_import"),
    path("images/<slug:slug>/recipe/", views.image_recipe, name="image_recipe"),
    path("images/<slug:slug>/build/", views.image_build, name="image_build"),
    path("images/<slug:slug>/<image_action:action>/", views.image_change, name="image_change"),
    path("<uuid:pk>/rename/", views.instance_rename, name="instance_rename"),
    path("<uuid:pk>/save-image/", views.instance_save_image, name="instance_save_image"),
    path("<uuid:pk>/snapshots/", views.instance_snapshot_create, name="instance_snapshot_create"),
    path("<uuid:pk>/snapshot-schedule/", views.instance_snapshot_schedule, name="instance_snapshot_schedule"),
    path("<uuid:pk>/clone/", views.instance_clone, name="instance_clone"),
    path("snapshots/<slug:slug>/<snapshot_action:action>/", views.snapshot_change, name="snapshot_change"),
    path("<uuid:pk>/auto-stop/", views.instance_auto_stop, name="instance_auto_stop"),
    path("<uuid:pk>/resize/", views.instance_resize, name="instance_resize"),
    path("<uuid:pk>/secrets/", views.instance_secrets, name="instance_secrets"),
    # List rows build this as their detail URL + "<action>/" (one reverse per row, not four).
    path("<uuid:pk>/<instance_action:action>/", views.instance_action, name="instance_action"),
]
