from django.urls import path

from identity import staff_views

# Under /staff/identity/: organisations' real-name applications.
urlpatterns = [
    path("", staff_views.review_queue, name="identity_review_queue"),
    path("<int:verification_id>/document/", staff_views.review_document, name="identity_review_document"),
    path("<int:verification_id>/decide/", staff_views.review_decide, name="identity_review_decide"),
]
