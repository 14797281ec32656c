from django.urls import path

from vault import views

urlpatterns = [
    path("", views.secret_list, name="secrets"),
    path("registries/", views.registry_credential_add, name="registry_credential_add"),
    path("registries/<uuid:pk>/delete/", views.registry_credential_delete, name="registry_credential_delete"),
    path("<str:name>/replace/", views.secret_replace, name="secret_replace"),
    path("<str:name>/delete/", views.secret_delete, name="secret_delete"),
]
