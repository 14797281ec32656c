from django.urls import path

from instances import views

urlpatterns = [
    path("", views.quota, name="quota"),
    path("review/", views.quota_review, name="quota_review"),
    path("review/<int:pk>/<slug:decision>/", views.quota_decide, name="quota_decide"),
]
