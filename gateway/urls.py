from django.urls import path

from gateway import views

urlpatterns = [
    path("<uuid:pk>/files/", views.instance_files, name="instance_files"),
]
