from django.urls import path

from instances import staff_views

urlpatterns = [
    path("", staff_views.staff_fleet, name="staff_fleet"),
    path("<slug:slug>/sync/", staff_views.staff_fleet_sync, name="staff_fleet_sync"),
]
