from django.urls import path

from apps_marketplace import views
from apps_marketplace.models import RESERVED_APP_SLUGS
from core.urls import slug_converter_except

# Included at /apps/. "models", "datasets" and "deployments" are pages, so an app's slug is never one of them.
slug_converter_except("app_slug", RESERVED_APP_SLUGS)
urlpatterns = [
    path("", views.app_index, name="apps"),
    path("models/", views.model_index, name="apps_models"),
    path("datasets/", views.dataset_index, name="apps_datasets"),
    path("deployments/", views.deployment_list, name="deployments"),
    path("deployments/<uuid:deployment_id>/", views.deployment_detail, name="deployment_detail"),
    path("deployments/<uuid:deployment_id>/<slug:verb>/", views.deployment_action, name="deployment_action"),
    path("<app_slug:slug>/", views.app_detail, name="apps_detail"),
    path("<app_slug:slug>/deploy/", views.app_deploy, name="apps_deploy"),
]
