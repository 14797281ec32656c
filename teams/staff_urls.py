from django.urls import path

from teams import staff_views

urlpatterns = [
    path("", staff_views.staff_teams, name="staff_teams"),
]
