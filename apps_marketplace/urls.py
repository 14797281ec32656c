from django.urls import path

from apps_marketplace import views

# Included at /apps/. "models" and "datasets" come before the app slug, so they are reserved slugs.
urlpatterns = [
    path("", views.app_index, name="apps"),
    path("models/", views.model_index, name="apps_models"),
    path("datasets/", views.dataset_index, name="apps_datasets"),
    path("<slug:slug>/", views.app_detail, name="apps_detail"),
]
