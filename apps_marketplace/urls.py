from django.urls import path

from apps_marketplace import views

# Included at /apps/. "models", "datasets" and "deployments" come before the app slug, so they are reserved slugs.
urlpatterns = [
    path("", views.app_index, name="apps"),
    path("models/", views.model_index, name="apps_models"),
    path("datasets/", views.dataset_index, name="apps_datasets"),
    path("deployments/", views.deployment_list, name="deployments"),
    path("deployments/<uuid:deployment_id>/", views.deployment_detail, name="deployment_detail"),
    path("deployments/<uuid:deployment_id>/<slug:verb>/", views.deployment_action, name="deployment_action"),
    path("<slug:slug>/", views.app_detail, name="apps_detail"),
    path("<slug:slug>/deploy/", views.app_deploy, name="apps_deploy"),
]
