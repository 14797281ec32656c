from django.urls import path

from privacy import views

urlpatterns = [
    path("", views.data, name="privacy_data"),
    path("export/", views.export_request, name="privacy_export_request"),
    path("export/<int:export_id>/download/", views.export_download, name="privacy_export_download"),
    path("delete/", views.deletion_request, name="privacy_deletion_request"),
    path("delete/cancel/", views.deletion_cancel, name="privacy_deletion_cancel"),
]

legal_urlpatterns = [
    path("accept/", views.accept, name="privacy_accept"),
    path("<str:kind>/", views.document, name="privacy_document"),
]

staff_urlpatterns = [
    path("", views.staff_index, name="privacy_staff"),
    path("documents/<str:kind>/new/", views.staff_draft_create, name="privacy_staff_draft_create"),
    path("documents/<int:version_id>/", views.staff_document, name="privacy_staff_document"),
]
