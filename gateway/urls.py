from django.urls import path

from gateway import views

# Under instances/ (console/urls.py includes these before the instances app's own catch-all actions).
urlpatterns = [
    path("<uuid:pk>/files/", views.instance_files, name="instance_files"),
]
